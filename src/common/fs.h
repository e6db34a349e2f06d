// The file-system operations the agent and node plugin perform, behind one
// interface: configfs, sysfs, /etc and state directories are all reached
// through an Fs so tests can point the real logic at a temporary tree.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace pillar {

struct DirEntry {
  std::string name;
  enum class Type { kFile, kDir, kSymlink, kOther } type = Type::kOther;
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
};

// Joins path components with single slashes.
std::string JoinPath(const std::string& a, const std::string& b);

}  // namespace pillar
