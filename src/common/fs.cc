#include "common/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/uuid.h"

namespace pillar {
namespace {

Status Errno(const std::string& op, const std::string& path, int err) {
  std::string msg = op + " " + path + ": " + strerror(err);
  switch (err) {
    case ENOENT:
      return NotFound(msg);
    case EEXIST:
      return AlreadyExists(msg);
    case EACCES:
    case EPERM:
      return {Code::kPermissionDenied, msg};
    case ENOTEMPTY:
    case EBUSY:
      return FailedPrecondition(msg);
    case EINVAL:
      return InvalidArgument(msg);
    default:
      return Internal(msg);
  }
}

Status WriteAll(int fd, const std::string& path, const std::string& content) {
  size_t off = 0;
  while (off < content.size()) {
    ssize_t w = write(fd, content.data() + off, content.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("write", path, errno);
    }
    off += static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Removes `name` inside the open directory `parent_fd`; `path` is for
// messages. Holds one descriptor per level, so depth is bounded by the
// open-file limit (EMFILE is reported, nothing is left half-followed).
Status RemoveTreeAt(int parent_fd, const std::string& name, const std::string& path, dev_t dev) {
  struct stat st {};
  if (fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok() : Errno("stat", path, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(parent_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
      return Errno("unlink", path, errno);
    }
    return Status::Ok();
  }
  if (st.st_dev != dev) {
    return FailedPrecondition("remove " + path + ": another file system is mounted there");
  }
  int fd = openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Errno("open", path, errno);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(fdopendir(fd), closedir);
  if (!dir) {
    int err = errno;
    close(fd);
    return Errno("opendir", path, err);
  }
  // The directory may have been swapped between the lstat and the open.
  struct stat opened {};
  if (fstat(fd, &opened) != 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
    return Aborted("remove " + path + ": directory changed while removing it");
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(dir.get())) {
    std::string child = e->d_name;
    if (child != "." && child != "..") names.push_back(std::move(child));
  }
  for (const auto& child : names) {
    RETURN_IF_ERROR(RemoveTreeAt(fd, child, JoinPath(path, child), dev));
  }
  dir.reset();
  if (unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return Errno("rmdir", path, errno);
  }
  return Status::Ok();
}

}  // namespace

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  std::string out = a;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  size_t start = 0;
  while (start < b.size() && b[start] == '/') ++start;
  return out + "/" + b.substr(start);
}

StatusOr<std::string> CanonicalPath(Fs& fs, const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return FailedPrecondition("path '" + path + "' is not absolute");
  }
  constexpr int kMaxLinks = 40;  // as the kernel's path walk allows
  // Components still to walk, the next one last.
  std::vector<std::string> todo;
  auto push_reversed = [&todo](const std::string& p) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (start <= p.size()) {
      size_t end = p.find('/', start);
      if (end == std::string::npos) end = p.size();
      if (end > start) parts.push_back(p.substr(start, end - start));
      start = end + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_reversed(path);
  std::vector<std::string> done;
  int links = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    done.push_back(std::move(part));
    std::string walked;
    for (const auto& d : done) walked += "/" + d;
    StatusOr<std::string> target = fs.ReadLink(walked);
    if (!target.ok()) continue;  // no link: kept as named
    if (++links > kMaxLinks) {
      return FailedPrecondition("path '" + path + "' has more than 40 symlinks (a loop?)");
    }
    done.pop_back();
    if (!target->empty() && target->front() == '/') done.clear();
    push_reversed(*target);
  }
  std::string out;
  for (const auto& d : done) out += "/" + d;
  return out.empty() ? "/" : out;
}

StatusOr<std::string> PosixFs::ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path, errno);
  std::string out;
  char buf[8192];
  while (true) {
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return Errno("read", path, err);
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  close(fd);
  return out;
}

Status PosixFs::WriteFile(const std::string& path, const std::string& content) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", path, errno);
  Status s = WriteAll(fd, path, content);
  // configfs reports a rejected attribute value from close as well as write.
  if (close(fd) != 0 && s.ok()) s = Errno("close", path, errno);
  return s;
}

