// WaitClock (client/src/wait_clock.h): the consumer's own wait for data, in
// all and per interval, a wait in progress included; never more than the
// interval.
#include "client/src/wait_clock.h"

#include <gtest/gtest.h>

namespace batchcast::internal {
namespace {

using std::chrono::milliseconds;

TEST(WaitClock, TakesTheShareOfEachIntervalSpentWaiting) {
  const WaitClock::Clock::time_point t0{};
  WaitClock clock(t0);
  clock.Begin(t0 + milliseconds(100));
  clock.End(t0 + milliseconds(400));  // 300 ms of 1 s
  WaitShare s = clock.Take(t0 + milliseconds(1000));
  EXPECT_DOUBLE_EQ(s.wait_s, 0.3);
  EXPECT_DOUBLE_EQ(s.wall_s, 1.0);
  EXPECT_DOUBLE_EQ(s.fraction(), 0.3);
  // A wait in progress counts up to the moment it is read, the rest later.
  clock.Begin(t0 + milliseconds(1500));
  s = clock.Take(t0 + milliseconds(2000));
  EXPECT_DOUBLE_EQ(s.wait_s, 0.5);
  EXPECT_DOUBLE_EQ(s.fraction(), 0.5);
  clock.End(t0 + milliseconds(3000));
  s = clock.Take(t0 + milliseconds(3000));
  EXPECT_DOUBLE_EQ(s.wait_s, 1.0);
  EXPECT_DOUBLE_EQ(s.fraction(), 1.0);
  EXPECT_DOUBLE_EQ(clock.Total(t0 + milliseconds(5000)), 1.8);
  // No time, no share.
  s = clock.Take(t0 + milliseconds(3000));
  EXPECT_EQ(s.wall_s, 0);
  EXPECT_EQ(s.fraction(), 0);
}

TEST(WaitClock, TotalIncludesTheWaitInProgress) {
  const WaitClock::Clock::time_point t0{};
  WaitClock clock(t0);
  EXPECT_EQ(clock.Total(t0 + milliseconds(10)), 0);
  clock.Begin(t0 + milliseconds(10));
  EXPECT_DOUBLE_EQ(clock.Total(t0 + milliseconds(260)), 0.25);
  clock.End(t0 + milliseconds(510));
  EXPECT_DOUBLE_EQ(clock.Total(t0 + milliseconds(9000)), 0.5);
}

}  // namespace
}  // namespace batchcast::internal
