#include "node/stage_record.h"

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/validate.h"

namespace pillar::node {

std::string StageRecordToJson(const StageRecord& r) {
  nlohmann::json j = {
      {"volumeID", r.volume_id},
      {"stagingPath", r.staging_path},
      {"protocol", ProtocolName(r.target.protocol)},
      {"targetID", r.target.target_id},
      {"address", r.target.address},
      {"port", r.target.port},
      {"nsid", r.target.nsid},
      {"lun", r.target.lun},
      {"block", r.block},
      {"fsType", r.fs_type},
      {"mountFlags", r.mount_flags},
      {"readOnly", r.read_only},
      {"device", r.device},
      {"state", r.state},
  };
  // A self-healing reconnect after a restart connects with the same timing.
  std::map<std::string, std::string> timing;
  FormatConnectionTiming(r.target.timing, &timing);
  if (!timing.empty()) j["timing"] = timing;
  return j.dump(2) + "\n";
}

StatusOr<StageRecord> StageRecordFromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("stage record is not JSON");
  StageRecord r;
  auto str = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto num = [&](const char* k, int64_t dflt) {
    auto it = j.find(k);
    return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : dflt;
  };
  auto flag = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  r.volume_id = str("volumeID");
  r.staging_path = str("stagingPath");
  ASSIGN_OR_RETURN(r.target.protocol, ParseProtocol("stage record protocol", str("protocol")));
  r.target.target_id = str("targetID");
  r.target.address = str("address");
  r.target.port = static_cast<int>(num("port", 0));
  r.target.nsid = num("nsid", 1);
  r.target.lun = num("lun", 0);
  if (auto it = j.find("timing"); it != j.end() && it->is_object()) {
    std::map<std::string, std::string> timing;
    for (const auto& [k, v] : it->items()) {
      if (v.is_string()) timing[k] = v.get<std::string>();
    }
    ASSIGN_OR_RETURN(r.target.timing, ParseConnectionTiming(timing, r.target.protocol,
                                                            "stage record timing.", false));
  }
  r.block = flag("block");
  r.fs_type = str("fsType");
  if (auto it = j.find("mountFlags"); it != j.end() && it->is_array()) {
    for (const auto& f : *it) {
      if (f.is_string()) r.mount_flags.push_back(f.get<std::string>());
    }
  }
  r.read_only = flag("readOnly");
  r.device = str("device");
  r.state = str("state");
  if (r.volume_id.empty()) return InvalidArgument("stage record has no volumeID");
  return r;
}

Status StageRecordStore::Init() { return fs_.MakeDirs(dir_); }

std::string StageRecordStore::PathFor(const std::string& volume_id) const {
  return JoinPath(dir_, volume_id + ".json");
}

StatusOr<StageRecord> StageRecordStore::Get(const std::string& volume_id) {
  RETURN_IF_ERROR(validate::ObjectName("volume_id", volume_id));
  auto text = fs_.ReadFile(PathFor(volume_id));
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) {
      return NotFound("volume " + volume_id + " is not staged on this node");
    }
    return text.status();
  }
  ASSIGN_OR_RETURN(StageRecord r, StageRecordFromJson(*text));
  if (r.volume_id != volume_id) {
    return Internal("stage record " + PathFor(volume_id) + " names volume " + r.volume_id);
  }
  return r;
}

Status StageRecordStore::Put(const StageRecord& r) {
  RETURN_IF_ERROR(validate::ObjectName("volume_id", r.volume_id));
  return fs_.WriteFileAtomic(PathFor(r.volume_id), StageRecordToJson(r));
}

Status StageRecordStore::Delete(const std::string& volume_id) {
  RETURN_IF_ERROR(validate::ObjectName("volume_id", volume_id));
  return fs_.Unlink(PathFor(volume_id));
}

std::vector<StageRecord> StageRecordStore::List() {
  std::vector<StageRecord> out;
  auto entries = fs_.ListDir(dir_);
  if (!entries.ok()) return out;
  for (const auto& e : *entries) {
    constexpr std::string_view kExt = ".json";
    if (e.type != DirEntry::Type::kFile || e.name.size() <= kExt.size() ||
        e.name.compare(e.name.size() - kExt.size(), kExt.size(), kExt) != 0) {
      continue;  // also skips WriteFileAtomic's temporaries
    }
    auto text = fs_.ReadFile(JoinPath(dir_, e.name));
    if (!text.ok()) continue;
    auto r = StageRecordFromJson(*text);
    if (!r.ok()) {
      log::Warn("unreadable stage record", {{"file", e.name}, {"error", r.status().message()}});
      continue;
    }
    out.push_back(std::move(r).value());
  }
  return out;
}

}  // namespace pillar::node
