// A pool of backend volumes on this storage node. Implementations drive the
// storage's own tools (losetup/truncate, lvm2, zfs) through Exec, and never
// run anything through a shell. Every operation is idempotent.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pillar::agent {

enum class VolumeMode { kBlock, kFilesystem };

const char* VolumeModeName(VolumeMode mode);

struct BackendVolume {
  std::string name;  // the volume component of "<pool>/<volume>"
  int64_t size_bytes = 0;
  VolumeMode mode = VolumeMode::kBlock;
  std::string device_path;  // block mode: the device the exporters serve
  std::string export_path;  // filesystem mode: the directory NFS serves
  // The lifecycle (pvst uid) whose storage this is, from the ownership mark
  // the backend keeps on the object itself; empty when the object carries
  // none (made by hand, or by a pillar older than the marks).
  std::string owner_uid;
  // What a create or expand has yet to finish before the volume may be
  // served (e.g. "zeroing from byte 1073741824"); empty when complete.
  // Expose refuses a volume with one; a retried Create or Expand finishes it.
  std::string pending;
  // Where the data came from, as agent.proto's Volume.origin says it:
  // "snapshot <pool>/<snapshot>", "volume <pool>/<volume>", or "" for a
  // volume made empty. Recorded on the object with the ownership mark.
  std::string origin;
};

// A read-only point-in-time copy of a volume, kept by the backend apart from
// its volumes (ZFS: a snapshot; lvm-thin: a thin snapshot LV; file: a copy).
struct BackendSnapshot {
  std::string name;           // the snapshot component of "<pool>/<snapshot>"
  std::string source_volume;  // the name of the volume it was taken of
  VolumeMode mode = VolumeMode::kBlock;
  int64_t size_bytes = 0;  // the source's size when taken: never 0
  int64_t creation_time_unix_nanos = 0;
  std::string owner_uid;   // its ownership mark: the snapshot's uid
  int64_t used_bytes = 0;  // what it takes on the pool now; 0 when unknown
  bool detached = false;   // keeps nothing of its source alive
  // Deleted, kept only while a volume made from it needs it: listed nowhere,
  // never a source, reclaimed by the backend.
  bool deleted = false;
};

// What a new volume starts as a copy of: a snapshot or another volume of the
// same pool, marked with source_uid (checked before it is read).
struct VolumeSource {
  enum class Kind { kSnapshot, kVolume };
  Kind kind = Kind::kSnapshot;
  std::string name;  // in the new volume's pool
  std::string source_uid;
  // A copy sharing nothing with the source, instead of a dependent clone.
  bool detached = false;
};

// "snapshot <pool>/<name>" or "volume <pool>/<name>": BackendVolume::origin.
std::string OriginOf(const std::string& pool, VolumeSource::Kind kind, const std::string& name);

// The permission bits and owner a new filesystem volume's root directory
// gets (the StorageClass parameters nfsRootMode and nfsRootOwner), so the
// squashed or unprivileged users of an NFS export can write to it.
struct VolumeRoot {
  uint32_t mode = 0;  // permission bits, setgid and sticky included: at most 07777
  uint32_t uid = 0;
  uint32_t gid = 0;

  bool operator==(const VolumeRoot&) const = default;
};

// Permission bits as four octal digits, as chmod takes them: "2770".
std::string OctalMode(uint32_t mode);
// "mode 2770, owner 1000:1000", for messages.
std::string DescribeVolumeRoot(const VolumeRoot& root);

struct PoolCapacity {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const std::string& pool() const = 0;  // validated pool name
  virtual std::string kind() const = 0;         // "file", "lvm", "lvm-thin", "zfs"
  virtual std::vector<VolumeMode> modes() const = 0;

  // Ownership: everything a backend creates carries `owner_uid` (the pvst
  // uid) on the object itself: an LV tag, a ZFS user property, a sidecar
  // file. Create on an existing object, Expand and Delete act only on an
  // object marked with the caller's uid; anything else is refused before a
  // single change (Create: ALREADY_EXISTS; Expand, Delete: FAILED_PRECONDITION),
  // so storage pillar did not make is never adopted, grown or removed.
  // SetOwner is the one way to mark an existing object (an explicit import,
  // or a volume of an older pillar that the agent's fencing mark vouches for).
  // MarkedBackend (marked_backend.h) applies these rules, once, for every
  // backend.