Status PosixFs::WriteFileAtomic(const std::string& path, const std::string& content) {
  // A fresh, unpredictable name, created exclusively and never through a
  // symlink: a file or link planted beside `path` by anyone who can write
  // to its directory is never opened, truncated or written through.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    tmp = path + ".tmp." + NewUuid().substr(24);
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return Errno("open", tmp, errno);
  Status s = WriteAll(fd, tmp, content);
  if (s.ok() && fsync(fd) != 0) s = Errno("fsync", tmp, errno);
  if (close(fd) != 0 && s.ok()) s = Errno("close", tmp, errno);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) s = Errno("rename", path, errno);
  if (!s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  // Make the rename itself durable.
  std::string dir = path.substr(0, path.rfind('/'));
  if (dir.empty()) dir = "/";
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return Status::Ok();
}

Status PosixFs::MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir", path, errno);
  return Status::Ok();
}

Status PosixFs::MakeDirs(const std::string& path) {
  std::string cur;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    cur = path.substr(0, next);
    if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
      return Errno("mkdir", cur, errno);
    }
    pos = next + 1;
  }
  return Status::Ok();
}

Status PosixFs::RemoveDir(const std::string& path) {
  if (rmdir(path.c_str()) != 0 && errno != ENOENT) return Errno("rmdir", path, errno);
  return Status::Ok();
}

Status PosixFs::Unlink(const std::string& path) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("unlink", path, errno);
  return Status::Ok();
}

Status PosixFs::Symlink(const std::string& target, const std::string& link) {
  if (symlink(target.c_str(), link.c_str()) != 0) return Errno("symlink", link, errno);
  return Status::Ok();
}

StatusOr<std::string> PosixFs::ReadLink(const std::string& path) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) return Errno("readlink", path, errno);
  return std::string(buf, static_cast<size_t>(n));
}

StatusOr<std::vector<DirEntry>> PosixFs::ListDir(const std::string& path) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), closedir);
  if (!dir) return Errno("opendir", path, errno);
  std::vector<DirEntry> out;
  while (dirent* e = readdir(dir.get())) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    DirEntry entry{name, DirEntry::Type::kOther};
    // d_type saves an lstat per entry (configfs, tmpfs and ext4 all set it).
    if (e->d_type == DT_REG) {
      entry.type = DirEntry::Type::kFile;
    } else if (e->d_type == DT_DIR) {
      entry.type = DirEntry::Type::kDir;
    } else if (e->d_type == DT_LNK) {
      entry.type = DirEntry::Type::kSymlink;
    }
    struct stat st {};
    if (e->d_type == DT_UNKNOWN && lstat(JoinPath(path, name).c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode))
        entry.type = DirEntry::Type::kFile;
      else if (S_ISDIR(st.st_mode))
        entry.type = DirEntry::Type::kDir;
      else if (S_ISLNK(st.st_mode))
        entry.type = DirEntry::Type::kSymlink;
    }
    out.push_back(std::move(entry));
  }
  return out;
}

bool PosixFs::Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

bool PosixFs::IsDir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Status PosixFs::CreateSparseFile(const std::string& path, int64_t size_bytes) {
  if (size_bytes < 0) return InvalidArgument("create " + path + ": negative size");
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create", path, errno);
  Status s;
  if (ftruncate(fd, size_bytes) != 0) s = Errno("ftruncate", path, errno);
  if (s.ok() && fsync(fd) != 0) s = Errno("fsync", path, errno);
  if (close(fd) != 0 && s.ok()) s = Errno("close", path, errno);
  // A short file left behind would later pass for an existing, too-small one.
  if (!s.ok()) unlink(path.c_str());
  return s;
}

Status PosixFs::ResizeFile(const std::string& path, int64_t size_bytes) {
  if (size_bytes < 0) return InvalidArgument("resize " + path + ": negative size");
  if (truncate(path.c_str(), size_bytes) != 0) return Errno("truncate", path, errno);
  return Status::Ok();
}

StatusOr<int64_t> PosixFs::FileSize(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Errno("stat", path, errno);
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(path + " is not a regular file");
  return static_cast<int64_t>(st.st_size);
}

StatusOr<FsCapacity> PosixFs::StatVfs(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) return Errno("statvfs", path, errno);
  FsCapacity out;
  out.total_bytes = static_cast<int64_t>(st.f_blocks) * static_cast<int64_t>(st.f_frsize);
  out.available_bytes = static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  return out;
}

