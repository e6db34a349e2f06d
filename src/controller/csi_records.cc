#include "controller/csi_records.h"

#include "common/grpc_status.h"

namespace pillar::controller {

grpc::Status Reply(const Status& s) { return ToGrpc(s); }

bool AgentRefusedCreate(const Status& s) {
  switch (s.code()) {
    case Code::kInvalidArgument:
    case Code::kAlreadyExists:
    case Code::kNotFound:
    case Code::kFailedPrecondition:
    case Code::kOutOfRange:
    case Code::kPermissionDenied:
    case Code::kUnimplemented:
    case Code::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

api::VolumeStatus LoadStatusOrEmpty(const store::Object& obj) {
  auto s = api::VolumeStatusFromJson(obj.status);
  return s.ok() ? *s : api::VolumeStatus{};
}

StatusOr<store::Object> GetRecord(store::Store& st, const char* kind, const std::string& name,
                                  const std::string& absent) {
  auto obj = st.Get(kind, name);
  if (obj.ok()) return obj;
  if (obj.status().code() == Code::kNotFound || obj.status().code() == Code::kInvalidArgument) {
    return NotFound(absent);
  }
  return obj.status();
}

StatusOr<store::Object> GetVolume(store::Store& st, const std::string& volume_id) {
  return GetRecord(st, api::kKindVolume, volume_id, "volume " + volume_id + " does not exist");
}

StatusOr<api::VolumeState> GetProvisionedVolume(store::Store& st, const std::string& volume_id) {
  ASSIGN_OR_RETURN(store::Object obj, GetVolume(st, volume_id));
  ASSIGN_OR_RETURN(api::VolumeState v, api::LoadVolume(obj));
  if (!api::IsProvisioned(v.status)) {
    return NotFound("volume " + volume_id + " is not provisioned: its create has not completed");
  }
  return v;
}

}  // namespace pillar::controller
