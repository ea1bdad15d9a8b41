// Note [Read retries] (sources/src/read_retry.h) with a fake clock and
// injected faults: a failure to read is retried with backoff and is not a
// bad file; only a file that stays unreadable is given up on; Cancel ends
// the waits. Then the CPU image source over a dataset whose reads fail for a
// while: every sample of every epoch is written once, none dropped.
#include "sources/src/read_retry.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>

#include "host_slot.h"
#include "sources/src/image_source.h"
#include "temp_dataset.h"

namespace batchcast {
namespace {

using testing::HostSlot;
using testing::TempDataset;
using namespace std::chrono_literals;

// Reads real files, except that a path's first failures[path] reads (or
// every read with `always`) fail with `error`; time is fake: a wait moves the
// clock to its deadline at once.
class FaultyEnv : public ReadEnv {
 public:
  Status ReadFile(const std::string& path, std::vector<uint8_t>& out, size_t limit) override {
    MutexLock l(&mu_);
    ++reads_[path];
    if (always_.count(path) != 0) return always_[path];
    if (auto it = failures_.find(path); it != failures_.end() && it->second.count > 0) {
      --it->second.count;
      return it->second.error;
    }
    if (!fail_all_.ok()) return fail_all_;
    return ReadEnv::ReadFile(path, out, limit);
  }
  Clock::time_point Now() override {
    MutexLock l(&mu_);
    return now_;
  }
  void WaitUntil(Mutex*, CondVar*, Clock::time_point deadline) override {
    MutexLock l(&mu_);
    now_ = std::max(now_, deadline);
  }

  void FailFirst(const std::string& path, int count, Status error) {
    MutexLock l(&mu_);
    failures_[path] = {count, std::move(error)};
  }
  void FailAlways(const std::string& path, Status error) {
    MutexLock l(&mu_);
    always_[path] = std::move(error);
  }
  void FailEverything(Status error) {
    MutexLock l(&mu_);
    fail_all_ = std::move(error);
  }
  int reads(const std::string& path) {
    MutexLock l(&mu_);
    return reads_[path];
  }
  Clock::duration elapsed() {
    MutexLock l(&mu_);
    return now_ - Clock::time_point{};
  }

