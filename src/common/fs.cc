#include "common/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

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
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
    struct stat st {};
    if (lstat(JoinPath(path, name).c_str(), &st) == 0) {
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

}  // namespace pillar