Status PosixFs::Chmod(const std::string& path, mode_t mode) {
  if ((mode & ~mode_t{07777}) != 0) return InvalidArgument("chmod " + path + ": not a mode");
  // AT_SYMLINK_NOFOLLOW: a symlink fails (EOPNOTSUPP) instead of passing the
  // change on to its target.
  if (fchmodat(AT_FDCWD, path.c_str(), mode, AT_SYMLINK_NOFOLLOW) == 0) return Status::Ok();
  if (errno == EOPNOTSUPP) {
    return FailedPrecondition("chmod " + path + ": a symbolic link; its target is left alone");
  }
  return Errno("chmod", path, errno);
}

StatusOr<mode_t> PosixFs::Mode(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Errno("stat", path, errno);
  return static_cast<mode_t>(st.st_mode & 07777);
}

Status PosixFs::Chown(const std::string& path, uid_t uid, gid_t gid) {
  // -1 means "leave as is" to fchownat: never what a caller asks for here.
  if (uid == static_cast<uid_t>(-1) || gid == static_cast<gid_t>(-1)) {
    return InvalidArgument("chown " + path + ": uid and gid must be below 4294967295");
  }
  // Opened without following, then changed through that descriptor: a
  // symlink is refused, and a swap after the check changes nothing else.
  int fd = open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Errno("open", path, errno);
  struct stat st {};
  Status s;
  if (fstat(fd, &st) != 0) {
    s = Errno("stat", path, errno);
  } else if (S_ISLNK(st.st_mode)) {
    s = FailedPrecondition("chown " + path + ": a symbolic link; its target is left alone");
  } else if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) != 0) {
    s = Errno("chown", path, errno);
  }
  close(fd);
  return s;
}

Status PosixFs::RemoveTree(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string parent = slash == std::string::npos ? "." : path.substr(0, slash);
  if (parent.empty()) parent = "/";
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    return InvalidArgument("remove " + path + ": not a removable path");
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? Status::Ok() : Errno("stat", path, errno);
  }
  int parent_fd = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent_fd < 0) return Errno("open", parent, errno);
  Status s = RemoveTreeAt(parent_fd, name, path, st.st_dev);
  close(parent_fd);
  return s;
}

}  // namespace pillar