 private:
  struct Failure {
    int count = 0;
    Status error;
  };
  Mutex mu_;
  Clock::time_point now_ BC_GUARDED_BY(mu_){};
  std::map<std::string, Failure> failures_ BC_GUARDED_BY(mu_);
  std::map<std::string, Status> always_ BC_GUARDED_BY(mu_);
  std::map<std::string, int> reads_ BC_GUARDED_BY(mu_);
  Status fail_all_ BC_GUARDED_BY(mu_);
};

int64_t Counter(const RetryingReader& r, const std::string& name) {
  for (const auto& [k, v] : r.counters()) {
    if (k == name) return v;
  }
  ADD_FAILURE() << "no counter " << name;
  return -1;
}

class ReadRetryTest : public ::testing::Test {
 protected:
  ReadRetryTest() { file_ = data_.Write("a.jpg", TempDataset::Jpeg(16, 16)); }
  TempDataset data_;
  std::string file_;
  FaultyEnv env_;
  std::vector<uint8_t> bytes_;
};

TEST_F(ReadRetryTest, TransientFailuresAreRetriedWithGrowingDelaysUntilTheReadWorks) {
  env_.FailFirst(file_, 3, UnavailableError("cannot open: Too many open files"));
  RetryingReader reader(&env_);
  ASSERT_TRUE(reader.Read(file_, bytes_).ok());
  EXPECT_EQ(bytes_, TempDataset::Jpeg(16, 16));
  EXPECT_EQ(env_.reads(file_), 4);
  EXPECT_EQ(env_.elapsed(), 10ms + 20ms + 40ms);
  EXPECT_EQ(Counter(reader, "read_retries"), 3);
  EXPECT_EQ(Counter(reader, "reads_recovered"), 1);
  EXPECT_EQ(Counter(reader, "files_unreadable"), 0);
}

TEST_F(ReadRetryTest, ALongOutageIsWaitedOutAtMaxDelay) {
  // EIO for about a minute of fake time: still no loss.
  ReadRetryPolicy policy;
  env_.FailFirst(file_, 40, UnavailableError("cannot read: Input/output error"));
  RetryingReader reader(&env_, policy);
  ASSERT_TRUE(reader.Read(file_, bytes_).ok());
  EXPECT_GT(env_.elapsed(), 60s);
  EXPECT_LT(env_.elapsed(), policy.give_up_after);
  EXPECT_EQ(Counter(reader, "read_retries"), 40);
}

TEST_F(ReadRetryTest, AFileThatStaysUnreadableIsGivenUpAfterGiveUpAfter) {
  ReadRetryPolicy policy;
  policy.give_up_after = 10s;
  env_.FailAlways(file_, UnavailableError("cannot read: Input/output error"));
  RetryingReader reader(&env_, policy);
  const Status s = reader.Read(file_, bytes_);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("Input/output error (still failing after"), std::string::npos)
      << s.ToString();
  EXPECT_GE(env_.elapsed(), 10s);
  EXPECT_LT(env_.elapsed(), 10s + policy.max_delay + 1ms);
  EXPECT_EQ(Counter(reader, "files_unreadable"), 1);
  EXPECT_EQ(Counter(reader, "reads_recovered"), 0);
}

TEST_F(ReadRetryTest, AMissingFileIsTriedAFewTimesOverAboutASecond) {
  ReadRetryPolicy policy;
  env_.FailAlways(file_, NotFoundError("cannot open: No such file or directory"));
  RetryingReader reader(&env_, policy);
  EXPECT_EQ(reader.Read(file_, bytes_).code(), StatusCode::kNotFound);
  EXPECT_EQ(env_.reads(file_), policy.missing_attempts);
  EXPECT_LE(env_.elapsed(), 2s);
  EXPECT_EQ(Counter(reader, "files_unreadable"), 1);
}

TEST_F(ReadRetryTest, AFileThatComesBackIsRead) {
  env_.FailFirst(file_, 2, NotFoundError("cannot open: No such file or directory"));
  RetryingReader reader(&env_);
  EXPECT_TRUE(reader.Read(file_, bytes_).ok());
  EXPECT_EQ(Counter(reader, "reads_recovered"), 1);
}

TEST_F(ReadRetryTest, WhatIsNotAReadFailureIsNotRetried) {
  env_.FailAlways(file_, InvalidArgumentError("cannot read: it is a FIFO, not a regular file"));
  RetryingReader reader(&env_);
  EXPECT_EQ(reader.Read(file_, bytes_).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(env_.reads(file_), 1);
  EXPECT_EQ(Counter(reader, "read_retries"), 0);
}

TEST_F(ReadRetryTest, CancelEndsTheWaitsWithCancelled) {
  env_.FailAlways(file_, UnavailableError("cannot read: Input/output error"));
  RetryingReader reader(&env_);
  reader.Cancel();
  const Status s = reader.Read(file_, bytes_);
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  EXPECT_EQ(env_.reads(file_), 1);
  EXPECT_EQ(env_.elapsed(), 0s);
}

TEST_F(ReadRetryTest, CancelFromAnotherThreadEndsAWaitInProgress) {
  // The real clock: the default env waits on the condition variable.
  class Failing : public ReadEnv {
    Status ReadFile(const std::string&, std::vector<uint8_t>&, size_t) override {
      return UnavailableError("cannot read: Input/output error");
    }
  } env;
  ReadRetryPolicy policy;
  policy.first_delay = policy.max_delay = std::chrono::milliseconds(60000);
  RetryingReader reader(&env, policy);
  std::thread canceller([&] {
    std::this_thread::sleep_for(50ms);
    reader.Cancel();
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(reader.Read(file_, bytes_).code(), StatusCode::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  canceller.join();
}

// The CPU image source of `data` (16 x 16 images, `workers` decoders), its
// reads through `env`.
Result<std::unique_ptr<Source>> SourceReadingThrough(ReadEnv& env, const TempDataset& data,
                                                     int workers) {
  SourceOptions o;
  o.data = data.root();
  o.size = 16;
  o.workers = workers;
  return MakeImageSource(o, &env);
}

// The CPU image source, end to end over the retrying reads: every file fails
// twice (scan and samples alike) and one fails 30 times (minutes of fake
// time); every epoch still writes every sample exactly once.
TEST(ImageSourceReadRetry, EverySampleOfEveryEpochIsWrittenOnceThroughTransientFailures) {
  TempDataset data;
  std::vector<std::string> paths;
  for (int i = 0; i < 12; ++i) {
    paths.push_back(data.Write("c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".jpg",
                               TempDataset::Jpeg(24, 20, static_cast<uint32_t>(i + 1))));
  }
  FaultyEnv env;
  for (const std::string& p : paths) env.FailFirst(p, 2, UnavailableError("cannot read: EIO"));
  Result<std::unique_ptr<Source>> source = SourceReadingThrough(env, data, 3);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->size(), 12u);
  for (uint32_t epoch = 0; epoch < 3; ++epoch) {
    for (const std::string& p : paths) {
      env.FailFirst(p, p == paths[5] ? 30 : 2, UnavailableError("cannot read: EIO"));
    }
    std::vector<int64_t> indices(12);
    for (int64_t i = 0; i < 12; ++i) indices[static_cast<size_t>(i)] = (i * 5 + epoch) % 12;
    HostSlot slot(**source, std::move(indices), epoch);
    Result<uint32_t> valid = (*source)->FillBatch(slot.view, {});
    ASSERT_TRUE(valid.ok()) << valid.status().ToString();
    EXPECT_EQ(*valid, 12u) << "epoch " << epoch;
    EXPECT_EQ(std::set<int64_t>(slot.indices.begin(), slot.indices.end()).size(), 12u);
  }
  for (const auto& [k, v] : (*source)->counters()) {
    if (k == "files_dropped_at_decode" || k == "samples_dropped" || k == "files_unreadable") {
      EXPECT_EQ(v, 0) << k;
    }
    if (k == "reads_recovered") {
      EXPECT_EQ(v, 12 + 3 * 12) << k;  // the scan, then 3 epochs
    }
  }
}

// Files that vanish after the scan are dropped (after their retries), and
// more of them than drop_limit() stop the producer with DataLoss.
TEST(ImageSourceReadRetry, TooManyFilesFailingAfterTheScanIsAnError) {
  TempDataset data;
  for (int i = 0; i < 24; ++i) {
    data.Write("c/" + std::to_string(i) + ".jpg",
               TempDataset::Jpeg(16, 16, static_cast<uint32_t>(i + 1)));
  }
  FaultyEnv env;
  Result<std::unique_ptr<Source>> source = SourceReadingThrough(env, data, 2);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  env.FailEverything(NotFoundError("cannot open: No such file or directory"));
  std::vector<int64_t> indices(24);
  for (int64_t i = 0; i < 24; ++i) indices[static_cast<size_t>(i)] = i;
  HostSlot slot(**source, std::move(indices), 0);
  Result<uint32_t> valid = (*source)->FillBatch(slot.view, {});
  ASSERT_FALSE(valid.ok());
  EXPECT_EQ(valid.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(valid.status().message().find("files failed after the scan"), std::string::npos)
      << valid.status().ToString();
}

}  // namespace
}  // namespace batchcast
