// Backend "zfs": a pool is a parent dataset ("tank/pillar"); its volumes are
// the direct children: zvols (block, volmode=dev) and file systems with a
// refquota (filesystem mode), driven through the zfs CLI's parsable output.
//
// Create takes ZFS properties from an allowlist (see kBlockParams and
// kFilesystemParams in zfs_backend.cc) plus "thin" ("true" makes a sparse
// zvol without refreservation); anything else is INVALID_ARGUMENT.
//
// Ownership (backend.h) is the user property pillar-csi:volume-uid, set by
// zfs create. User properties inherit, so a parent dataset carrying it would
// mark every child: the backend refuses to work under such a parent.
//
// A file system's root directory mode and owner (Create's `root`) can only
// be set once it exists and is mounted, so zfs create records them in the
// user property pillar-csi:root-pending along with the ownership mark; they
// are applied, then the property cleared. A dataset still carrying it is
// not exposed, and a retried Create finishes it: a crash in between never
// leaves a volume with the wrong root, and a finished one is never changed.
//
// Snapshots are ZFS snapshots <dataset>/<volume>@<snapshot>, marked with the
// user property pillar-csi:snapshot-uid and carrying the volume's size in
// pillar-csi:size-bytes. A volume made from one is a `zfs clone` (or, with
// source.detached, `zfs send | zfs receive` of it), marked, recording
// pillar-csi:origin, with the source's local properties carried over. A
// clone of a volume goes through a snapshot "@pillar:clone:<new volume>"
// destroyed at once with `zfs destroy -d` (deferred: it goes with the clone).
// A detached snapshot (VolumeSnapshotClass detached) is sent whole, through
// "@pillar:send:<snapshot>", into a dataset of its own,
// "<volume>:snapshot:<snapshot>" (no volume either; never mounted, no device
// node), whose one snapshot "@<snapshot>" it is: marks and the properties a
// restore carries over on that dataset, inherited by the snapshot. Nothing
// of the volume is kept for it, nor of it for the volume.
// DeleteSnapshot is `zfs destroy -d`: a snapshot clones still need is kept
// (defer_destroy=on, listed nowhere) until the last of them goes. A volume
// with snapshots cannot be destroyed: Delete renames it to
// "<volume>:deleted:<uid>" (':' is in no volume name, so it is no volume
// and its name is free), and the backend destroys it once it has no
// snapshots left (after every Delete and DeleteSnapshot that may end that).
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/backends/backend.h"
#include "agent/backends/marked_backend.h"
#include "common/exec.h"
#include "common/fs.h"
#include "common/validate.h"

namespace pillar::agent {

// One row of `zfs list`, as parsed.
struct ZfsRow {
  std::string name;  // the child component only
  VolumeMode mode = VolumeMode::kBlock;
  int64_t size_bytes = 0;   // volsize, or refquota (0: none)
  std::string mountpoint;   // "" unless an absolute path
  int64_t block_bytes = 0;  // volblocksize of a zvol
  std::string owner_uid;    // pillar-csi:volume-uid; "" when unset
  // pillar-csi:root-pending: the root directory mode and owner a create
  // has yet to apply; nullopt when there is none.
  std::optional<VolumeRoot> root_pending;
  std::string pool_mountpoint;  // the parent dataset's; "" unless an absolute path
  // pillar-csi:origin: "snapshot:<name>" or "volume:<name>"; "" when unset.
  std::string origin;
  // No volume: a deleted one kept for its snapshots ("<volume>:deleted:<uid>")
  // or a detached snapshot's own dataset ("<volume>:snapshot:<snapshot>").
  bool hidden = false;
};

// One row of `zfs list -t snapshot`, as parsed.
struct ZfsSnapshotRow {
  BackendSnapshot snapshot;
  std::string dataset;      // the child component holding it (a hidden one too)
  int64_t block_bytes = 0;  // volblocksize of a zvol's snapshot
  bool internal = false;    // pillar's own "@pillar:clone:", "@pillar:copy:", "@pillar:send:"
};

class ZfsBackend : public MarkedBackend<ZfsRow> {
 public:
  // `dataset` should pass validate::PoolName; every operation re-checks it
  // and runs nothing when it does not. `fs` is used to see whether a zvol's
  // device node has appeared yet and to set a file system's root directory.
  ZfsBackend(std::string dataset, Exec& exec, Fs& fs)
      : dataset_(std::move(dataset)), exec_(exec), fs_(fs) {}

  const std::string& pool() const override { return dataset_; }
  std::string kind() const override { return "zfs"; }
  std::vector<VolumeMode> modes() const override {
    return {VolumeMode::kBlock, VolumeMode::kFilesystem};
  }

  // Create rounds a zvol's size up to whole volume blocks (volblocksize, or
  // 16 KiB, the largest default of current OpenZFS, when it is not given).
  // Delete runs zfs destroy without -r/-R/-f: a volume with snapshots is
  // hidden (see above); one with other children or users is
  // FAILED_PRECONDITION carrying zfs's own message.
  // Capacity is the parent dataset's available space; total = available +
  // used.
  // Expose, block: /dev/zvol/<dataset>/<name>, UNAVAILABLE until udev made
  // it; filesystem: takes group and other bits off the pool's own mountpoint
  // (KeepPoolPrivate), mounts it if needed and returns its mountpoint.
  // Unexpose has nothing to undo: the zvol node and the mount stay as zfs
  // keeps them.