namespace pillar {
namespace {

// Closes a descriptor on every path out of a copy.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

Status CopyRange(int in, int out, off_t start, off_t end, const std::string& path) {
  off_t out_off = start;  // the same offset in the copy: holes stay where they were
  bool by_kernel = true;
  std::vector<char> buf;
  while (start < end) {
    size_t want = static_cast<size_t>(end - start);
    ssize_t n = -1;
    if (by_kernel) {
      n = copy_file_range(in, &start, out, &out_off, want, 0);
      // Across file systems (or where the kernel has no copy_file_range):
      // read and write instead.
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) {
        by_kernel = false;
        continue;
      }
    } else {
      buf.resize(std::min<size_t>(want, size_t{1} << 20));
      n = pread(in, buf.data(), buf.size(), start);
      if (n > 0) {
        for (ssize_t done = 0; done < n;) {
          ssize_t w = pwrite(out, buf.data() + done, static_cast<size_t>(n - done), out_off + done);
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) return Errno("write", path, errno);
          done += w;
        }
        start += n;
        out_off += n;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("copy", path, errno);
    if (n == 0) break;  // the source shrank meanwhile
  }
  return Status::Ok();
}

// The data of `in` into the new, empty `out` of the same size: one FICLONE
// when the file system shares blocks, else each data range (holes skipped).
Status CopyData(int in, int out, off_t size, const std::string& from, const std::string& to) {
  if (ioctl(out, FICLONE, in) == 0) return Status::Ok();
  if (ftruncate(out, size) != 0) return Errno("truncate", to, errno);
  off_t pos = 0;
  while (pos < size) {
    off_t data = lseek(in, pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // only a hole is left
    if (data < 0) return Errno("seek data in", from, errno);
    off_t hole = lseek(in, data, SEEK_HOLE);
    if (hole < 0) return Errno("seek hole in", from, errno);
    RETURN_IF_ERROR(CopyRange(in, out, data, std::min(hole, size), to));
    pos = hole;
  }
  return Status::Ok();
}

Status CopyFileAt(int from_dir, const std::string& from_name, int to_dir,
                  const std::string& to_name, const std::string& from, const std::string& to,
                  bool keep_owner) {
  Fd in(openat(from_dir, from_name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (in.fd < 0) return Errno("open", from, errno);
  struct stat st {};
  if (fstat(in.fd, &st) != 0) return Errno("stat", from, errno);
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(from + " is not a regular file");
  Fd out(openat(to_dir, to_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                st.st_mode & 07777));
  if (out.fd < 0) return Errno("create", to, errno);
  RETURN_IF_ERROR(CopyData(in.fd, out.fd, st.st_size, from, to));
  if (keep_owner && fchown(out.fd, st.st_uid, st.st_gid) != 0) return Errno("chown", to, errno);
  // After chown, which clears setuid/setgid.
  if (fchmod(out.fd, st.st_mode & 07777) != 0) return Errno("chmod", to, errno);
  if (fsync(out.fd) != 0) return Errno("fsync", to, errno);
  return Status::Ok();
}

Status CopyTreeAt(int from_dir, const std::string& from_name, int to_dir,
                  const std::string& to_name, const std::string& from, const std::string& to,
                  dev_t dev) {
  struct stat st {};
  if (fstatat(from_dir, from_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Errno("stat", from, errno);
  }
  if (S_ISREG(st.st_mode)) {
    return CopyFileAt(from_dir, from_name, to_dir, to_name, from, to, /*keep_owner=*/true);
  }
  if (S_ISLNK(st.st_mode)) {
    std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
    ssize_t n = readlinkat(from_dir, from_name.c_str(), target.data(), target.size());
    if (n < 0) return Errno("readlink", from, errno);
    target.resize(static_cast<size_t>(n));
    if (symlinkat(target.c_str(), to_dir, to_name.c_str()) != 0) {
      return Errno("symlink", to, errno);
    }
    if (fchownat(to_dir, to_name.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0) {
      return Errno("chown", to, errno);
    }
    return Status::Ok();
  }
  if (!S_ISDIR(st.st_mode)) {
    return FailedPrecondition("copy " + from + ": neither a file, a directory nor a symlink");
  }
  if (st.st_dev != dev) {
    return FailedPrecondition("copy " + from + ": another file system is mounted there");
  }
  Fd src(openat(from_dir, from_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (src.fd < 0) return Errno("open", from, errno);
  if (mkdirat(to_dir, to_name.c_str(), 0700) != 0) return Errno("mkdir", to, errno);
  Fd dst(openat(to_dir, to_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dst.fd < 0) return Errno("open", to, errno);
  int listing = dup(src.fd);
  if (listing < 0) return Errno("dup", from, errno);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(fdopendir(listing), closedir);
  if (!dir) {
    int err = errno;
    close(listing);
    return Errno("opendir", from, err);
  }
  while (dirent* e = readdir(dir.get())) {
    std::string child = e->d_name;
    if (child == "." || child == "..") continue;
    RETURN_IF_ERROR(
        CopyTreeAt(src.fd, child, dst.fd, child, JoinPath(from, child), JoinPath(to, child), dev));
  }
  if (fchown(dst.fd, st.st_uid, st.st_gid) != 0) return Errno("chown", to, errno);
  if (fchmod(dst.fd, st.st_mode & 07777) != 0) return Errno("chmod", to, errno);
  return Status::Ok();
}

}  // namespace

Status PosixFs::CopyFile(const std::string& from, const std::string& to) {
  return CopyFileAt(AT_FDCWD, from, AT_FDCWD, to, from, to, /*keep_owner=*/false);
}

Status PosixFs::CopyTree(const std::string& from, const std::string& to) {
  struct stat st {};
  if (lstat(from.c_str(), &st) != 0) return Errno("stat", from, errno);
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition(from + " is not a directory");
  return CopyTreeAt(AT_FDCWD, from, AT_FDCWD, to, from, to, st.st_dev);
}

Status PosixFs::Rename(const std::string& from, const std::string& to) {
  if (rename(from.c_str(), to.c_str()) != 0) return Errno("rename " + from + " to", to, errno);
  return Status::Ok();
}

StatusOr<int64_t> PosixFs::AllocatedBytes(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return Errno("stat", path, errno);
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(path + " is not a regular file");
  return static_cast<int64_t>(st.st_blocks) * 512;
}

}  // namespace pillar
