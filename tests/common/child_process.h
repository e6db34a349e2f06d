// Starting a project binary as a child for integration tests: stderr to a
// log file, readiness signalled by the port it writes to a ready file.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
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

}  // namespace pillar::testing
