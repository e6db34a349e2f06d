#include "agent/backends/backend_util.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "common/log.h"
#include "common/validate.h"

namespace pillar::agent::backend_util {

Status CheckVolumeName(const std::string& name) { return validate::VolumeName("volume", name); }

Status CheckSnapshotName(const std::string& name) { return validate::VolumeName("snapshot", name); }

Status CheckSourceUid(const std::string& source_uid) {
  return validate::Uuid("sourceUid", source_uid);
}

Status CheckSameOrigin(const std::string& volume_id, const std::string& found,
                       const std::string& wanted) {
  if (found == wanted) return Status::Ok();
  auto describe = [](const std::string& origin) {
    return origin.empty() ? std::string("empty") : "from " + origin;
  };
  return AlreadyExists("volume " + volume_id + " already exists, made " + describe(found) +
                       "; requested " + describe(wanted));
}

Status CheckSourceFits(const std::string& volume_id, const std::string& origin, VolumeMode mode,
                       int64_t size_bytes, VolumeMode source_mode, int64_t source_bytes) {
  if (mode != source_mode) {
    return InvalidArgument("volume " + volume_id + ": " + origin + " is " +
                           VolumeModeName(source_mode) + ", cannot make a " + VolumeModeName(mode) +
                           " volume of it");
  }
  if (size_bytes < source_bytes) {
    return OutOfRange("volume " + volume_id + ": " + std::to_string(size_bytes) +
                      " bytes is less than the " + std::to_string(source_bytes) + " bytes of " +
                      origin);
  }
  return Status::Ok();
}

Status CheckExistingSnapshot(const std::string& object, const BackendSnapshot& found,
                             const std::string& volume, const std::string& snapshot_uid,
                             bool detached) {
  if (found.deleted) {
    return AlreadyExists(object +
                         " was deleted and is kept for the volumes made from it; the name is "
                         "taken until they go");
  }
  if (found.owner_uid != snapshot_uid) {
    return AlreadyExists(object + " exists and belongs to " +
                         (found.owner_uid.empty() ? std::string("no lifecycle (no ownership mark)")
                                                  : "lifecycle " + found.owner_uid) +
                         ", not " + snapshot_uid);
  }
  if (found.source_volume != volume) {
    return AlreadyExists(object + " exists and was taken of volume " + found.source_volume +
                         ", not " + volume);
  }
  // A detached snapshot serves a request for a dependent one, not the reverse.
  if (detached && !found.detached) {
    return AlreadyExists(object + " exists and is not detached; requested a detached one");
  }
  return Status::Ok();
}

Status CheckSize(const std::string& volume_id, int64_t size_bytes) {
  if (size_bytes <= 0) {
    return InvalidArgument("volume " + volume_id + ": size must be positive, got " +
                           std::to_string(size_bytes));
  }
  return Status::Ok();
}

Status CheckMode(const Backend& backend, VolumeMode mode) {
  for (VolumeMode m : backend.modes()) {
    if (m == mode) return Status::Ok();
  }
  return InvalidArgument(backend.kind() + " pool " + backend.pool() + " serves no " +
                         VolumeModeName(mode) + " volumes");
}

Status CheckRoot(const std::string& volume_id, VolumeMode mode,
                 const std::optional<VolumeRoot>& root) {
  if (!root) return Status::Ok();
  if (mode != VolumeMode::kFilesystem) {
    return InvalidArgument("volume " + volume_id +
                           ": a root directory mode and owner apply to filesystem volumes only");
  }
  if (root->mode > 07777) {
    return InvalidArgument("volume " + volume_id + ": root mode " + std::to_string(root->mode) +
                           " is not a permission mode (at most 07777)");
  }
  if (root->uid == UINT32_MAX || root->gid == UINT32_MAX) {
    return InvalidArgument("volume " + volume_id + ": root owner uid and gid must be at most " +
                           std::to_string(UINT32_MAX - 1));
  }
  return Status::Ok();
}

Status CheckParamKeys(const std::string& kind, const std::map<std::string, std::string>& params,
                      const std::set<std::string>& allowed) {
  auto bad = std::find_if(params.begin(), params.end(),
                          [&](const auto& kv) { return allowed.count(kv.first) == 0; });
  if (bad == params.end()) return Status::Ok();
  return InvalidArgument(kind + " backend: unsupported parameter '" + bad->first + "'");
}

Status CheckExistingMatches(const std::string& volume_id, const BackendVolume& existing,
                            VolumeMode mode, int64_t size_bytes) {
  if (existing.mode == mode && existing.size_bytes >= size_bytes) return Status::Ok();
  return AlreadyExists("volume " + volume_id + " already exists as " +
                       VolumeModeName(existing.mode) + " of " +
                       std::to_string(existing.size_bytes) + " bytes; requested " +
                       VolumeModeName(mode) + " of " + std::to_string(size_bytes) + " bytes");
}

Status CheckOwnerUid(const std::string& owner_uid) {
  return validate::Uuid("volumeUid", owner_uid);
}

Status CheckCreateOwner(const std::string& object, const std::string& found,
                        const std::string& owner_uid) {
  if (found == owner_uid) return Status::Ok();
  if (found.empty()) {
    return AlreadyExists(object +
                         " exists and is not pillar's (it carries no ownership mark); import it "
                         "with the CreateVolume parameter import=true, or remove or rename it");
  }
  return AlreadyExists(object + " exists and belongs to lifecycle " + found + ", not " + owner_uid);
}

Status CheckOwner(const std::string& verb, const std::string& object, const std::string& found,
                  const std::string& owner_uid) {
  if (found == owner_uid) return Status::Ok();
  return FailedPrecondition(
      object + " is " +
      (found.empty() ? "not pillar's (no ownership mark)" : "lifecycle " + found + "'s") +
      "; refusing to " + verb + " it for lifecycle " + owner_uid + ", nothing was changed");
}

StatusOr<bool> NeedsOwnerMark(const std::string& object, const std::string& found,
                              const std::string& owner_uid) {
  if (found == owner_uid) return false;
  if (!found.empty()) {
    return AlreadyExists(object + " already belongs to lifecycle " + found +
                         "; cannot mark it as " + owner_uid + "'s");
  }
  return true;
}

StatusOr<Growth> PlanExpand(const std::string& volume_id, int64_t current, int64_t target) {
  if (target == current) return Growth::kNone;
  if (target > current) return Growth::kGrow;
  return OutOfRange("volume " + volume_id + " has " + std::to_string(current) +
                    " bytes; refusing to shrink it to " + std::to_string(target));
}

StatusOr<int64_t> RoundUp(int64_t value, int64_t unit) {
  int64_t rem = value % unit;
  if (rem == 0) return value;
  if (value > std::numeric_limits<int64_t>::max() - (unit - rem)) {
    return OutOfRange("size " + std::to_string(value) + " is too large");
  }
  return value + (unit - rem);
}

StatusOr<std::string> RunForOutput(Exec& exec, const Command& cmd) {
  ExecResult result;
  RETURN_IF_ERROR(exec.RunOk(cmd, &result));
  return std::move(result.out);
}

StatusOr<nlohmann::json> ParseJsonOutput(const Command& cmd, const std::string& out) {
  nlohmann::json doc = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return Internal("output of '" + cmd.ToString() + "' is not valid JSON");
  }
  return doc;
}

std::string TrimEnd(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::optional<int64_t> ParseCount(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0) return std::nullopt;
  return value;
}

Status KeepPrivateToRoot(Fs& fs, const std::string& dir, const std::string& pool,
                         const std::string& what) {
  ASSIGN_OR_RETURN(mode_t mode, fs.Mode(dir));
  if ((mode & 077) == 0) return Status::Ok();
  RETURN_IF_ERROR(fs.Chmod(dir, mode & 07700));
  log::Info(what + " made private to root",
            {{"pool", pool}, {"dir", dir}, {"wasMode", static_cast<unsigned>(mode)}});
  return Status::Ok();
}

}  // namespace pillar::agent::backend_util
