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
#include "common/exec.h"
#include "common/fs.h"
#include "common/validate.h"

namespace pillar::agent {

class ZfsBackend : public Backend {
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

  // A zvol's size is rounded up to whole volume blocks (volblocksize, or
  // 16 KiB, the largest default of current OpenZFS, when it is not given).
  StatusOr<BackendVolume> Create(const std::string& name, int64_t size_bytes, VolumeMode mode,
                                 const std::map<std::string, std::string>& params,
                                 const std::string& owner_uid,
                                 const std::optional<VolumeRoot>& root) override;
  StatusOr<BackendVolume> Expand(const std::string& name, int64_t size_bytes,
                                 const std::string& owner_uid) override;
  // zfs destroy without -r/-R/-f: a volume with snapshots, clones or users is
  // FAILED_PRECONDITION carrying zfs's own message.
  Status Delete(const std::string& name, const std::string& owner_uid) override;
  Status SetOwner(const std::string& name, const std::string& owner_uid) override;
  StatusOr<BackendVolume> Get(const std::string& name) override;
  StatusOr<std::vector<BackendVolume>> List() override;
  // The parent dataset's available space; total = available + used.
  StatusOr<PoolCapacity> Capacity() override;
  // Block: /dev/zvol/<dataset>/<name>, UNAVAILABLE until udev made it.
  // Filesystem: mounts it if needed and returns its mountpoint.
  StatusOr<std::string> Expose(const std::string& name, VolumeMode mode) override;
  // Nothing to undo: the zvol node and the mount stay as zfs keeps them.
  Status Unexpose(const std::string& name) override;

  // One row of `zfs list`, as parsed.
  struct DatasetRow {
    std::string name;  // the child component only
    VolumeMode mode = VolumeMode::kBlock;
    int64_t size_bytes = 0;   // volsize, or refquota (0: none)
    std::string mountpoint;   // "" unless an absolute path
    int64_t block_bytes = 0;  // volblocksize of a zvol
    std::string owner_uid;    // pillar-csi:volume-uid; "" when unset
    // pillar-csi:root-pending: the root directory mode and owner a create
    // has yet to apply; nullopt when there is none.
    std::optional<VolumeRoot> root_pending;
  };

 private:
  Status CheckConfig() const { return validate::PoolName("pool", dataset_); }
  Status CheckName(const std::string& name) const;
  std::string Id(const std::string& name) const { return dataset_ + "/" + name; }
  std::string Object(const std::string& name) const {
    return "zfs pool " + dataset_ + ": dataset " + Id(name);
  }
  BackendVolume ToVolume(const DatasetRow& row) const;
  StatusOr<std::vector<DatasetRow>> ListRows();
  StatusOr<std::optional<DatasetRow>> FindRow(const std::string& name);
  StatusOr<DatasetRow> FindRowOrNotFound(const std::string& name);
  StatusOr<std::string> ExposeFilesystem(const DatasetRow& row);
  // Mounts the dataset, gives its root directory row.root_pending, then
  // clears the property.
  Status ApplyPendingRoot(const DatasetRow& row);

  const std::string dataset_;
  Exec& exec_;
  Fs& fs_;
  std::mutex mu_;  // serializes changes so check-then-act stays atomic here
};

}  // namespace pillar::agent
