#include "node/attach/nvme_fabrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pillar::node {

StatusOr<std::string> DevFabrics::Connect(const std::string& options) {
  int fd = open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return Unavailable("open " + path_ + ": " + std::strerror(e) +
                       (e == ENOENT ? " (is the nvme-fabrics module loaded?)" : ""));
  }
  ssize_t n = write(fd, options.data(), options.size());
  int write_errno = errno;
  std::string reply;
  if (n == static_cast<ssize_t>(options.size())) {
    char buf[256];
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r > 0) reply.assign(buf, static_cast<size_t>(r));
  }
  close(fd);
  if (n < 0) {
    std::string why = std::string("write to ") + path_ + ": " + std::strerror(write_errno);
    if (write_errno == EALREADY) return AlreadyExists(why);
    return Unavailable(why);
  }
  if (n != static_cast<ssize_t>(options.size())) {
    return Unavailable("short write to " + path_ + " (" + std::to_string(n) + " of " +
                       std::to_string(options.size()) + " bytes)");
  }
  while (!reply.empty() && (reply.back() == '\n' || reply.back() == '\0')) reply.pop_back();
  return reply;
}

}  // namespace pillar::node
