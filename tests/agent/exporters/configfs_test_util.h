// Test helpers for the configfs exporters: an Fs that counts and records the
// mutating calls made through it, and a dump of a directory tree for exact
// comparisons.
#pragma once

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/fs.h"

namespace pillar::testing {

class RecordingFs : public Fs {
 public:
  explicit RecordingFs(Fs& inner) : inner_(inner) {}

  // Every mutating call, as "op path[ = value]", in order.
  const std::vector<std::string>& ops() const { return ops_; }
  size_t mutations() const { return ops_.size(); }
  // Every reading call (read, readlink, list, exists, is-dir), and the
  // entries the listings returned: what an operation's cost grows with.
  size_t reads() const { return reads_; }
  size_t listed() const { return listed_; }
  void Clear() {
    ops_.clear();
    reads_ = 0;
    listed_ = 0;
  }

  StatusOr<std::string> ReadFile(const std::string& p) override {
    ++reads_;
    return inner_.ReadFile(p);
  }
  Status WriteFile(const std::string& p, const std::string& c) override {
    ops_.push_back("write " + p + " = " + c);
    return inner_.WriteFile(p, c);
  }
  Status WriteFileAtomic(const std::string& p, const std::string& c) override {
    ops_.push_back("write-atomic " + p + " = " + c);
    return inner_.WriteFileAtomic(p, c);
  }
  Status MakeDir(const std::string& p) override {
    ops_.push_back("mkdir " + p);
    return inner_.MakeDir(p);
  }
  Status MakeDirs(const std::string& p) override {
    ops_.push_back("mkdir -p " + p);
    return inner_.MakeDirs(p);
  }
  Status RemoveDir(const std::string& p) override {
    ops_.push_back("rmdir " + p);
    return inner_.RemoveDir(p);
  }
  Status Unlink(const std::string& p) override {
    ops_.push_back("unlink " + p);
    return inner_.Unlink(p);
  }
  Status Symlink(const std::string& t, const std::string& l) override {
    ops_.push_back("symlink " + l + " -> " + t);
    return inner_.Symlink(t, l);
  }
  StatusOr<std::string> ReadLink(const std::string& p) override {
    ++reads_;
    return inner_.ReadLink(p);
  }
  StatusOr<std::vector<DirEntry>> ListDir(const std::string& p) override {
    ++reads_;
    auto entries = inner_.ListDir(p);
    if (entries.ok()) listed_ += entries->size();
    return entries;
  }
  bool Exists(const std::string& p) override {
    ++reads_;
    return inner_.Exists(p);
  }
  bool IsDir(const std::string& p) override {
    ++reads_;
    return inner_.IsDir(p);
  }
  Status CreateSparseFile(const std::string& p, int64_t s) override {
    ops_.push_back("create " + p);
    return inner_.CreateSparseFile(p, s);
  }
  Status ResizeFile(const std::string& p, int64_t s) override {
    ops_.push_back("truncate " + p);
    return inner_.ResizeFile(p, s);
  }
  StatusOr<int64_t> FileSize(const std::string& p) override { return inner_.FileSize(p); }
  StatusOr<FsCapacity> StatVfs(const std::string& p) override { return inner_.StatVfs(p); }
  Status RemoveTree(const std::string& p) override {
    ops_.push_back("rm -r " + p);
    return inner_.RemoveTree(p);
  }
  Status Chmod(const std::string& p, mode_t m) override {
    char octal[16];
    std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(m));
    ops_.push_back("chmod " + p + " = " + octal);
    return inner_.Chmod(p, m);
  }
  StatusOr<mode_t> Mode(const std::string& p) override { return inner_.Mode(p); }
  Status Chown(const std::string& p, uid_t u, gid_t g) override {
    ops_.push_back("chown " + p + " = " + std::to_string(u) + ":" + std::to_string(g));
    return inner_.Chown(p, u, g);
  }
  Status CopyFile(const std::string& f, const std::string& t) override {
    ops_.push_back("copy " + f + " -> " + t);
    return inner_.CopyFile(f, t);
  }
  Status CopyTree(const std::string& f, const std::string& t) override {
    ops_.push_back("copy -r " + f + " -> " + t);
    return inner_.CopyTree(f, t);
  }
  Status Rename(const std::string& f, const std::string& t) override {
    ops_.push_back("rename " + f + " -> " + t);
    return inner_.Rename(f, t);
  }
  StatusOr<int64_t> AllocatedBytes(const std::string& p) override {
    return inner_.AllocatedBytes(p);
  }

 private:
  Fs& inner_;
  std::vector<std::string> ops_;
  size_t reads_ = 0;
  size_t listed_ = 0;
};

// Every entry below `dir`, keyed by its path relative to `dir`: "<dir>" for a
// directory, "-> target" for a link, and a file's content without the
// trailing newline.
inline std::map<std::string, std::string> DumpTree(const std::string& dir) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::string rel = it->path().lexically_relative(dir).string();
    if (it->is_symlink()) {
      out[rel] = "-> " + fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      out[rel] = "<dir>";
    } else {
      PosixFs posix;
      auto content = posix.ReadFile(it->path().string());
      std::string v = content.ok() ? *content : "<unreadable>";
      if (!v.empty() && v.back() == '\n') v.pop_back();
      out[rel] = v;
    }
  }
  return out;
}

// A path's permission bits, or 07777 (no mode pillar sets) when it cannot
// be read.
inline mode_t ModeOf(Fs& fs, const std::string& path) {
  auto m = fs.Mode(path);
  return m.ok() ? *m : 07777;
}

}  // namespace pillar::testing
