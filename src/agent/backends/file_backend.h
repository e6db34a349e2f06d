// Backend "file": a pool is a directory on a local file system.
//   block volume       <dir>/<name>.img, a sparse image served through a loop
//                      device that Expose attaches (losetup) and Unexpose detaches
//   filesystem volume  <dir>/<name>/, served by NFS as is
// An attached image's loop device is found through sysfs, which names each
// device's backing file (<sysfs>/block/loopN/loop/backing_file), and kept in
// memory, so serving a volume that is already attached starts no process.
// Every volume has a sidecar <dir>/.pillar/<name>.json (0600, written
// atomically) carrying its mode and owner (the pvst uid, see backend.h): an
// image or directory without one is not pillar's. A plain directory has no
// quota, so a filesystem volume's size lives in the sidecar too: it is what
// was asked for, not enforced. Sidecars of pillar before the ownership marks
// carry no owner.
//
// A snapshot is a copy kept apart from the volumes: <dir>/.pillar/snapshots/
// <name>.img (block) or <name>/ (filesystem), with a sidecar
// <dir>/.pillar/snapshots/<name>.json carrying its mark, mode, size, source
// volume and creation time. A volume made from a snapshot or another volume
// is a copy too, its origin in its sidecar. Copies are made through Fs
// (FICLONE reflink where the file system has it, else a sparse copy that
// keeps holes) into <dir>/.pillar/tmp/ and renamed into place once complete,
// so a crash never leaves half a copy where a volume or snapshot is looked
// for. Every copy is independent of its source: snapshots are detached, and
// deleting a volume or snapshot never waits for another.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/backends/backend.h"
#include "agent/backends/marked_backend.h"
#include "common/exec.h"
#include "common/fs.h"

namespace pillar::agent {

// What a sidecar records: {"mode": "block"|"filesystem", "size_bytes": N
// (filesystem only), "volumeUid": U (absent in sidecars of older pillar)}.
struct FileSidecar {
  VolumeMode mode = VolumeMode::kBlock;
  int64_t size_bytes = 0;
  std::string volume_uid;
  std::string origin;  // "origin": BackendVolume::origin; absent when empty
};

// A snapshot's sidecar: {"mode", "size_bytes", "snapshotUid", "sourceVolume",
// "createdUnixNanos"}.
struct FileSnapshotSidecar {
  VolumeMode mode = VolumeMode::kBlock;
  int64_t size_bytes = 0;
  std::string snapshot_uid;
  std::string source_volume;
  int64_t created_unix_nanos = 0;
};
StatusOr<FileSnapshotSidecar> ParseFileSnapshotSidecar(const std::string& text);
std::string FormatFileSnapshotSidecar(const FileSnapshotSidecar& sidecar);
// Parses a sidecar's text; INVALID_ARGUMENT naming what is wrong.
StatusOr<FileSidecar> ParseFileSidecar(const std::string& text);
std::string FormatFileSidecar(const FileSidecar& sidecar);

class FileBackend : public MarkedBackend<BackendVolume> {
 public:
  // `pool` should pass validate::PoolName and `dir` be an absolute path to
  // a directory; every operation re-checks both (cheaply) and refuses to run
  // anything when they do not, so a bad configuration can never reach a path.
  // `sysfs` is where sysfs is mounted (a temporary tree in tests).
  FileBackend(std::string pool, std::string dir, Exec& exec, Fs& fs, std::string sysfs = "/sys")
      : pool_(std::move(pool)),
        dir_(std::move(dir)),
        exec_(exec),
        fs_(fs),
        sysfs_(std::move(sysfs)) {}

  const std::string& pool() const override { return pool_; }
  std::string kind() const override { return "file"; }
  std::vector<VolumeMode> modes() const override {
    return {VolumeMode::kBlock, VolumeMode::kFilesystem};
  }

  // Create takes no parameters. Block images are rounded up to whole
  // 512-byte sectors, since a loop device ignores a partial last sector. A
  // directory gets `root` before its sidecar is written, so a directory
  // without one (left by a crash in between) is empty and unmarked: a retry
  // adopts it and applies `root` again.
  // SetOwner marks an existing image (or a directory with an old sidecar); a
  // plain directory without a sidecar is no volume and stays NOT_FOUND.
  // Get leaves device_path empty: a loop device exists only once Expose
  // attached one, and its number is not stable across attachments.

