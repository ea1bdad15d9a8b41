// The stress programs' checker must pass what the design promises and catch
// every way a stream can break it: EpochChecker against hand-made streams.
#include "epoch_checker.h"

#include <gtest/gtest.h>

namespace batchcast::stress {
namespace {

constexpr uint64_t kSamples = 100;

// Serves a consumer's batches from the stream of a server with `kSamples`
// synthetic samples (seed 7), as the scheduler would.
class Stream {
 public:
  Stream() : sampler_(*Sampler::Make(kSamples, SamplerOptions{7, true, 0, 1})) {}
  std::vector<int64_t> Indices(uint64_t seq, uint64_t n) const {
    std::vector<int64_t> out;
    for (uint64_t s = seq; s < seq + n; ++s)
      out.push_back(sampler_.EpochOrder(s / kSamples)[s % kSamples]);
    return out;
  }
  const Sampler& sampler() const { return sampler_; }

 private:
  Sampler sampler_;
};

EpochChecker MakeChecker(uint32_t batch, bool drop_last, JoinPolicy join) {
  EpochCheckerOptions o;
  o.dataset_size = kSamples;
  o.sampler = SamplerOptions{7, true, 0, 1};
  o.batch_size = batch;
  o.drop_last = drop_last;
  o.join = join;
  o.batches_per_epoch = drop_last ? kSamples / batch : (kSamples + batch - 1) / batch;
  return *EpochChecker::Make(o);
}

// Feeds consumer epoch `epoch` starting at `first` in batches of `batch`.
Status FeedEpoch(EpochChecker& c, const Stream& s, uint32_t epoch, uint64_t first, uint32_t batch,
                 bool drop_last, CheckedEpoch* checked = nullptr) {
  const uint64_t n = drop_last ? kSamples / batch * batch : kSamples;
  uint32_t batches = 0;
  for (uint64_t off = 0; off < n; off += batch) {
    const uint64_t size = std::min<uint64_t>(batch, n - off);
    BATCHCAST_RETURN_IF_ERROR(c.OnBatch(epoch, first + off, s.Indices(first + off, size), 0));
    ++batches;
  }
  return c.OnEndOfEpoch(epoch, batches, 0, checked);
}

TEST(EpochChecker, NextEpochJoinerEpochsAreTheSamplersOrder) {
  Stream s;
  EpochChecker c = MakeChecker(16, false, JoinPolicy::kNextEpoch);
  for (uint32_t e = 0; e < 3; ++e) {
    CheckedEpoch checked;
    ASSERT_TRUE(FeedEpoch(c, s, e, (2 + e) * kSamples, 16, false, &checked).ok());
    EXPECT_EQ(checked.samples, kSamples);
    EXPECT_EQ(checked.digest, OrderDigest(s.sampler().EpochOrder(2 + e)));
  }
  EXPECT_EQ(c.checked_epochs(), 3u);
}

TEST(EpochChecker, DropLastPassesOverTheRemainder) {
  Stream s;
  EpochChecker c = MakeChecker(16, true, JoinPolicy::kNextEpoch);
  ASSERT_TRUE(FeedEpoch(c, s, 0, 0, 16, true).ok());
  ASSERT_TRUE(FeedEpoch(c, s, 1, kSamples, 16, true).ok());  // not at 96
  EXPECT_EQ(c.checked_epochs(), 2u);
}

TEST(EpochChecker, ImmediateJoinerEpochsStraddleProducerEpochs) {
  Stream s;
  EpochChecker c = MakeChecker(7, false, JoinPolicy::kImmediate);
  ASSERT_TRUE(FeedEpoch(c, s, 0, 37, 7, false).ok());
  ASSERT_TRUE(FeedEpoch(c, s, 1, 37 + kSamples, 7, false).ok());
  EXPECT_EQ(c.checked_epochs(), 2u);
}

TEST(EpochChecker, NextEpochJoinerOffABoundaryIsAViolation) {
  Stream s;
  EpochChecker c = MakeChecker(10, false, JoinPolicy::kNextEpoch);
  EXPECT_FALSE(c.OnBatch(0, 30, s.Indices(30, 10), 0).ok());
}

TEST(EpochChecker, RepeatedSamplesAreAViolation) {
  Stream s;
  EpochChecker c = MakeChecker(10, false, JoinPolicy::kImmediate);
  ASSERT_TRUE(c.OnBatch(0, 0, s.Indices(0, 10), 0).ok());
  Status dup = c.OnBatch(0, 5, s.Indices(5, 10), 0);
  EXPECT_FALSE(dup.ok());
  EXPECT_NE(dup.message().find("repeats"), std::string::npos) << dup.message();
}

TEST(EpochChecker, AGapIsAViolation) {
  Stream s;
  EpochChecker c = MakeChecker(10, false, JoinPolicy::kImmediate);
  ASSERT_TRUE(c.OnBatch(0, 0, s.Indices(0, 10), 0).ok());
  EXPECT_FALSE(c.OnBatch(0, 20, s.Indices(20, 10), 0).ok());
}

TEST(EpochChecker, AWrongIndexIsAViolation) {
  Stream s;
  EpochChecker c = MakeChecker(10, false, JoinPolicy::kImmediate);
  std::vector<int64_t> idx = s.Indices(0, 10);
  std::swap(idx[3], idx[4]);  // right samples, wrong order
  EXPECT_FALSE(c.OnBatch(0, 0, idx, 0).ok());
  // It resynchronizes: the next batch is checked again and passes.
  EXPECT_TRUE(c.OnBatch(0, 10, s.Indices(10, 10), 0).ok());
}

TEST(EpochChecker, AShortEpochIsAViolation) {
  Stream s;
  EpochChecker c = MakeChecker(10, false, JoinPolicy::kImmediate);
  for (uint64_t seq = 0; seq < 90; seq += 10)
    ASSERT_TRUE(c.OnBatch(0, seq, s.Indices(seq, 10), 0).ok());
  EXPECT_FALSE(c.OnEndOfEpoch(0, 9, 0).ok());
  EXPECT_EQ(c.checked_epochs(), 0u);
}

TEST(EpochChecker, WrongBatchSizeEpochNumberOrCountAreViolations) {
  Stream s;
  {
    EpochChecker c = MakeChecker(10, false, JoinPolicy::kImmediate);
    EXPECT_FALSE(c.OnBatch(0, 0, s.Indices(0, 9), 0).ok());
  }
  {
    EpochChecker c = MakeChecker(10, false, JoinPolicy::kImmediate);
    EXPECT_FALSE(c.OnBatch(1, 0, s.Indices(0, 10), 0).ok());
  }
  {
    EpochChecker c = MakeChecker(10, false, JoinPolicy::kImmediate);
    for (uint64_t seq = 0; seq < 100; seq += 10)
      ASSERT_TRUE(c.OnBatch(0, seq, s.Indices(seq, 10), 0).ok());
    EXPECT_FALSE(c.OnEndOfEpoch(0, 11, 0).ok()) << "the marker's batch count is checked";
  }
}

TEST(EpochChecker, ABatchCrossingTheEpochEndIsAViolation) {
  Stream s;
  EpochChecker c = MakeChecker(30, false, JoinPolicy::kImmediate);
  for (uint64_t seq = 0; seq < 90; seq += 30)
    ASSERT_TRUE(c.OnBatch(0, seq, s.Indices(seq, 30), 0).ok());
  EXPECT_FALSE(c.OnBatch(0, 90, s.Indices(90, 30), 0).ok());
}

TEST(EpochChecker, ASkipBreaksOnlyTheEpochsItTouches) {
  Stream s;
  EpochChecker c = MakeChecker(10, false, JoinPolicy::kImmediate);
  ASSERT_TRUE(c.OnBatch(0, 0, s.Indices(0, 10), 0).ok());
  // Skipped 150 samples: epoch 0 ends early (marker), epoch 1 lands at 160.
  ASSERT_TRUE(c.OnEndOfEpoch(0, 1, 150).ok());
  ASSERT_TRUE(c.OnBatch(1, 160, s.Indices(160, 10), 150).ok());
  for (uint64_t seq = 170; seq < 200; seq += 10)
    ASSERT_TRUE(c.OnBatch(1, seq, s.Indices(seq, 10), 150).ok());
  ASSERT_TRUE(c.OnEndOfEpoch(1, 4, 150).ok());
  EXPECT_EQ(c.skipped_epochs(), 2u);
  ASSERT_TRUE(FeedEpoch(c, s, 2, 200, 10, false).ok());
  EXPECT_EQ(c.checked_epochs(), 1u);
}

TEST(OrderDigest, IsOrderSensitive) {
  const std::vector<int64_t> a = {0, 1, 2, 3};
  const std::vector<int64_t> b = {0, 2, 1, 3};
  EXPECT_NE(OrderDigest(a), OrderDigest(b));
  DigestBuilder d;
  for (int64_t x : a) d.Add(x);
  EXPECT_EQ(d.value(), OrderDigest(a));
}

}  // namespace
}  // namespace batchcast::stress
