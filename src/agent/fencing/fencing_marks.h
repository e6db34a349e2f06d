// Per-volume fencing marks: the newest (lifecycle uid, publication generation)
// the agent has accepted for each backend volume, kept on disk so that a stale
// controller (an old leader, a delayed retry) can never undo a newer write,
// not even across an agent restart.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/fs.h"
#include "common/status.h"

namespace pillar::agent {

constexpr const char* kDefaultFencingRoot = "/var/lib/pillar-csi/agent/generations";

struct Mark {
  std::string volume_uid;  // the pvst uid: one lifecycle of the volume
  int64_t generation = 0;  // the pvst publicationGeneration
  std::string updated;     // RFC 3339, when the mark was last written

  bool operator==(const Mark&) const = default;
};

// One JSON file per agent volume id under `root`:
// {"volumeUid": ..., "generation": ..., "updated": ...}. ABORTED is returned
// only for fencing refusals, so callers can map it to StaleGeneration. A mark
// that cannot be read or parsed is INTERNAL naming the file, never "no mark":
// that would unfence the volume.
class FencingMarks {
 public:
  FencingMarks(Fs& fs, Clock& clock, std::string root = kDefaultFencingRoot);

  // OK when there is no mark, or the mark has this uid and generation <= the
  // offered one; ABORTED naming the held and offered pair otherwise.
  Status Check(const std::string& agent_volume_id, const std::string& uid, int64_t generation);

  // Check, then persist the offered generation atomically when it is newer
  // (or there is no mark). An equal generation writes nothing.
  Status Advance(const std::string& agent_volume_id, const std::string& uid, int64_t generation);

  StatusOr<std::optional<Mark>> Get(const std::string& agent_volume_id);

  // Starts a lifecycle at CreateVolume: writes {uid, 0} when there is no mark;
  // a mark of the same uid is kept as it is (a retried create must not lower
  // the generation); another uid's mark is ALREADY_EXISTS.
  Status Reset(const std::string& agent_volume_id, const std::string& uid);

  // Ends a lifecycle at DeleteVolume: drops the mark of this uid; absent is
  // success; another uid's mark is ABORTED.
  Status Remove(const std::string& agent_volume_id, const std::string& uid);

  // The mark file of a volume id: "<root>/<escaped id>.json", with the
  // escaping of TargetName (no '/', never "." or "..", injective).
  std::string MarkPath(const std::string& agent_volume_id) const;

 private:
  StatusOr<std::optional<Mark>> ReadLocked(const std::string& agent_volume_id);
  Status WriteLocked(const std::string& agent_volume_id, const std::string& uid,
                     int64_t generation);
  Status CheckLocked(const std::string& agent_volume_id, const std::optional<Mark>& held,
                     const std::string& uid, int64_t generation);

  Fs& fs_;
  Clock& clock_;
  std::string root_;
  std::mutex mu_;
};

}  // namespace pillar::agent