 protected:
  Status CheckConfig() const override { return validate::PoolName("pool", dataset_); }
  // The allowlist of zfs_backend.cc.
  Status CheckParams(VolumeMode mode,
                     const std::map<std::string, std::string>& params) const override;
  // A bad volblocksize, or a size that cannot be rounded to it.
  Status PrepareCreate(int64_t size_bytes, VolumeMode mode,
                       const std::map<std::string, std::string>& params) override;
  StatusOr<std::optional<ZfsRow>> FindRow(const std::string& name) override;
  BackendVolume ToVolume(const ZfsRow& row) const override;
  std::string Object(const std::string& name, const ZfsRow& /*row*/) const override {
    return "zfs pool " + dataset_ + ": dataset " + Id(name);
  }
  StatusOr<BackendVolume> DoCreate(const std::string& name, int64_t size_bytes, VolumeMode mode,
                                   const std::map<std::string, std::string>& params,
                                   const std::string& owner_uid,
                                   const std::optional<VolumeRoot>& root,
                                   std::unique_lock<std::mutex>& lock) override;
  // Applies the root a create left pending, with what that create recorded;
  // a complete dataset is never changed again.
  StatusOr<BackendVolume> ResumeCreate(const ZfsRow& row,
                                       std::unique_lock<std::mutex>& lock) override;
  StatusOr<BackendVolume> DoExpand(const ZfsRow& row, int64_t size_bytes,
                                   std::unique_lock<std::mutex>& lock) override;
  Status DoDelete(const std::string& name, const std::optional<ZfsRow>& row) override;
  Status WriteMark(const ZfsRow& row, const std::string& owner_uid) override;
  StatusOr<std::vector<BackendVolume>> ListVolumes() override;
  StatusOr<PoolCapacity> ReadCapacity() override;
  StatusOr<std::string> DoExpose(const ZfsRow& row) override;
  Status DoUnexpose(const std::string& /*name*/) override { return Status::Ok(); }

  StatusOr<std::optional<BackendSnapshot>> FindSnapshotRow(const std::string& name) override;
  StatusOr<std::vector<BackendSnapshot>> ListSnapshotRows() override;
  StatusOr<BackendSnapshot> DoCreateSnapshot(const ZfsRow& row, const std::string& name,
                                             const std::string& snapshot_uid, bool detached,
                                             std::unique_lock<std::mutex>& lock) override;
  Status DoDeleteSnapshot(const BackendSnapshot& snap) override;
  StatusOr<BackendVolume> DoCreateFromSnapshot(const std::string& name, int64_t size_bytes,
                                               VolumeMode mode,
                                               const std::map<std::string, std::string>& params,
                                               const std::string& owner_uid,
                                               const BackendSnapshot& snap, bool detached,
                                               std::unique_lock<std::mutex>& lock) override;
  StatusOr<BackendVolume> DoCloneVolume(const std::string& name, int64_t size_bytes,
                                        VolumeMode mode,
                                        const std::map<std::string, std::string>& params,
                                        const std::string& owner_uid, const ZfsRow& source,
                                        bool detached, std::unique_lock<std::mutex>& lock) override;

 private:
  // Every snapshot of the pool's children, hidden volumes' and pillar's own
  // internal ones included.
  StatusOr<std::vector<ZfsSnapshotRow>> ListSnapshotsOfPool();
  StatusOr<std::optional<ZfsSnapshotRow>> FindZfsSnapshot(const std::string& name);
  // The properties of `dataset` (a child) set locally that a copy carries
  // over: the allowlist of zfs_backend.cc for `mode`.
  StatusOr<std::map<std::string, std::string>> LocalProperties(const std::string& dataset,
                                                               VolumeMode mode);
  // The -o options of a new volume made from `source_dataset`: its local
  // properties, then `params` over them, then pillar's own.
  StatusOr<std::vector<std::string>> CopyOptions(const std::string& source_dataset, VolumeMode mode,
                                                 int64_t source_block_bytes,
                                                 const std::map<std::string, std::string>& params,
                                                 const std::string& owner_uid,
                                                 const std::string& origin, int64_t refquota);
  // `zfs clone` (dependent) or send|receive (detached) of `snapshot`
  // ("<child>@<name>") into `name`, then grown to size_bytes.
  StatusOr<BackendVolume> CopySnapshot(const std::string& name, int64_t size_bytes, VolumeMode mode,
                                       std::vector<std::string> options,
                                       const std::string& snapshot, int64_t source_bytes,
                                       bool detached,
                                       const std::map<std::string, std::string>& params);
  // `zfs send SNAPSHOT | zfs receive -u OPTIONS -- TARGET` (full names): a
  // full stream, no shell between them; TARGET never mounted by it.
  Status SendReceive(const std::string& snapshot, const std::vector<std::string>& options,
                     const std::string& target);
  // Destroys leftovers nothing needs any more: internal snapshots a crash
  // left behind, and hidden volumes without snapshots. Failures are logged
  // and retried by the next call, never returned.
  void Reclaim();
  // A zvol's size: size_bytes rounded up to its volblocksize.
  static StatusOr<int64_t> ZvolBytes(int64_t size_bytes,
                                     const std::map<std::string, std::string>& params);
  StatusOr<std::vector<ZfsRow>> ListRows();
  StatusOr<std::string> ExposeFilesystem(const ZfsRow& row);
  // Mounts the dataset, gives its root directory row.root_pending, then
  // clears the property.
  Status ApplyPendingRoot(const ZfsRow& row);
  // Datasets mount below the pool's own mountpoint: one that others may
  // search lets any local user of the storage node into a 0777 volume, so
  // its group and other bits go (like the file pool's directory).
  Status KeepPoolPrivate(const ZfsRow& row);

  Status DestroySnapshot(const std::string& snapshot, bool deferred);

  const std::string dataset_;
  Exec& exec_;
  Fs& fs_;
};

}  // namespace pillar::agent
