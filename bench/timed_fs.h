// An Fs that passes every call to another and adds up the CPU time the
// calling thread spent inside them, so a benchmark can split an operation's
// cost into the file system's part (the configfs simulator and the kernel's
// system calls under it) and the agent's own. Two clock reads per call; a
// benchmark reports them with the figures they qualify.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/fs.h"

namespace pillar::bench {

class TimedFs : public Fs {
 public:
  explicit TimedFs(Fs& inner) : inner_(inner) {}

  // CPU nanoseconds inside the calls, the calls, and those that change
  // something (write, mkdir, rmdir, link, unlink...), since the last Reset.
  int64_t nanos() const { return nanos_; }
  int64_t calls() const { return calls_; }
  int64_t mutations() const { return mutations_; }
  void Reset() {
    nanos_ = 0;
    calls_ = 0;
    mutations_ = 0;
  }

  StatusOr<std::string> ReadFile(const std::string& p) override {
    return Timed([&] { return inner_.ReadFile(p); });
  }
  Status WriteFile(const std::string& p, const std::string& c) override {
    return Mutating([&] { return inner_.WriteFile(p, c); });
  }
  Status WriteFileAtomic(const std::string& p, const std::string& c) override {
    return Mutating([&] { return inner_.WriteFileAtomic(p, c); });
  }
  Status MakeDir(const std::string& p) override {
    return Mutating([&] { return inner_.MakeDir(p); });
  }
  Status MakeDirs(const std::string& p) override {
    return Mutating([&] { return inner_.MakeDirs(p); });
  }
  Status RemoveDir(const std::string& p) override {
    return Mutating([&] { return inner_.RemoveDir(p); });
  }
  Status Unlink(const std::string& p) override {
    return Mutating([&] { return inner_.Unlink(p); });
  }
  Status Symlink(const std::string& t, const std::string& l) override {
    return Mutating([&] { return inner_.Symlink(t, l); });
  }
  StatusOr<std::string> ReadLink(const std::string& p) override {
    return Timed([&] { return inner_.ReadLink(p); });
  }
  StatusOr<std::vector<DirEntry>> ListDir(const std::string& p) override {
    return Timed([&] { return inner_.ListDir(p); });
  }
  bool Exists(const std::string& p) override {
    return Timed([&] { return inner_.Exists(p); });
  }
  bool IsDir(const std::string& p) override {
    return Timed([&] { return inner_.IsDir(p); });
  }
  Status CreateSparseFile(const std::string& p, int64_t s) override {
    return Mutating([&] { return inner_.CreateSparseFile(p, s); });
  }
  Status ResizeFile(const std::string& p, int64_t s) override {
    return Mutating([&] { return inner_.ResizeFile(p, s); });
  }
  StatusOr<int64_t> FileSize(const std::string& p) override {
    return Timed([&] { return inner_.FileSize(p); });
  }
  StatusOr<FsCapacity> StatVfs(const std::string& p) override {
    return Timed([&] { return inner_.StatVfs(p); });
  }
  Status RemoveTree(const std::string& p) override {
    return Mutating([&] { return inner_.RemoveTree(p); });
  }
  Status Chmod(const std::string& p, mode_t m) override {
    return Mutating([&] { return inner_.Chmod(p, m); });
  }
  StatusOr<mode_t> Mode(const std::string& p) override {
    return Timed([&] { return inner_.Mode(p); });
  }
  Status Chown(const std::string& p, uid_t u, gid_t g) override {
    return Mutating([&] { return inner_.Chown(p, u, g); });
  }
  Status CopyFile(const std::string& f, const std::string& t) override {
    return Mutating([&] { return inner_.CopyFile(f, t); });
  }
  Status CopyTree(const std::string& f, const std::string& t) override {
    return Mutating([&] { return inner_.CopyTree(f, t); });
  }
  Status Rename(const std::string& f, const std::string& t) override {
    return Mutating([&] { return inner_.Rename(f, t); });
  }
  StatusOr<int64_t> AllocatedBytes(const std::string& p) override {
    return Timed([&] { return inner_.AllocatedBytes(p); });
  }

  // CPU time of the calling thread.
  static int64_t ThreadNanos() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }

 private:
  template <typename F>
  std::invoke_result_t<F> Timed(F&& f) {
    int64_t start = ThreadNanos();
    auto result = std::forward<F>(f)();
    nanos_ += ThreadNanos() - start;
    ++calls_;
    return result;
  }
  template <typename F>
  std::invoke_result_t<F> Mutating(F&& f) {
    ++mutations_;
    return Timed(std::forward<F>(f));
  }

  Fs& inner_;
  // Each thread's own CPU time, added up: exact for one calling thread.
  std::atomic<int64_t> nanos_{0};
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> mutations_{0};
};

}  // namespace pillar::bench
