// The file-system operations the agent and node plugin perform, behind one
// interface: configfs, sysfs, /etc and state directories are all reached
// through an Fs so tests can point the real logic at a temporary tree.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace pillar {

struct DirEntry {
  std::string name;
  enum class Type { kFile, kDir, kSymlink, kOther } type = Type::kOther;
};

// Sizes of the file system holding a path, from statvfs(3).
struct FsCapacity {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;  // to unprivileged users (f_bavail)
};

class Fs {
 public:
  virtual ~Fs() = default;

  virtual StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // Writes the whole content with one write(2) to an existing or new file,
  // as configfs attributes require.
  virtual Status WriteFile(const std::string& path, const std::string& content) = 0;
  // Writes to a temporary sibling, fsyncs, then renames over path.
  virtual Status WriteFileAtomic(const std::string& path, const std::string& content) = 0;
  virtual Status MakeDir(const std::string& path) = 0;    // one level; EEXIST is OK
  virtual Status MakeDirs(const std::string& path) = 0;   // like mkdir -p
  virtual Status RemoveDir(const std::string& path) = 0;  // ENOENT is OK
  virtual Status Unlink(const std::string& path) = 0;     // ENOENT is OK
  virtual Status Symlink(const std::string& target, const std::string& link) = 0;
  virtual StatusOr<std::string> ReadLink(const std::string& path) = 0;
  virtual StatusOr<std::vector<DirEntry>> ListDir(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;  // lstat succeeds
  virtual bool IsDir(const std::string& path) = 0;

  // Creates a new sparse regular file of exactly size_bytes (no blocks
  // allocated); ALREADY_EXISTS when path exists, so it never truncates data.
  virtual Status CreateSparseFile(const std::string& path, int64_t size_bytes) = 0;
  // Sets the size of an existing regular file (truncate(2)); growth is sparse.
  virtual Status ResizeFile(const std::string& path, int64_t size_bytes) = 0;
  // Size of a regular file, not following a symlink: FAILED_PRECONDITION for
  // anything else, so a symlink planted in a pool is never taken for an image.
  virtual StatusOr<int64_t> FileSize(const std::string& path) = 0;
  virtual StatusOr<FsCapacity> StatVfs(const std::string& path) = 0;
  // Removes path and everything below it (rm -r); ENOENT is OK. Never follows
  // a symlink and never descends into another mounted file system
  // (FAILED_PRECONDITION), so a planted link or mount cannot widen the delete.
  virtual Status RemoveTree(const std::string& path) = 0;
  // Sets the permission bits (setuid/setgid/sticky included, at most 07777)
  // and the owner of path itself, never of a symlink's target: a symlink is
  // FAILED_PRECONDITION, so a planted link cannot redirect them.
  virtual Status Chmod(const std::string& path, mode_t mode) = 0;
  // The permission bits (at most 07777) of path itself (lstat).
  virtual StatusOr<mode_t> Mode(const std::string& path) = 0;
  virtual Status Chown(const std::string& path, uid_t uid, gid_t gid) = 0;

  // Copies the regular file `from` to a new file `to` (ALREADY_EXISTS when
  // it exists) with the same size and permission bits: a reflink (FICLONE)
  // where the file system shares blocks, else a copy of the data ranges only
  // (SEEK_DATA/SEEK_HOLE), so holes stay holes. Never follows a symlink.
  virtual Status CopyFile(const std::string& from, const std::string& to) = 0;
  // Copies the directory tree `from` to a new directory `to`: directories,
  // regular files (as CopyFile), symlinks (as links), with their modes and
  // owners. Anything else (devices, sockets) and another mounted file system
  // below `from` are FAILED_PRECONDITION, never followed.
  virtual Status CopyTree(const std::string& from, const std::string& to) = 0;
  // rename(2): replaces `to` when it is a file or an empty directory.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // What a regular file takes on disk (st_blocks * 512).
  virtual StatusOr<int64_t> AllocatedBytes(const std::string& path) = 0;
};

class PosixFs : public Fs {
 public:
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
  Status CreateSparseFile(const std::string& path, int64_t size_bytes) override;
  Status ResizeFile(const std::string& path, int64_t size_bytes) override;
  StatusOr<int64_t> FileSize(const std::string& path) override;
  StatusOr<FsCapacity> StatVfs(const std::string& path) override;
  Status RemoveTree(const std::string& path) override;
  Status Chmod(const std::string& path, mode_t mode) override;
  StatusOr<mode_t> Mode(const std::string& path) override;
  Status Chown(const std::string& path, uid_t uid, gid_t gid) override;
  Status CopyFile(const std::string& from, const std::string& to) override;
  Status CopyTree(const std::string& from, const std::string& to) override;
  Status Rename(const std::string& from, const std::string& to) override;
  StatusOr<int64_t> AllocatedBytes(const std::string& path) override;
};

// Joins path components with single slashes.
std::string JoinPath(const std::string& a, const std::string& b);

// The absolute `path` with every symlink resolved (through fs.ReadLink) and
// ".", ".." and repeated slashes gone, as the kernel names a file it holds
// open. A component that is no link (or does not exist) is kept as named;
// FAILED_PRECONDITION for a relative path or more than 40 links (a loop).
StatusOr<std::string> CanonicalPath(Fs& fs, const std::string& path);

}  // namespace pillar
