#include "common/exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pillar {
namespace {

std::string Trimmed(const std::string& s, size_t limit) {
  std::string out = s;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (out.size() > limit) out = out.substr(0, limit) + "...";
  return out;
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

std::string Command::ToString() const {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

Status Exec::RunOk(const Command& cmd, ExecResult* result) {
  auto r = Run(cmd);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return Internal("command '" + cmd.ToString() + "' exited " + std::to_string(r->exit_code) +
                    ": " + Trimmed(r->err.empty() ? r->out : r->err, 512));
  }
  if (result != nullptr) *result = std::move(r).value();
  return Status::Ok();
}

StatusOr<ExecResult> SystemExec::Run(const Command& cmd) {
  if (cmd.argv.empty()) return InvalidArgument("exec: empty argv");
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return Internal("pipe: " + std::string(strerror(errno)));
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    return Internal("pipe: " + std::string(strerror(errno)));
  }
  std::vector<char*> args;
  args.reserve(cmd.argv.size() + 1);
  for (const auto& a : cmd.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) return Internal("fork: " + std::string(strerror(errno)));
  if (pid == 0) {
    // Child: own process group so a timeout kills the whole tree.
    setpgid(0, 0);
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execvp(args[0], args.data());
    const char* msg = "exec failed\n";
    (void)!write(2, msg, strlen(msg));
    _exit(127);
  }
  setpgid(pid, pid);
  int in_w = in_pipe[1], out_r = out_pipe[0], err_r = err_pipe[0];
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  fcntl(in_w, F_SETFL, O_NONBLOCK);

  ExecResult result;
  size_t written = 0;
  if (cmd.stdin_data.empty()) CloseFd(in_w);
  auto deadline = std::chrono::steady_clock::now() + cmd.timeout;
  bool timed_out = false;
  char buf[65536];
  while (out_r >= 0 || err_r >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[3];
    int n = 0;
    if (out_r >= 0) fds[n++] = {out_r, POLLIN, 0};
    if (err_r >= 0) fds[n++] = {err_r, POLLIN, 0};
    if (in_w >= 0) fds[n++] = {in_w, POLLOUT, 0};
    int rc = poll(fds, n, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) break;
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_w) {
        ssize_t w = write(in_w, cmd.stdin_data.data() + written, cmd.stdin_data.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN) written = cmd.stdin_data.size();
        if (written >= cmd.stdin_data.size()) CloseFd(in_w);
        continue;
      }
      ssize_t r = read(fds[i].fd, buf, sizeof(buf));
      if (r > 0) {
        (fds[i].fd == out_r ? result.out : result.err).append(buf, static_cast<size_t>(r));
      } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        if (fds[i].fd == out_r)
          CloseFd(out_r);
        else
          CloseFd(err_r);
      }
    }
  }
  CloseFd(in_w);
  CloseFd(out_r);
  CloseFd(err_r);
  if (timed_out) kill(-pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return DeadlineExceeded("command '" + cmd.ToString() + "' timed out after " +
                            std::to_string(cmd.timeout.count()) + " ms");
  }
  if (WIFEXITED(wstatus)) {
    result.exit_code = WEXITSTATUS(wstatus);
    if (result.exit_code == 127 && result.err == "exec failed\n") {
      return NotFound("command not found: " + cmd.argv[0]);
    }
  } else if (WIFSIGNALED(wstatus)) {
    result.exit_code = 128 + WTERMSIG(wstatus);
  }
  return result;
}

}  // namespace pillar
