#include "agent/file_event_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace pillar::agent {

FileEventWatcher::FileEventWatcher(const std::string& path, std::chrono::milliseconds debounce,
                                   std::function<void()> on_change)
    : debounce_(debounce), on_change_(std::move(on_change)) {
  size_t slash = path.rfind('/');
  dir_ = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  name_ = slash == std::string::npos ? path : path.substr(slash + 1);
}

FileEventWatcher::~FileEventWatcher() { Stop(); }

Status FileEventWatcher::Start() {
  inotify_fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify_fd_ < 0) return Unavailable(std::string("inotify_init1: ") + std::strerror(errno));
  constexpr uint32_t kMask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE;
  if (inotify_add_watch(inotify_fd_, dir_.c_str(), kMask) < 0) {
    int err = errno;
    close(inotify_fd_);
    inotify_fd_ = -1;
    return Unavailable("cannot watch " + dir_ + " for " + name_ + ": " + std::strerror(err));
  }
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    int err = errno;
    close(inotify_fd_);
    inotify_fd_ = -1;
    return Unavailable(std::string("eventfd: ") + std::strerror(err));
  }
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void FileEventWatcher::Stop() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof one) != sizeof one) {
      log::Error("cannot wake the file watcher", {{"error", std::strerror(errno)}});
    }
    thread_.join();
  }
  for (int* fd : {&inotify_fd_, &stop_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void FileEventWatcher::Run() {
  using Clock = std::chrono::steady_clock;
  bool pending = false;
  Clock::time_point due;
  alignas(inotify_event) char buf[4096];
  while (true) {
    int timeout = -1;  // nothing pending: sleep until an event
    if (pending) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due - Clock::now());
      timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int n = poll(fds, 2, timeout);
    if (n < 0 && errno != EINTR) {
      log::Error("file watcher stopped",
                 {{"file", dir_ + "/" + name_}, {"error", std::strerror(errno)}});
      return;
    }
    if (n > 0 && (fds[1].revents & POLLIN) != 0) return;
    if (n > 0 && (fds[0].revents & POLLIN) != 0) {
      ssize_t len;
      while ((len = read(inotify_fd_, buf, sizeof buf)) > 0) {
        for (char* p = buf; p < buf + len;) {
          auto* ev = reinterpret_cast<inotify_event*>(p);
          // IN_Q_OVERFLOW lost events: one of them may have been ours.
          if ((ev->mask & IN_Q_OVERFLOW) != 0 || (ev->len > 0 && name_ == ev->name)) {
            pending = true;
            due = Clock::now() + debounce_;
          }
          p += sizeof(inotify_event) + ev->len;
        }
      }
      continue;
    }
    if (pending && Clock::now() >= due) {
      pending = false;
      on_change_();
    }
  }
}

}  // namespace pillar::agent
