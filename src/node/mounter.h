// Mount-table effects behind one interface: the node logic decides by errno
// (EINVAL from umount2 = "not a mount point", EACCES from stat = "still try
// to unmount"), so the narrow results below keep errno unmapped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace pillar::node {

struct MountSpec {
  std::string source;  // device, directory (bind) or "server:/path"
  std::string target;
  std::string fs_type;               // empty for a bind mount
  std::vector<std::string> options;  // "ro", "noatime", "discard", ...
  bool bind = false;
  bool read_only = false;
};

enum class UnmountMode {
  kNormal,
  kForce,   // MNT_FORCE: aborts pending requests of a dead NFS server
  kDetach,  // MNT_DETACH: lazy; the last resort, the mount goes when unused
};

// The outcome of stat(2) on a path: `err` is 0 or the errno (ENOENT means
// "not there"; anything else means "there, but unusable").
struct PathStat {
  int err = 0;
  bool is_dir = false;
  bool is_block_device = false;
  bool is_regular = false;
};

struct VfsStat {
  int err = 0;  // 0 or the errno of statvfs(2)
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
  int64_t used_bytes = 0;
  int64_t total_inodes = 0;
  int64_t free_inodes = 0;
  int64_t used_inodes = 0;
};

class Mounter {
 public:
  virtual ~Mounter() = default;
  // The text of /proc/self/mountinfo.
  virtual StatusOr<std::string> ReadMountInfo() = 0;
  virtual Status Mount(const MountSpec& spec) = 0;
  // 0 on success, else the errno of umount2(2).
  virtual int Unmount(const std::string& target, UnmountMode mode) = 0;
  virtual PathStat Stat(const std::string& path) = 0;
  virtual VfsStat StatVfs(const std::string& path) = 0;
};

// mount(2) / umount2(2) / stat(2) / statvfs(2). Option words that are mount
// flags become flags; the rest are passed to the file system as data.
class SyscallMounter : public Mounter {
 public:
  explicit SyscallMounter(std::string mountinfo_path = "/proc/self/mountinfo")
      : mountinfo_path_(std::move(mountinfo_path)) {}
  StatusOr<std::string> ReadMountInfo() override;
  Status Mount(const MountSpec& spec) override;
  int Unmount(const std::string& target, UnmountMode mode) override;
  PathStat Stat(const std::string& path) override;
  VfsStat StatVfs(const std::string& path) override;

 private:
  std::string mountinfo_path_;
};

// Splits mount option words into mount(2) flags and file-system data
// ("noatime,discard" -> MS_NOATIME, "discard"). Exposed for tests.
struct SplitOptions {
  unsigned long flags = 0;
  std::string data;
};
SplitOptions SplitMountOptions(const std::vector<std::string>& options);

// Every option word must be safe to pass on: no separators or whitespace
// that could smuggle in a second option, [A-Za-z0-9_.=:/+-] only.
Status ValidateMountOptions(const std::vector<std::string>& options);

}  // namespace pillar::node
