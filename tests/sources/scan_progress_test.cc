// ScanProgress (sources/src/scan_progress.h): at most one line per interval,
// none for a loop that ends within the first, counts from every thread, and
// lines a person can read (done, total, percentage, rate, time left).
#include "sources/src/scan_progress.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sources/src/thread_pool.h"

namespace batchcast {
namespace {

using std::chrono::milliseconds;

// A ScanProgress of `what` and `total` on a fake clock (`now`), one line a
// second at most, its lines kept.
struct FakeProgress {
  FakeProgress(std::string what, uint64_t total)
      : p(
            std::move(what), total, [this](const std::string& l) { lines.push_back(l); },
            std::chrono::seconds(1), [this] { return now; }) {}
  ScanProgress::Clock::time_point now{};
  std::vector<std::string> lines;
  ScanProgress p;
};

TEST(ScanProgress, AtMostOneLinePerInterval) {
  FakeProgress f("scanning /data", 1000);
  for (int i = 0; i < 100; ++i) f.p.Add();  // within the first second: nothing
  EXPECT_TRUE(f.lines.empty());
  f.now += milliseconds(1000);
  f.p.Add();
  ASSERT_EQ(f.lines.size(), 1u);
  EXPECT_EQ(f.lines[0], "scanning /data: 101 of 1000 files (10%), 101 files/s, about 9 s left");
  for (int i = 0; i < 99; ++i) f.p.Add();
  f.now += milliseconds(999);  // not yet a second since the last line
  f.p.Add();
  EXPECT_EQ(f.lines.size(), 1u);
  f.now += milliseconds(1);
  f.p.Add(99);
  ASSERT_EQ(f.lines.size(), 2u);
  EXPECT_EQ(f.lines[1], "scanning /data: 300 of 1000 files (30%), 150 files/s, about 5 s left");
  EXPECT_EQ(f.p.done(), 300u);
}

TEST(ScanProgress, UnknownTotal) {
  FakeProgress f("listing /data", 0);
  f.now += std::chrono::seconds(2);
  f.p.Add(4000);
  ASSERT_EQ(f.lines.size(), 1u);
  EXPECT_EQ(f.lines[0], "listing /data: 4000 files so far, 2000 files/s");
}

TEST(ScanProgress, ManyThreadsOneLinePerInterval) {
  // Real clock, 20 ms interval: every item counted, and never two lines
  // closer than the interval (counted by the sink's own clock).
  std::atomic<int> lines{0};
  ScanProgress p(
      "scanning", 0, [&](const std::string&) { lines.fetch_add(1); }, milliseconds(20));
  const auto t0 = ScanProgress::Clock::now();
  ThreadPool pool(4);
  EXPECT_TRUE(pool.ParallelFor(20000,
                               [&](int, int64_t i) {
                                 if (i % 1000 == 0) std::this_thread::sleep_for(milliseconds(1));
                                 p.Add();
                               })
                  .ok());
  const double ms =
      std::chrono::duration<double, std::milli>(ScanProgress::Clock::now() - t0).count();
  EXPECT_EQ(p.done(), 20000u);
  EXPECT_LE(lines.load(), static_cast<int>(ms / 20) + 1);
}

}  // namespace
}  // namespace batchcast
