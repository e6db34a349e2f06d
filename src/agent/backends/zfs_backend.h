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
  // Delete runs zfs destroy without -r/-R/-f: a volume with snapshots,
  // clones or users is FAILED_PRECONDITION carrying zfs's own message.
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

 private:
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

  const std::string dataset_;
  Exec& exec_;
  Fs& fs_;
};

}  // namespace pillar::agent
