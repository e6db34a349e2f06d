// The store's retry loops: a lost race is retried a bounded number of times;
// an unreachable store is waited for at a start, within its patience.
#include "store/retry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace pillar::store {
namespace {

using std::chrono::milliseconds;

StartPatience Quick(milliseconds total) {
  StartPatience p;
  p.total = total;
  p.first_wait = milliseconds(1);
  p.max_wait = milliseconds(4);
  return p;
}

TEST(RetryWhileUnreachableTest, AnUnreachableStoreIsTriedAgainUntilItAnswers) {
  int calls = 0;
  std::vector<milliseconds> waits;
  Status s = RetryWhileUnreachable(
      Quick(std::chrono::minutes(1)),
      [&]() -> Status {
        ++calls;
        if (calls == 1) return Unavailable("connection refused");
        if (calls < 5) return DeadlineExceeded("Timeout was reached");
        return Status::Ok();
      },
      [&](const Status& failure, milliseconds wait) {
        EXPECT_TRUE(Unreachable(failure)) << failure.ToString();
        waits.push_back(wait);
      });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(calls, 5);
  // Doubling from first_wait, capped at max_wait.
  EXPECT_EQ(waits, (std::vector<milliseconds>{milliseconds(1), milliseconds(2), milliseconds(4),
                                              milliseconds(4)}));
}

TEST(RetryWhileUnreachableTest, ARefusalIsReturnedAtOnce) {
  int calls = 0;
  int retries = 0;
  Status s = RetryWhileUnreachable(
      Quick(std::chrono::minutes(1)),
      [&]() -> Status {
        ++calls;
        return PermissionDenied("pillaragents is forbidden");
      },
      [&](const Status&, milliseconds) { ++retries; });
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(retries, 0);
}

TEST(RetryWhileUnreachableTest, PatienceEndsWithTheLastFailure) {
  int calls = 0;
  Status s = RetryWhileUnreachable(
      Quick(milliseconds(30)),
      [&]() -> Status {
        ++calls;
        return Unavailable("no route to host");
      },
      [](const Status&, milliseconds) {});
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(s.message(), "no route to host");
  EXPECT_GT(calls, 1);
}

TEST(RetryWhileUnreachableTest, NoPatienceMeansOneTry) {
  int calls = 0;
  Status s = RetryWhileUnreachable(
      Quick(milliseconds(0)),
      [&]() -> Status {
        ++calls;
        return Unavailable("down");
      },
      [](const Status&, milliseconds) {});
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace pillar::store