  // Creates the volume marked with owner_uid, or returns the existing one
  // when it is marked with owner_uid and matches
  // (same mode, size >= requested). A mismatch is ALREADY_EXISTS. The size
  // may be rounded up to the backend's allocation unit; the result carries
  // the real size. `params` are backend parameters only: a key the backend
  // does not know is INVALID_ARGUMENT, never silently ignored.
  // `root` (filesystem volumes only; INVALID_ARGUMENT with a block volume)
  // is given to the new volume's root directory once, before the volume is
  // complete and can be exposed; a retry after a crash in between still ends
  // with it, and a volume that was complete is never changed again (its
  // users may have changed it since). nullopt: the directory as the backend
  // makes it (root-owned 0755).
  virtual StatusOr<BackendVolume> Create(const std::string& name, int64_t size_bytes,
                                         VolumeMode mode,
                                         const std::map<std::string, std::string>& params,
                                         const std::string& owner_uid,
                                         const std::optional<VolumeRoot>& root) = 0;
  // Grows to at least size_bytes (rounded up as Create rounds). A request
  // that rounds to the current size is a no-op, so a retry after a lost
  // reply succeeds; one below it is a shrink: OUT_OF_RANGE, nothing changes.
  virtual StatusOr<BackendVolume> Expand(const std::string& name, int64_t size_bytes,
                                         const std::string& owner_uid) = 0;
  // Create, starting as a copy of `source` (never changed by it): a clone
  // where the backend has them, a full copy when source.detached (or where
  // the backend has nothing else), grown to size_bytes when that is larger
  // than the source; smaller is OUT_OF_RANGE. The source must exist
  // (NOT_FOUND; a deleted snapshot does not), have the same mode
  // (INVALID_ARGUMENT) and carry source.source_uid's mark
  // (FAILED_PRECONDITION, and it is not read). A volume made from a source
  // keeps the source's root directory: `root` is validated, not applied.
  // An existing volume of `name` is returned when Create would return it and
  // it was made from this same source (a retry; it is grown to size_bytes if
  // a crash cut the create short); made otherwise, ALREADY_EXISTS.
  virtual StatusOr<BackendVolume> CreateFrom(const std::string& name, int64_t size_bytes,
                                             VolumeMode mode,
                                             const std::map<std::string, std::string>& params,
                                             const std::string& owner_uid,
                                             const std::optional<VolumeRoot>& root,
                                             const VolumeSource& source) = 0;
  // Deletes the volume; a missing volume is success. A volume whose data a
  // snapshot still needs (ZFS) is hidden instead: gone from Get and List,
  // its name not reusable, reclaimed by the backend once nothing needs it.
  virtual Status Delete(const std::string& name, const std::string& owner_uid) = 0;
  // Marks an existing, unmarked object as owner_uid's; the same mark is a
  // no-op, another uid's mark ALREADY_EXISTS, a missing object NOT_FOUND.
  virtual Status SetOwner(const std::string& name, const std::string& owner_uid) = 0;
  // NOT_FOUND when the volume does not exist.
  virtual StatusOr<BackendVolume> Get(const std::string& name) = 0;
  virtual StatusOr<std::vector<BackendVolume>> List() = 0;
  virtual StatusOr<PoolCapacity> Capacity() = 0;

  // Makes the volume servable and returns the device or directory to export
  // (the file backend attaches its image to a loop device here). Never
  // creates storage: a missing volume is NOT_FOUND.
  virtual StatusOr<std::string> Expose(const std::string& name, VolumeMode mode) = 0;
  // Undoes Expose (detaches a loop device); a volume not exposed is success.
  virtual Status Unexpose(const std::string& name) = 0;

  // Snapshots. Names share the volumes' grammar and are unique in a pool.
  // CreateSnapshot takes a snapshot `name` of `volume`, which must carry
  // volume_uid's mark (FAILED_PRECONDITION otherwise, nothing read), marked
  // with snapshot_uid; it never changes the volume's data. An existing
  // snapshot of that name is returned when it is snapshot_uid's, of the same
  // volume and as detached; otherwise ALREADY_EXISTS. A backend without
  // cheap snapshots (linear LVM) answers FAILED_PRECONDITION naming why.
  virtual StatusOr<BackendSnapshot> CreateSnapshot(const std::string& volume,
                                                   const std::string& volume_uid,
                                                   const std::string& name,
                                                   const std::string& snapshot_uid,
                                                   bool detached) = 0;
  // Succeeds at once: the snapshot leaves every listing; what a volume made
  // from it still needs is kept, then reclaimed by the backend. A missing
  // snapshot is success; another lifecycle's is FAILED_PRECONDITION.
  virtual Status DeleteSnapshot(const std::string& name, const std::string& snapshot_uid) = 0;
  // NOT_FOUND when there is none (or it was deleted).
  virtual StatusOr<BackendSnapshot> GetSnapshot(const std::string& name) = 0;
  virtual StatusOr<std::vector<BackendSnapshot>> ListSnapshots() = 0;
};

}  // namespace pillar::agent
