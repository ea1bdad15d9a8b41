// StageTimes (sources/src/stage_times.h): cumulative seconds per stage on an
// injected clock, summed over threads.
#include "sources/src/stage_times.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace batchcast {
namespace {

TEST(StageTimes, ScopesAddTheirTimeToTheirStage) {
  int64_t now = 1000;
  StageTimes t({{"read", 1}, {"decode", 3}}, [&] { return now; });
  {
    StageTimes::Scope s(&t, 0);
    now += 250'000'000;
  }
  {
    StageTimes::Scope s(&t, 1);
    now += 1'000'000'000;
  }
  t.Add(1, 500'000'000);
  const std::vector<StageTime> r = t.Read();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].name, "read");
  EXPECT_DOUBLE_EQ(r[0].seconds, 0.25);
  EXPECT_EQ(r[0].threads, 1);
  EXPECT_EQ(r[1].name, "decode");
  EXPECT_DOUBLE_EQ(r[1].seconds, 1.5);
  EXPECT_EQ(r[1].threads, 3);
}

// Worker-seconds: four threads in one stage at once add four times the wall
// time (docs/stats.md: a pool stage may exceed 100% of wall time).
TEST(StageTimes, ConcurrentThreadsAreSummed) {
  StageTimes t({{"decode", 4}}, [] { return int64_t{0}; });
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 1000; ++k) t.Add(0, 1'000'000);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_DOUBLE_EQ(t.Read()[0].seconds, 4.0);
}

}  // namespace
}  // namespace batchcast
