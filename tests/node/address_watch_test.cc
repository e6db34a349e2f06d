#include "node/address_watch.h"

#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace pillar::node {
namespace {

// One netlink message of `type` with `payload` bytes after its header.
std::vector<uint8_t> Message(uint16_t type, size_t payload = 16) {
  std::vector<uint8_t> m(NLMSG_ALIGN(sizeof(nlmsghdr) + payload), 0);
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(sizeof(nlmsghdr) + payload);
  h.nlmsg_type = type;
  std::memcpy(m.data(), &h, sizeof(h));
  return m;
}

std::vector<uint8_t> Concat(std::vector<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(AddressWatchParse, AddressAndLinkEventsAnywhereInTheDatagram) {
  for (uint16_t t : {RTM_NEWADDR, RTM_DELADDR, RTM_NEWLINK, RTM_DELLINK}) {
    auto m = Message(t);
    EXPECT_TRUE(HoldsAddressEvent(m.data(), m.size())) << t;
  }
  auto route = Message(RTM_NEWROUTE);
  EXPECT_FALSE(HoldsAddressEvent(route.data(), route.size())) << "a route is not an address";
  auto both = Concat({Message(RTM_NEWROUTE, 13), Message(RTM_DELADDR)});
  EXPECT_TRUE(HoldsAddressEvent(both.data(), both.size())) << "the second message, aligned";
}

TEST(AddressWatchParse, MalformedOrTruncatedDatagramsHoldNothing) {
  EXPECT_FALSE(HoldsAddressEvent(nullptr, 0));
  auto m = Message(RTM_NEWADDR);
  EXPECT_FALSE(HoldsAddressEvent(m.data(), sizeof(nlmsghdr) - 1)) << "shorter than a header";
  // A length past the datagram's end, and one shorter than the header.
  for (uint32_t bad : {static_cast<uint32_t>(m.size() + 1), static_cast<uint32_t>(4)}) {
    auto b = m;
    std::memcpy(b.data(), &bad, sizeof(bad));
    EXPECT_FALSE(HoldsAddressEvent(b.data(), b.size())) << bad;
  }
  // A route message whose length runs past the end hides what follows.
  auto two = Concat({Message(RTM_NEWROUTE), Message(RTM_NEWADDR)});
  uint32_t huge = 0xffffffffu;
  std::memcpy(two.data(), &huge, sizeof(huge));
  EXPECT_FALSE(HoldsAddressEvent(two.data(), two.size()));
  // Every prefix of a valid datagram is handled without reading past it.
  auto full = Concat({Message(RTM_NEWROUTE, 7), Message(RTM_NEWLINK, 3)});
  for (size_t n = 0; n <= full.size(); ++n) {
    std::vector<uint8_t> copy(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    (void)HoldsAddressEvent(copy.data(), copy.size());
  }
}

// The real kernel: in a network namespace of its own (a child process, so
// nothing of the host's networking is touched), an address added to its
// loopback wakes the watch.
TEST(AddressWatchLive, AnAddressAddedInTheNamespaceWakesTheWatch) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(10);
    std::atomic<int> woken{0};
    AddressWatch watch([&] { woken++; });
    if (!watch.Start().ok()) _exit(11);
    if (woken.load() != 0) _exit(12);
    if (std::system("ip link set lo up && ip addr add 10.77.0.1/32 dev lo") != 0) _exit(13);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (woken.load() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    watch.Stop();
    _exit(woken.load() > 0 ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  // 10: no network namespace for root here; 11: no rtnetlink; 13: no `ip`;
  // 14: the event never came.
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace pillar::node
