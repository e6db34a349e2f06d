// Starting a project binary as a child for integration tests: stderr to a
// log file, readiness signalled by the port it writes to a ready file.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace pillar::testing {

class ChildProcess {
 public:
  ~ChildProcess() { Stop(); }

  // Starts argv (argv[0] a path) and waits for a positive port number in
  // `ready_file`; 0 when the child exited or was not ready within 60 s (a
  // ceiling for slow machines: readiness normally takes well under 1 s).
  int StartAndWaitForPort(std::vector<std::string> args, const std::string& log,
                          const std::string& ready_file) {
    unlink(ready_file.c_str());
    Start(std::move(args), log);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(ready_file);
      int port = 0;
      if (in >> port && port > 0) return port;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  }

  // Starts argv (argv[0] a path), its stderr appended to `log`; no wait.
  void Start(std::vector<std::string> args, const std::string& log) {
    Stop();
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = freopen(log.c_str(), "a", stderr);
      (void)f;
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

// The whole file (a child's log, for a failure message); "" when unreadable.
inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  return {(std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()};
}

// Polls `pred` every `every` until it holds or `timeout` passes: the
// milliseconds it took (a figure to print, never a limit), or -1.
template <typename Pred>
int64_t WaitForMs(Pred pred, std::chrono::milliseconds timeout,
                  std::chrono::milliseconds every = std::chrono::milliseconds(100)) {
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < timeout) {
    if (pred()) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - start)
          .count();
    }
    std::this_thread::sleep_for(every);
  }
  return -1;
}

}  // namespace pillar::testing
