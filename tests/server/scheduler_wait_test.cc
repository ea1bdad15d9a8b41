// The per-consumer `wait_s` stat (docs/stats.md): seconds a NEXT of the
// consumer was parked without data, on the scheduler's (fake) clock.
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using namespace scheduler_test;

double WaitOf(const nlohmann::json& consumer) { return consumer["wait_s"].get<double>(); }

// A NEXT answered at once adds nothing; one parked for 300 ms adds 0.3 s,
// growing while it waits and frozen once it is answered.
TEST_F(SchedulerTest, WaitCountsOnlyParkedNexts) {
  Make({.window = 2});
  MustJoin("a", {});
  ASSERT_TRUE(Produce());
  EXPECT_EQ(WaitOf(ConsumerStats("a")), 0.0);
  Release("a", NextBatch("a"));  // data was there: no wait
  env_.now += 50ms;
  EXPECT_EQ(WaitOf(ConsumerStats("a")), 0.0);

  EXPECT_TRUE(Next("a").empty()) << "nothing published: the NEXT is parked";
  env_.now += 100ms;
  EXPECT_NEAR(WaitOf(ConsumerStats("a")), 0.1, 1e-9) << "a wait in progress counts";
  env_.now += 200ms;
  ASSERT_TRUE(Produce());
  const std::vector<proto::Message> r = Replies("a");
  ASSERT_EQ(r.size(), 1u) << Describe(r);
  EXPECT_NEAR(WaitOf(ConsumerStats("a")), 0.3, 1e-9);
  env_.now += 1s;
  EXPECT_NEAR(WaitOf(ConsumerStats("a")), 0.3, 1e-9) << "answered: the wait ended";
}

// A consumer detached while it waits (BYE, eviction) stops waiting.
TEST_F(SchedulerTest, WaitEndsWhenDetached) {
  Make({.window = 2});
  MustJoin("a", {});
  ASSERT_TRUE(Produce());
  const proto::Batch held = NextBatch("a");
  EXPECT_TRUE(Next("a").empty());
  env_.now += 250ms;
  s_->Bye("a", {held.lease_id});  // detached; its lease keeps it in the stats
  env_.now += 1s;
  const nlohmann::json a = ConsumerStats("a");
  ASSERT_FALSE(a.is_null());
  EXPECT_FALSE(a["attached"].get<bool>());
  EXPECT_NEAR(WaitOf(a), 0.25, 1e-9);
}

}  // namespace
}  // namespace batchcast