 protected:
  Status CheckConfig() const override;
  // Makes the pool private before a create looks at it.
  Status PrepareCreate(int64_t size_bytes, VolumeMode mode,
                       const std::map<std::string, std::string>& params) override;
  // A block volume is a regular image file (its owner in a block sidecar);
  // a filesystem volume is a directory with its sidecar (a directory alone
  // is not ours).
  StatusOr<std::optional<BackendVolume>> FindRow(const std::string& name) override;
  Status NotFoundError(const std::string& name) const override;
  BackendVolume ToVolume(const BackendVolume& vol) const override { return vol; }
  // "file pool p: v.img" or "file pool p: directory v".
  std::string Object(const std::string& name, const BackendVolume& vol) const override {
    return Object(name, vol.mode);
  }
  StatusOr<BackendVolume> DoCreate(const std::string& name, int64_t size_bytes, VolumeMode mode,
                                   const std::map<std::string, std::string>& params,
                                   const std::string& owner_uid,
                                   const std::optional<VolumeRoot>& root,
                                   std::unique_lock<std::mutex>& lock) override;
  StatusOr<BackendVolume> ResumeCreate(const BackendVolume& vol,
                                       std::unique_lock<std::mutex>& lock) override;
  StatusOr<BackendVolume> DoExpand(const BackendVolume& vol, int64_t size_bytes,
                                   std::unique_lock<std::mutex>& lock) override;
  Status DoDelete(const std::string& name, const std::optional<BackendVolume>& vol) override;
  Status WriteMark(const BackendVolume& vol, const std::string& owner_uid) override;
  StatusOr<std::vector<BackendVolume>> ListVolumes() override;
  StatusOr<PoolCapacity> ReadCapacity() override;
  // Under the lock, so two concurrent Expose calls cannot attach the same
  // image to two loop devices.
  StatusOr<std::string> DoExpose(const BackendVolume& vol) override;
  Status DoUnexpose(const std::string& name) override;

  StatusOr<std::optional<BackendSnapshot>> FindSnapshotRow(const std::string& name) override;
  StatusOr<std::vector<BackendSnapshot>> ListSnapshotRows() override;
  StatusOr<BackendSnapshot> DoCreateSnapshot(const BackendVolume& vol, const std::string& name,
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
                                        const std::string& owner_uid, const BackendVolume& source,
                                        bool detached, std::unique_lock<std::mutex>& lock) override;

 private:
  std::string SnapshotDir() const;
  // The snapshot's data: <name>.img or <name>/ under SnapshotDir().
  std::string SnapshotDataPath(const std::string& name, VolumeMode mode) const;
  std::string SnapshotSidecarPath(const std::string& name) const;
  // Where a copy is made before it is renamed into place.
  std::string TempPath(const std::string& name) const;
  // A fresh copy of the file or tree at `from` at TempPath(name), replacing
  // what an interrupted copy left there.
  StatusOr<std::string> CopyToTemp(const std::string& from, VolumeMode mode,
                                   const std::string& name);
  // A new volume `name` as a copy of the data at `from` (`bytes` in size),
  // marked as owner_uid's and made from `origin`, grown to size_bytes.
  StatusOr<BackendVolume> CopyIntoVolume(const std::string& name, int64_t size_bytes,
                                         VolumeMode mode, const std::string& owner_uid,
                                         const std::string& from, int64_t bytes,
                                         const std::string& origin);
  std::string ImagePath(const std::string& name) const;
  std::string DirPath(const std::string& name) const;
  std::string SidecarPath(const std::string& name) const;
  std::string Object(const std::string& name, VolumeMode mode) const;

  // nullopt when there is none; INTERNAL naming the file when malformed.
  StatusOr<std::optional<FileSidecar>> ReadSidecar(const std::string& name);
  Status WriteSidecar(const std::string& name, const FileSidecar& sidecar);
  // The pool directory admits root only (its mode loses every group and
  // other bit): volumes inside it are a tenant's data (images readable,
  // NFS roots writable by NFS clients' squashed root), which no local user
  // of the storage node may reach. NFS clients still do: nfsd walks the
  // pseudo root as root and serves the export by its file handles.
  Status KeepPoolPrivate();
  StatusOr<BackendVolume> CreateDir(const std::string& name, int64_t size_bytes,
                                    const std::string& owner_uid,
                                    const std::optional<VolumeRoot>& root);
  // A loop device ("/dev/loopN") and what its backing_file read (without
  // the newline) when it was known to back an image.
  struct LoopEntry {
    std::string device;
    std::string backing;
  };
  // The image's loop device: the cached one when its backing_file still
  // reads the same (one read), else the first of a scan; nullopt when sysfs
  // names none.
  StatusOr<std::optional<std::string>> CachedLoopDeviceOf(const std::string& image);
  // Every loop device backing the image, from a scan of sysfs that rebuilds
  // the cache (usually zero or one).
  StatusOr<std::vector<std::string>> ScanLoopDevicesOf(const std::string& image);
  // Devices sysfs cannot name: `losetup --associated` compares inodes (see
  // the .cc). Asked only when sysfs named none and something is to change.
  StatusOr<std::vector<std::string>> LoopDevicesByInode(const std::string& image);
  // ScanLoopDevicesOf, else LoopDevicesByInode.
  StatusOr<std::vector<std::string>> AllLoopDevicesOf(const std::string& image);
  // backing_file of a loop device ("/dev/loopN") without its newline.
  StatusOr<std::string> ReadBackingFile(const std::string& device);
  // Remembers `device` as the image's, with what its backing_file reads now.
  void RememberLoop(const std::string& image, const std::string& device);
  Status DetachAll(const std::string& image);

  const std::string pool_;
  const std::string dir_;
  Exec& exec_;
  Fs& fs_;
  const std::string sysfs_;
  // ImagePath -> its loop device; a hint, checked before it is used.
  std::mutex loops_mu_;
  std::map<std::string, LoopEntry> loops_;
};

}  // namespace pillar::agent
