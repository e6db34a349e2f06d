// Backend "file": a pool is a directory on a local file system.
//   block volume       <dir>/<name>.img, a sparse image served through a loop
//                      device that Expose attaches (losetup) and Unexpose detaches
//   filesystem volume  <dir>/<name>/, served by NFS as is
// Every volume has a sidecar <dir>/.pillar/<name>.json (0600, written
// atomically) carrying its mode and owner (the pvst uid, see backend.h): an
// image or directory without one is not pillar's. A plain directory has no
// quota, so a filesystem volume's size lives in the sidecar too: it is what
// was asked for, not enforced. Sidecars of pillar before the ownership marks
// carry no owner.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/backends/backend.h"
#include "common/exec.h"
#include "common/fs.h"

namespace pillar::agent {

// What a sidecar records: {"mode": "block"|"filesystem", "size_bytes": N
// (filesystem only), "volumeUid": U (absent in sidecars of older pillar)}.
struct FileSidecar {
  VolumeMode mode = VolumeMode::kBlock;
  int64_t size_bytes = 0;
  std::string volume_uid;
};
// Parses a sidecar's text; INVALID_ARGUMENT naming what is wrong.
StatusOr<FileSidecar> ParseFileSidecar(const std::string& text);
std::string FormatFileSidecar(const FileSidecar& sidecar);

class FileBackend : public Backend {
 public:
  // `pool` should pass validate::PoolName and `dir` be an absolute path to
  // a directory; every operation re-checks both (cheaply) and refuses to run
  // anything when they do not, so a bad configuration can never reach a path.
  FileBackend(std::string pool, std::string dir, Exec& exec, Fs& fs)
      : pool_(std::move(pool)), dir_(std::move(dir)), exec_(exec), fs_(fs) {}

  const std::string& pool() const override { return pool_; }
  std::string kind() const override { return "file"; }
  std::vector<VolumeMode> modes() const override {
    return {VolumeMode::kBlock, VolumeMode::kFilesystem};
  }

  // Takes no parameters. Block images are rounded up to whole 512-byte
  // sectors, since a loop device ignores a partial last sector. A directory
  // gets `root` before its sidecar is written, so a directory without one
  // (left by a crash in between) is empty and unmarked: a retry adopts it
  // and applies `root` again.
  StatusOr<BackendVolume> Create(const std::string& name, int64_t size_bytes, VolumeMode mode,
                                 const std::map<std::string, std::string>& params,
                                 const std::string& owner_uid,
                                 const std::optional<VolumeRoot>& root) override;
  StatusOr<BackendVolume> Expand(const std::string& name, int64_t size_bytes,
                                 const std::string& owner_uid) override;
  Status Delete(const std::string& name, const std::string& owner_uid) override;
  // Marks an existing image (or a directory with an old sidecar); a plain
  // directory without a sidecar is no volume and stays NOT_FOUND.
  Status SetOwner(const std::string& name, const std::string& owner_uid) override;
  // device_path stays empty here: a loop device exists only once Expose
  // attached one, and its number is not stable across attachments.
  StatusOr<BackendVolume> Get(const std::string& name) override;
  StatusOr<std::vector<BackendVolume>> List() override;
  StatusOr<PoolCapacity> Capacity() override;
  StatusOr<std::string> Expose(const std::string& name, VolumeMode mode) override;
  Status Unexpose(const std::string& name) override;

 private:
  Status CheckConfig() const;
  Status CheckName(const std::string& name) const;
  std::string Id(const std::string& name) const { return pool_ + "/" + name; }
  std::string ImagePath(const std::string& name) const;
  std::string DirPath(const std::string& name) const;
  std::string SidecarPath(const std::string& name) const;
  // "file pool p: v.img" or "file pool p: directory v", for messages.
  std::string Object(const std::string& name, VolumeMode mode) const;

  StatusOr<std::optional<BackendVolume>> Find(const std::string& name);
  StatusOr<BackendVolume> FindOrNotFound(const std::string& name);
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
  // Loop devices currently backed by the image (usually zero or one).
  StatusOr<std::vector<std::string>> LoopDevicesOf(const std::string& image);
  Status DetachAll(const std::string& image);

  const std::string pool_;
  const std::string dir_;
  Exec& exec_;
  Fs& fs_;
  // Serializes changes, so two concurrent Expose calls cannot attach the
  // same image to two loop devices.
  std::mutex mu_;
};

}  // namespace pillar::agent
