#include "controller/leader.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace pillar::controller {

FileLockLeader::~FileLockLeader() {
  if (fd_ >= 0) close(fd_);
}

Status FileLockLeader::WaitForLeadership() {
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) return Internal("leader lock " + path_ + ": " + strerror(errno));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    log::Info("another replica leads; waiting for the leader lock", {{"lock", path_}});
    if (flock(fd_, LOCK_EX) != 0) return Internal("leader lock " + path_ + ": " + strerror(errno));
  }
  leader_ = true;
  return Status::Ok();
}

}  // namespace pillar::controller
