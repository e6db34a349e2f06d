// ConfigfsSim is a SIMULATION of the kernel's configfs for the nvmet and LIO
// (target_core + iscsi) layouts. It is for unit tests, the controller's
// integration tests and the local demo (the `pillar-agent-sim` binary), and it
// is never linked into the production `pillar-agent`: nothing reaches a
// kernel target and no initiator can ever connect to what it holds.
//
// It keeps the tree in a real directory (through PosixFs) and enforces the
// configfs rules the exporters depend on, so their real logic runs on it:
//  - mkdir of a known group creates the kernel's default attributes (with
//    default values) and default sub-groups; mkdir elsewhere is refused;
//  - attributes cannot be created (PERMISSION_DENIED, as EACCES) and
//    read-only ones cannot be written; values read back with a newline;
//  - rmdir removes a group's attributes and default groups, but fails
//    FAILED_PRECONDITION (ENOTEMPTY) while user-made groups or links remain,
//    and default groups cannot be removed at all;
//  - symlinks only where the kernel allows links, only to the right kind of
//    item, stored in the relative form the kernel's readlink shows;
//  - the target-specific checks an exporter's write order must respect
//    (e.g. nvmet refuses allowed_hosts links while attr_allow_any_host=1, a
//    port's address attributes are frozen while subsystems are linked, LIO
//    needs udev_path before enable and an enabled device before a LUN link).
// Paths outside `root` pass straight through to the real file system.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/fs.h"
#include "common/protocol.h"
#include "common/status.h"
#include "testing/configfs_layout.h"

namespace pillar::testing {

class ConfigfsSim : public Fs {
 public:
  // `root` is an existing directory standing in for /sys/kernel/config.
  // `tree` is the file system the simulated tree lives in (and every path
  // outside `root` goes to): the real one through PosixFs unless given. A
  // benchmark passes a timed one to tell the simulator's own cost from the
  // system calls under it, which are what a plain directory tree costs.
  explicit ConfigfsSim(const std::string& root, Fs* tree = nullptr);

  const std::string& root() const { return root_; }

  // What loading the modules creates: nvmet/{subsystems,ports,hosts} and
  // target/{core,iscsi} with their attributes. Loading twice is a no-op.
  Status LoadNvmet();
  Status LoadLio();
  // Drops a module's whole tree, as an rmmod (or a reboot) loses it. A
  // later Load gives the root group a new identity, as the kernel does.
  Status UnloadNvmet();
  Status UnloadLio();
  // Loads the target of `protocol` (nvmet or LIO), as a modprobe would;
  // UNAVAILABLE for NFS, whose server is not simulated.
  Status LoadTarget(Protocol protocol);

  StatusOr<std::string> ReadFile(const std::string& path) override;
  Status WriteFile(const std::string& path, const std::string& content) override;
  Status WriteFileAtomic(const std::string& path, const std::string& content) override;
  Status MakeDir(const std::string& path) override;
  Status MakeDirs(const std::string& path) override;
  Status RemoveDir(const std::string& path) override;
  Status Unlink(const std::string& path) override;
  Status Symlink(const std::string& target, const std::string& link) override;
  StatusOr<std::string> ReadLink(const std::string& path) override;
  StatusOr<std::vector<DirEntry>> ListDir(const std::string& path) override;
  bool Exists(const std::string& path) override;
  bool IsDir(const std::string& path) override;
  // configfs holds no regular files: these refuse inside root.
  Status CreateSparseFile(const std::string& path, int64_t size_bytes) override;
  Status ResizeFile(const std::string& path, int64_t size_bytes) override;
  StatusOr<int64_t> FileSize(const std::string& path) override;
  StatusOr<FsCapacity> StatVfs(const std::string& path) override;
  Status RemoveTree(const std::string& path) override;
  Status Chmod(const std::string& path, mode_t mode) override;
  StatusOr<mode_t> Mode(const std::string& path) override;
  Status Chown(const std::string& path, uid_t uid, gid_t gid) override;
  // configfs holds no regular files to copy and renames nothing: refused inside root.
  Status CopyFile(const std::string& from, const std::string& to) override;
  Status CopyTree(const std::string& from, const std::string& to) override;
  Status Rename(const std::string& from, const std::string& to) override;
  StatusOr<int64_t> AllocatedBytes(const std::string& path) override;

 private:
  using Kind = configfs_layout::Kind;
  struct Rel {
    bool inside = false;
    std::vector<std::string> parts;  // components below root
  };
  Rel Relative(const std::string& path) const;
  std::string Abs(const std::vector<std::string>& parts) const;
  Kind Classify(const std::vector<std::string>& parts) const;

  Status CreateGroup(const std::string& path, Kind kind);
  Status CheckRemovable(const std::string& path, Kind kind);
  Status OnWrite(const std::vector<std::string>& dir, Kind kind, const std::string& attr,
                 std::string* value);
  Status OnLink(const std::vector<std::string>& dir, Kind kind,
                const std::vector<std::string>& target);
  bool HasLinks(const std::string& dir);

  // The links of one group: what each points at (the target's parts below
  // root, joined) -> its name, and back. Read from disk once per group, then
  // kept in step by Symlink, Unlink and RemoveDir, so the duplicate check of
  // a new link costs the same with 10 or 10,000 links beside it. Entries are
  // checked against the disk before they are believed: a link removed around
  // the simulator (a test's out-of-band edit, a wiped tree) is forgotten. A
  // link made around it is not seen by the duplicate check until the group
  // is read again (a new simulator, or the group removed and re-made).
  struct LinkIndex {
    std::map<std::string, std::string> by_target;
    std::map<std::string, std::string> by_name;
  };
  StatusOr<LinkIndex*> LinksOf(const std::string& dir);
  // The target of `name` in `dir` as the index holds it, when still on disk.
  bool LinkStillThere(const std::string& dir, const std::string& name, const std::string& target);
  void ForgetLinks(const std::string& path);  // every group at or below `path`
  StatusOr<std::string> Attr(const std::vector<std::string>& dir, const std::string& attr);
  Status SetAttr(const std::vector<std::string>& dir, const std::string& attr,
                 const std::string& value);
  Status LoadModuleTree(const std::string& name, Kind kind);

  PosixFs own_tree_;
  Fs& tree_;  // own_tree_ or the one given
  std::string root_;
  unsigned long next_id_ = 1;               // seeds generated defaults (serials, UUIDs)
  std::mutex links_mu_;                     // guards links_
  std::map<std::string, LinkIndex> links_;  // group path -> its links
};

// Creates the configfs root skeleton in `root` as loading nvmet and LIO would.
Status CreateConfigfsSkeleton(const std::string& root);

}  // namespace pillar::testing
