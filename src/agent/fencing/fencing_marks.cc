#include "agent/fencing/fencing_marks.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "agent/exporters/exporter.h"
#include "common/validate.h"

namespace pillar::agent {
namespace {

Status ValidateArgs(const std::string& agent_volume_id, const std::string& uid) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent volume id", agent_volume_id));
  return validate::Uuid("volume uid", uid);
}

Status ValidateGeneration(const std::string& agent_volume_id, int64_t generation) {
  if (generation < 0) {
    return InvalidArgument("fencing mark of volume " + agent_volume_id + ": generation " +
                           std::to_string(generation) + " is negative");
  }
  return Status::Ok();
}

std::string Describe(const std::string& uid, int64_t generation) {
  return "lifecycle " + uid + " generation " + std::to_string(generation);
}

}  // namespace

FencingMarks::FencingMarks(Fs& fs, Clock& clock, std::string root)
    : fs_(fs), clock_(clock), root_(std::move(root)) {}

std::string FencingMarks::MarkPath(const std::string& agent_volume_id) const {
  // TargetName("x", id) is "x:<escaped>"; the escaped part alone is the name.
  return JoinPath(root_, TargetName("x", agent_volume_id).substr(2) + ".json");
}

StatusOr<std::optional<Mark>> FencingMarks::ReadLocked(const std::string& agent_volume_id) {
  std::string path = MarkPath(agent_volume_id);
  auto text = fs_.ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return std::optional<Mark>();
    return Internal("fencing mark " + path + " of volume " + agent_volume_id +
                    " cannot be read: " + text.status().message());
  }
  auto corrupt = [&](const std::string& why) {
    return Internal("fencing mark " + path + " of volume " + agent_volume_id + " is corrupt (" +
                    why + "); refusing to treat it as absent");
  };
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt("not a JSON object");
  auto uid = j.find("volumeUid");
  auto gen = j.find("generation");
  auto updated = j.find("updated");
  if (uid == j.end() || !uid->is_string()) return corrupt("volumeUid is not a string");
  if (gen == j.end() || !gen->is_number_integer()) {
    return corrupt("generation is not an integer");
  }
  if (updated != j.end() && !updated->is_string()) return corrupt("updated is not a string");
  Mark mark;
  mark.volume_uid = uid->get<std::string>();
  if (!validate::Uuid("volumeUid", mark.volume_uid).ok()) return corrupt("volumeUid is no UUID");
  if (gen->is_number_unsigned() && gen->get<uint64_t>() > INT64_MAX) {
    return corrupt("generation out of range");
  }
  mark.generation = gen->get<int64_t>();
  if (mark.generation < 0) return corrupt("generation is negative");
  if (updated != j.end()) mark.updated = updated->get<std::string>();
  return std::optional<Mark>(std::move(mark));
}

Status FencingMarks::WriteLocked(const std::string& agent_volume_id, const std::string& uid,
                                 int64_t generation) {
  nlohmann::json j = {
      {"volumeUid", uid}, {"generation", generation}, {"updated", FormatRfc3339(clock_.Now())}};
  Status s = fs_.MakeDirs(root_);
  if (s.ok()) s = fs_.WriteFileAtomic(MarkPath(agent_volume_id), j.dump() + "\n");
  if (!s.ok()) {
    return Internal("fencing mark of volume " + agent_volume_id +
                    " cannot be written: " + s.message());
  }
  return Status::Ok();
}

Status FencingMarks::CheckLocked(const std::string& agent_volume_id,
                                 const std::optional<Mark>& held, const std::string& uid,
                                 int64_t generation) {
  if (!held) return Status::Ok();
  if (held->volume_uid != uid) {
    return Aborted("fencing: volume " + agent_volume_id + " is held by " +
                   Describe(held->volume_uid, held->generation) + "; refused " +
                   Describe(uid, generation) + " (another lifecycle)");
  }
  if (generation < held->generation) {
    return Aborted("fencing: volume " + agent_volume_id + " is held by " +
                   Describe(held->volume_uid, held->generation) + "; refused " +
                   Describe(uid, generation) + " (stale generation)");
  }
  return Status::Ok();
}

Status FencingMarks::Check(const std::string& agent_volume_id, const std::string& uid,
                           int64_t generation) {
  RETURN_IF_ERROR(ValidateArgs(agent_volume_id, uid));
  RETURN_IF_ERROR(ValidateGeneration(agent_volume_id, generation));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(auto held, ReadLocked(agent_volume_id));
  return CheckLocked(agent_volume_id, held, uid, generation);
}

Status FencingMarks::Advance(const std::string& agent_volume_id, const std::string& uid,
                             int64_t generation) {
  RETURN_IF_ERROR(ValidateArgs(agent_volume_id, uid));
  RETURN_IF_ERROR(ValidateGeneration(agent_volume_id, generation));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(auto held, ReadLocked(agent_volume_id));
  RETURN_IF_ERROR(CheckLocked(agent_volume_id, held, uid, generation));
  if (held && held->generation == generation) return Status::Ok();
  return WriteLocked(agent_volume_id, uid, generation);
}

StatusOr<std::optional<Mark>> FencingMarks::Get(const std::string& agent_volume_id) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent volume id", agent_volume_id));
  std::lock_guard<std::mutex> lock(mu_);
  return ReadLocked(agent_volume_id);
}

Status FencingMarks::Reset(const std::string& agent_volume_id, const std::string& uid) {
  RETURN_IF_ERROR(ValidateArgs(agent_volume_id, uid));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(auto held, ReadLocked(agent_volume_id));
  if (held) {
    if (held->volume_uid == uid) return Status::Ok();
    return AlreadyExists("fencing: volume " + agent_volume_id + " already belongs to " +
                         Describe(held->volume_uid, held->generation) +
                         "; cannot start lifecycle " + uid + " until that one is deleted");
  }
  return WriteLocked(agent_volume_id, uid, 0);
}

Status FencingMarks::Remove(const std::string& agent_volume_id, const std::string& uid) {
  RETURN_IF_ERROR(ValidateArgs(agent_volume_id, uid));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(auto held, ReadLocked(agent_volume_id));
  if (!held) return Status::Ok();
  if (held->volume_uid != uid) {
    return Aborted("fencing: volume " + agent_volume_id + " is held by " +
                   Describe(held->volume_uid, held->generation) + "; refused removal by " +
                   "lifecycle " + uid + " (another lifecycle)");
  }
  Status s = fs_.Unlink(MarkPath(agent_volume_id));
  if (!s.ok()) {
    return Internal("fencing mark of volume " + agent_volume_id +
                    " cannot be removed: " + s.message());
  }
  return Status::Ok();
}

}  // namespace pillar::agent
