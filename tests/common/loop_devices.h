// Loop devices a test's real agent attached (a file pool's block volumes are
// served through losetup) outlive the agent by design: a restarted agent must
// find them. A test is not a storage node: it detaches every loop device
// whose backing file lies under its own directory, so no run leaves devices
// attached to deleted images behind.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace pillar::testing {

// Detaches (losetup -d) each loop device backed by a file under `dir`;
// returns how many it detached.
inline int DetachLoopDevicesUnder(const std::string& dir) {
  namespace fs = std::filesystem;
  int detached = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/block", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("loop", 0) != 0) continue;
    std::ifstream in(e.path() / "loop" / "backing_file");
    std::string backing;
    if (!std::getline(in, backing)) continue;
    // A deleted image reads "<path> (deleted)": the prefix still names it.
    if (backing.rfind(dir + "/", 0) != 0) continue;
    pid_t pid = fork();
    if (pid == 0) {
      execlp("losetup", "losetup", "-d", ("/dev/" + name).c_str(), nullptr);
      _exit(127);
    }
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0) {
      detached++;
    }
  }
  return detached;
}

}  // namespace pillar::testing
