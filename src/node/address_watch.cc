#include "node/address_watch.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/log.h"

namespace pillar::node {

bool HoldsAddressEvent(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t off = 0;
  while (len - off >= sizeof(nlmsghdr)) {
    nlmsghdr h{};
    std::memcpy(&h, p + off, sizeof(h));  // the buffer need not be aligned
    if (h.nlmsg_len < sizeof(nlmsghdr) || h.nlmsg_len > len - off) return false;
    switch (h.nlmsg_type) {
      case RTM_NEWADDR:
      case RTM_DELADDR:
      case RTM_NEWLINK:
      case RTM_DELLINK:
        return true;
      default:
        break;
    }
    size_t step = NLMSG_ALIGN(h.nlmsg_len);
    if (step > len - off) break;
    off += step;
  }
  return false;
}

AddressWatch::AddressWatch(std::function<void()> on_change) : on_change_(std::move(on_change)) {}

AddressWatch::~AddressWatch() { Stop(); }

Status AddressWatch::Start() {
  fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd_ < 0) return Unavailable(std::string("socket(AF_NETLINK): ") + std::strerror(errno));
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_LINK;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s = Unavailable(std::string("bind(rtnetlink address groups): ") + std::strerror(errno));
    close(fd_);
    fd_ = -1;
    return s;
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    Status s = Unavailable(std::string("eventfd: ") + std::strerror(errno));
    close(fd_);
    fd_ = -1;
    return s;
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void AddressWatch::Stop() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) close(fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  fd_ = -1;
  wake_fd_ = -1;
}

void AddressWatch::Loop() {
  std::array<uint8_t, 16384> buf{};
  while (!stop_) {
    std::array<pollfd, 2> fds{pollfd{fd_, POLLIN, 0}, pollfd{wake_fd_, POLLIN, 0}};
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      log::Warn("address watch stopped; the identity poll goes on",
                {{"error", std::string("poll: ") + std::strerror(errno)}});
      return;
    }
    if (stop_) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    bool changed = false;
    while (true) {
      ssize_t n = recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == ENOBUFS) {
        changed = true;  // events were lost: look again
        continue;
      }
      if (n <= 0) break;
      changed = changed || HoldsAddressEvent(buf.data(), static_cast<size_t>(n));
    }
    if (changed) on_change_();
  }
}

}  // namespace pillar::node
