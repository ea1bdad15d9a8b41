// ThreadPool (sources/src/thread_pool.h): every item runs once, on a worker
// number below size(); TryParallelFor returns the first error and skips the
// items not yet started after it; an exception thrown by an item is the
// call's Internal error, on any worker, never std::terminate.
#include "sources/src/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace batchcast {
namespace {

TEST(ThreadPool, EveryItemRunsOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 7, 1000}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      std::atomic<bool> bad_worker{false};
      EXPECT_TRUE(pool.ParallelFor(n,
                                   [&](int worker, int64_t i) {
                                     if (worker < 0 || worker >= threads) bad_worker = true;
                                     runs[static_cast<size_t>(i)].fetch_add(1);
                                   })
                      .ok());
      EXPECT_FALSE(bad_worker);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1) << i;
    }
  }
}

TEST(ThreadPool, TryParallelForStopsAfterTheFirstError) {
  ThreadPool pool(1);  // one worker: items run in order
  int ran = 0;
  const Status s = pool.TryParallelFor(10, [&](int, int64_t i) {
    ++ran;
    return i == 3 ? DataLossError("item 3") : Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "item 3");
  EXPECT_EQ(ran, 4);

  ThreadPool four(4);
  std::atomic<int> calls{0};
  const Status all_bad = four.TryParallelFor(100, [&](int, int64_t) {
    calls.fetch_add(1);
    return InternalError("bad");
  });
  EXPECT_EQ(all_bad.code(), StatusCode::kInternal);
  EXPECT_LT(calls.load(), 100);
  EXPECT_TRUE(four.TryParallelFor(50, [](int, int64_t) { return Status::Ok(); }).ok());
}

TEST(ThreadPool, AnExceptionBecomesTheCallsError) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::atomic<int> calls{0};
    const Status s = pool.ParallelFor(200, [&](int, int64_t i) {
      calls.fetch_add(1);
      if (i % 7 == 3) throw std::runtime_error("item " + std::to_string(i));
    });
    EXPECT_EQ(s.code(), StatusCode::kInternal) << threads;
    EXPECT_NE(s.message().find("unexpected exception in a worker thread: item"), std::string::npos)
        << s.message();
    EXPECT_LT(calls.load(), 200) << "items after the exception are skipped";
    const Status t = pool.TryParallelFor(10, [](int, int64_t) -> Status { throw 1; });
    EXPECT_EQ(t.code(), StatusCode::kInternal);
    // The pool works on afterwards.
    std::atomic<int> after{0};
    EXPECT_TRUE(pool.ParallelFor(50, [&](int, int64_t) { after.fetch_add(1); }).ok());
    EXPECT_EQ(after.load(), 50);
  }
}

}  // namespace
}  // namespace batchcast
