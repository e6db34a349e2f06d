#include "common/exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

Status PipeError() { return Internal("pipe: " + std::string(strerror(errno))); }

// Forks a child in its own process group (so a timeout kills its whole tree)
// with stdin, stdout and stderr on the given descriptors (all O_CLOEXEC
// pipe ends, so the child holds nothing else of ours).
StatusOr<pid_t> Spawn(const Command& cmd, int in_fd, int out_fd, int err_fd) {
  if (cmd.argv.empty()) return InvalidArgument("exec: empty argv");
  std::vector<char*> args;
  args.reserve(cmd.argv.size() + 1);
  for (const auto& a : cmd.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return Internal("fork: " + std::string(strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execvp(args[0], args.data());
    const char* msg = "exec failed\n";
    (void)!write(2, msg, strlen(msg));
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

// One pipe we read to its end into `sink`.
struct Reader {
  int fd;
  std::string* sink;
};

// Feeds `input` to in_w (closing it when done), reads every reader to its
// end; false when the deadline passed first.
bool Pump(int in_w, const std::string& input, std::vector<Reader> readers,
          std::chrono::steady_clock::time_point deadline) {
  size_t written = 0;
  if (in_w >= 0) fcntl(in_w, F_SETFL, O_NONBLOCK);
  if (input.empty()) CloseFd(in_w);
  char buf[65536];
  auto open_readers = [&] {
    return std::any_of(readers.begin(), readers.end(), [](const Reader& r) { return r.fd >= 0; });
  };
  bool timed_out = false;
  while (open_readers()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    std::vector<pollfd> fds;
    for (const auto& r : readers) {
      if (r.fd >= 0) fds.push_back({r.fd, POLLIN, 0});
    }
    if (in_w >= 0) fds.push_back({in_w, POLLOUT, 0});
    int rc = poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) break;
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == in_w) {
        ssize_t w = write(in_w, input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN) written = input.size();
        if (written >= input.size()) CloseFd(in_w);
        continue;
      }
      for (auto& r : readers) {
        if (r.fd != p.fd) continue;
        ssize_t n = read(r.fd, buf, sizeof(buf));
        if (n > 0) {
          r.sink->append(buf, static_cast<size_t>(n));
        } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
          CloseFd(r.fd);
        }
      }
    }
  }
  CloseFd(in_w);
  for (auto& r : readers) CloseFd(r.fd);
  return !timed_out;
}

// Waits for the child and fills result's exit code; NOT_FOUND when the
// program could not be started.
Status Reap(pid_t pid, const Command& cmd, ExecResult& result) {
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(wstatus)) {
    result.exit_code = WEXITSTATUS(wstatus);
    if (result.exit_code == 127 && result.err == "exec failed\n") {
      return NotFound("command not found: " + cmd.argv[0]);
    }
  } else if (WIFSIGNALED(wstatus)) {
    result.exit_code = 128 + WTERMSIG(wstatus);
  }
  return Status::Ok();
}

Status TimedOut(const std::string& what, std::chrono::milliseconds timeout) {
  return DeadlineExceeded("command '" + what + "' timed out after " +
                          std::to_string(timeout.count()) + " ms");
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

StatusOr<PipeResult> Exec::RunPipe(const Command& from, const Command& to) {
  return Unimplemented("this Exec runs no pipelines: '" + from.ToString() + " | " + to.ToString() +
                       "'");
}

Status Exec::RunPipeOk(const Command& from, const Command& to) {
  auto r = RunPipe(from, to);
  if (!r.ok()) return r.status();
  const std::string line = from.ToString() + " | " + to.ToString();
  // The reader first: when it fails, the writer's broken pipe is its echo.
  for (const auto& [side, res] : {std::pair{&to, &r->to}, std::pair{&from, &r->from}}) {
    if (res->exit_code != 0) {
      return Internal("command '" + side->ToString() + "' (in '" + line + "') exited " +
                      std::to_string(res->exit_code) + ": " +
                      Trimmed(res->err.empty() ? res->out : res->err, 512));
    }
  }
  return Status::Ok();
}

StatusOr<ExecResult> SystemExec::Run(const Command& cmd) {
  if (cmd.argv.empty()) return InvalidArgument("exec: empty argv");
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return PipeError();
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return PipeError();
  auto pid = Spawn(cmd, in_pipe[0], out_pipe[1], err_pipe[1]);
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (!pid.ok()) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return pid.status();
  }
  ExecResult result;
  bool done =
      Pump(in_pipe[1], cmd.stdin_data, {{out_pipe[0], &result.out}, {err_pipe[0], &result.err}},
           std::chrono::steady_clock::now() + cmd.timeout);
  if (!done) kill(-*pid, SIGKILL);
  Status reaped = Reap(*pid, cmd, result);
  if (!done) return TimedOut(cmd.ToString(), cmd.timeout);
  RETURN_IF_ERROR(reaped);
  return result;
}

StatusOr<PipeResult> SystemExec::RunPipe(const Command& from, const Command& to) {
  if (from.argv.empty() || to.argv.empty()) return InvalidArgument("exec: empty argv");
  // link: from's stdout to to's stdin; none: from's (empty) stdin.
  int link[2], none[2], from_err[2], to_out[2], to_err[2];
  if (pipe2(link, O_CLOEXEC) != 0) return PipeError();
  if (pipe2(none, O_CLOEXEC) != 0 || pipe2(from_err, O_CLOEXEC) != 0 ||
      pipe2(to_out, O_CLOEXEC) != 0 || pipe2(to_err, O_CLOEXEC) != 0) {
    return PipeError();
  }
  close(none[1]);
  auto from_pid = Spawn(from, none[0], link[1], from_err[1]);
  close(none[0]);
  close(link[1]);
  close(from_err[1]);
  StatusOr<pid_t> to_pid =
      from_pid.ok() ? Spawn(to, link[0], to_out[1], to_err[1]) : StatusOr<pid_t>(from_pid.status());
  close(link[0]);
  close(to_out[1]);
  close(to_err[1]);
  PipeResult result;
  auto timeout = std::max(from.timeout, to.timeout);
  bool done = Pump(
      -1, "",
      {{from_err[0], &result.from.err}, {to_out[0], &result.to.out}, {to_err[0], &result.to.err}},
      std::chrono::steady_clock::now() + (to_pid.ok() ? timeout : timeout.zero()));
  if (!done || !to_pid.ok()) {
    if (from_pid.ok()) kill(-*from_pid, SIGKILL);
    if (to_pid.ok()) kill(-*to_pid, SIGKILL);
  }
  Status reaped = Status::Ok();
  if (from_pid.ok()) reaped = Reap(*from_pid, from, result.from);
  if (to_pid.ok()) {
    Status s = Reap(*to_pid, to, result.to);
    if (reaped.ok()) reaped = s;
  }
  if (!to_pid.ok()) return to_pid.status();
  if (!done) return TimedOut(from.ToString() + " | " + to.ToString(), timeout);
  RETURN_IF_ERROR(reaped);
  return result;
}

}  // namespace pillar
