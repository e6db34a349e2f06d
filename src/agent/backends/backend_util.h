// Checks and parsers every backend shares, so the rules of backend.h (names
// validated first, idempotent Create, Expand never shrinks) are written once.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "agent/backends/backend.h"
#include "common/exec.h"
#include "common/fs.h"
#include "common/status.h"

namespace pillar::agent::backend_util {

// Commands that change storage may wait on udev or a busy pool; queries
// should answer quickly, and a hung one must not hold a request forever.
inline constexpr std::chrono::seconds kQueryTimeout{30};
inline constexpr std::chrono::seconds kChangeTimeout{120};

// INVALID_ARGUMENT unless `name` is a valid volume name; call before the
// name reaches a path or a command line.
Status CheckVolumeName(const std::string& name);
// INVALID_ARGUMENT unless `name` is a valid snapshot name (a volume name).
Status CheckSnapshotName(const std::string& name);
// INVALID_ARGUMENT unless size_bytes > 0.
Status CheckSize(const std::string& volume_id, int64_t size_bytes);
// INVALID_ARGUMENT when `mode` is not one the backend serves.
Status CheckMode(const Backend& backend, VolumeMode mode);
// INVALID_ARGUMENT unless `root` is absent, or given with a filesystem volume
// and holds a mode of at most 07777 and an owner below 2^32-1 (which chown
// takes for "unchanged").
Status CheckRoot(const std::string& volume_id, VolumeMode mode,
                 const std::optional<VolumeRoot>& root);
// INVALID_ARGUMENT naming the first key that is not in `allowed`.
Status CheckParamKeys(const std::string& kind, const std::map<std::string, std::string>& params,
                      const std::set<std::string>& allowed);

// INVALID_ARGUMENT unless the uid a source must carry is a UUID.
Status CheckSourceUid(const std::string& source_uid);
// Create on an existing volume: ALREADY_EXISTS unless it was made from the
// same origin (BackendVolume::origin; "" for none) as asked.
Status CheckSameOrigin(const std::string& volume_id, const std::string& found,
                       const std::string& wanted);
// A volume made from a source (`origin`, for messages): INVALID_ARGUMENT for
// another mode, OUT_OF_RANGE for a size below the source's.
Status CheckSourceFits(const std::string& volume_id, const std::string& origin, VolumeMode mode,
                       int64_t size_bytes, VolumeMode source_mode, int64_t source_bytes);
// CreateSnapshot found `object` of the name: OK when it is snapshot_uid's,
// of `volume` and as detached as asked; else ALREADY_EXISTS naming why.
Status CheckExistingSnapshot(const std::string& object, const BackendSnapshot& found,
                             const std::string& volume, const std::string& snapshot_uid,
                             bool detached);

// Create on an existing volume: OK when it has the requested mode and at
// least the requested size, otherwise ALREADY_EXISTS naming both.
Status CheckExistingMatches(const std::string& volume_id, const BackendVolume& existing,
                            VolumeMode mode, int64_t size_bytes);

// Ownership (see backend.h). `object` names what was found, e.g.
// "file pool p: precious.img"; `found` is its mark's uid ("" when unmarked).
// INVALID_ARGUMENT unless owner_uid is a UUID.
Status CheckOwnerUid(const std::string& owner_uid);
// Create found `object`: OK when it is owner_uid's, else ALREADY_EXISTS
// naming it (and how to import it when it carries no mark at all).
Status CheckCreateOwner(const std::string& object, const std::string& found,
                        const std::string& owner_uid);
// Expand or Delete (`verb`) of `object`: FAILED_PRECONDITION unless it is
// marked with owner_uid.
Status CheckOwner(const std::string& verb, const std::string& object, const std::string& found,
                  const std::string& owner_uid);
// SetOwner of `object`: true when the mark must be written, false when it
// already is owner_uid's, ALREADY_EXISTS when it is another lifecycle's.
StatusOr<bool> NeedsOwnerMark(const std::string& object, const std::string& found,
                              const std::string& owner_uid);

enum class Growth { kNone, kGrow };
// Expand of a volume of `current` bytes to `target` (the request already
// rounded up to the backend's allocation unit): kNone when equal, kGrow when
// larger, OUT_OF_RANGE when smaller, since a shrink would destroy data.
StatusOr<Growth> PlanExpand(const std::string& volume_id, int64_t current, int64_t target);

// Rounds up to a multiple of unit (> 0); OUT_OF_RANGE on overflow.
StatusOr<int64_t> RoundUp(int64_t value, int64_t unit);

// Runs the command, requires exit 0 and returns its stdout.
StatusOr<std::string> RunForOutput(Exec& exec, const Command& cmd);

// Parses a tool's JSON output; INTERNAL naming the command on bad input.
StatusOr<nlohmann::json> ParseJsonOutput(const Command& cmd, const std::string& out);
// `text` without trailing newlines and spaces (tools end their output with one).
std::string TrimEnd(std::string text);
// A non-negative decimal integer, whole string; nullopt otherwise.
std::optional<int64_t> ParseCount(std::string_view text);

// Takes the group and other bits off `dir`, the directory a pool's volumes
// live below, so no local user of the storage node reaches a volume (a 0777
// NFS root) through it; logs `what` ("pool directory") of `pool` when it did.
Status KeepPrivateToRoot(Fs& fs, const std::string& dir, const std::string& pool,
                         const std::string& what);

}  // namespace pillar::agent::backend_util
