#include "node/mounter.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace pillar::node {
namespace {

struct FlagWord {
  unsigned long set;
  unsigned long clear;
};

const std::map<std::string, FlagWord>& FlagWords() {
  static const auto* words = new std::map<std::string, FlagWord>{
      {"ro", {MS_RDONLY, 0}},
      {"rw", {0, MS_RDONLY}},
      {"nosuid", {MS_NOSUID, 0}},
      {"suid", {0, MS_NOSUID}},
      {"nodev", {MS_NODEV, 0}},
      {"dev", {0, MS_NODEV}},
      {"noexec", {MS_NOEXEC, 0}},
      {"exec", {0, MS_NOEXEC}},
      {"sync", {MS_SYNCHRONOUS, 0}},
      {"async", {0, MS_SYNCHRONOUS}},
      {"dirsync", {MS_DIRSYNC, 0}},
      {"noatime", {MS_NOATIME, 0}},
      {"atime", {0, MS_NOATIME}},
      {"nodiratime", {MS_NODIRATIME, 0}},
      {"diratime", {0, MS_NODIRATIME}},
      {"relatime", {MS_RELATIME, 0}},
      {"norelatime", {0, MS_RELATIME}},
      {"strictatime", {MS_STRICTATIME, 0}},
      {"lazytime", {MS_LAZYTIME, 0}},
      {"nolazytime", {0, MS_LAZYTIME}},
      {"defaults", {0, 0}},
      {"_netdev", {0, 0}},  // userspace-only words
  };
  return *words;
}

}  // namespace

SplitOptions SplitMountOptions(const std::vector<std::string>& options) {
  SplitOptions out;
  for (const auto& o : options) {
    auto it = FlagWords().find(o);
    if (it != FlagWords().end()) {
      out.flags = (out.flags | it->second.set) & ~it->second.clear;
      continue;
    }
    if (!out.data.empty()) out.data += ',';
    out.data += o;
  }
  return out;
}

Status ValidateMountOptions(const std::vector<std::string>& options) {
  for (const auto& o : options) {
    if (o.empty() || o.size() > 256 || o[0] == '-') {
      return InvalidArgument("mount option \"" + o + "\" is not allowed");
    }
    for (char c : o) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '=' || c == ':' || c == '/' || c == '+' || c == '-';
      if (!ok) return InvalidArgument("mount option \"" + o + "\" has a forbidden character");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> SyscallMounter::ReadMountInfo() {
  int fd = open(mountinfo_path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Internal("open " + mountinfo_path_ + ": " + strerror(errno));
  std::string out;
  char buf[16384];
  while (true) {
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      close(fd);
      return Internal("read " + mountinfo_path_ + ": " + strerror(err));
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  close(fd);
  return out;
}

Status SyscallMounter::Mount(const MountSpec& spec) {
  RETURN_IF_ERROR(ValidateMountOptions(spec.options));
  SplitOptions split = SplitMountOptions(spec.options);
  if (spec.read_only) split.flags |= MS_RDONLY;
  auto fail = [&](const char* what) {
    int err = errno;
    std::string msg =
        std::string(what) + " " + spec.source + " on " + spec.target + ": " + strerror(err);
    return err == EACCES || err == EPERM ? Status(Code::kPermissionDenied, msg) : Internal(msg);
  };
  if (spec.bind) {
    if (mount(spec.source.c_str(), spec.target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      return fail("bind mount");
    }
    // Flags on a bind mount only take effect through a remount of the bind.
    unsigned long remount = split.flags & ~static_cast<unsigned long>(MS_BIND);
    if (remount != 0) {
      if (mount("none", spec.target.c_str(), nullptr, MS_REMOUNT | MS_BIND | remount, nullptr) !=
          0) {
        Status s = fail("remount bind");
        umount2(spec.target.c_str(), 0);  // never leave a writable bind behind a ro request
        return s;
      }
    }
    return Status::Ok();
  }
  const char* data = split.data.empty() ? nullptr : split.data.c_str();
  if (mount(spec.source.c_str(), spec.target.c_str(), spec.fs_type.c_str(), split.flags, data) !=
      0) {
    return fail(("mount -t " + spec.fs_type).c_str());
  }
  return Status::Ok();
}

int SyscallMounter::Unmount(const std::string& target, UnmountMode mode) {
  int flags = UMOUNT_NOFOLLOW;
  if (mode == UnmountMode::kForce) flags |= MNT_FORCE;
  if (mode == UnmountMode::kDetach) flags |= MNT_DETACH;
  return umount2(target.c_str(), flags) == 0 ? 0 : errno;
}

PathStat SyscallMounter::Stat(const std::string& path) {
  struct stat st {};
  PathStat out;
  if (stat(path.c_str(), &st) != 0) {
    out.err = errno;
    return out;
  }
  out.is_dir = S_ISDIR(st.st_mode);
  out.is_block_device = S_ISBLK(st.st_mode);
  out.is_regular = S_ISREG(st.st_mode);
  return out;
}

VfsStat SyscallMounter::StatVfs(const std::string& path) {
  struct statvfs st {};
  VfsStat out;
  if (statvfs(path.c_str(), &st) != 0) {
    out.err = errno;
    return out;
  }
  auto frsize = static_cast<int64_t>(st.f_frsize);
  out.total_bytes = static_cast<int64_t>(st.f_blocks) * frsize;
  out.available_bytes = static_cast<int64_t>(st.f_bavail) * frsize;
  out.used_bytes = (static_cast<int64_t>(st.f_blocks) - static_cast<int64_t>(st.f_bfree)) * frsize;
  out.total_inodes = static_cast<int64_t>(st.f_files);
  out.free_inodes = static_cast<int64_t>(st.f_ffree);
  out.used_inodes = out.total_inodes - out.free_inodes;
  return out;
}

}  // namespace pillar::node
