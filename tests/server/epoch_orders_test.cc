// EpochOrders (server/src/epoch_orders.h): an epoch whose every seq was
// written as a hole is DataLoss; seqs written again after the stream moved
// back to a resumed place (Note [Resume]) count once.
#include "server/src/epoch_orders.h"

#include <gtest/gtest.h>

namespace batchcast {
namespace {

EpochOrders Orders() {
  Result<Sampler> s = Sampler::Make(16, SamplerOptions{1, true, 0, 1});
  EXPECT_TRUE(s.ok());
  return EpochOrders(std::move(*s), 0);
}

TEST(EpochOrders, AnEpochOfHolesOnlyIsDataLossOnceEverySeqWasWritten) {
  EpochOrders orders = Orders();
  EXPECT_TRUE(orders.Record(0, 0, 8, 0).ok());
  const Status s = orders.Record(0, 8, 8, 0);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("epoch 0 produced no sample"), std::string::npos) << s.message();
  // One sample is enough.
  EXPECT_TRUE(orders.Record(1, 0, 8, 0).ok());
  EXPECT_TRUE(orders.Record(1, 8, 8, 1).ok());
}

TEST(EpochOrders, SeqsWrittenAgainCountOnce) {
  EpochOrders orders = Orders();
  // The first half of epoch 0, all holes, written twice (the stream moved
  // back to a resumed place): the epoch is not complete yet.
  EXPECT_TRUE(orders.Record(0, 0, 8, 0).ok());
  EXPECT_TRUE(orders.Record(0, 0, 8, 0).ok());
  // Its second half has samples: no DataLoss.
  EXPECT_TRUE(orders.Record(0, 8, 8, 8).ok());
  // Written again after its end, it starts over, harmlessly.
  EXPECT_TRUE(orders.Record(0, 0, 8, 8).ok());
}

TEST(EpochOrders, OfEpochsBegunAndLeftTheFarthestFromTheOneWrittenAreForgotten) {
  EpochOrders orders = Orders();
  // Halves of epochs 10-13, all holes, then of epoch 5 (the stream moved
  // back to a resumed place): of the five begun, 13 is the farthest from 5
  // and is forgotten; 10 is kept.
  for (uint64_t e = 10; e < 14; ++e) EXPECT_TRUE(orders.Record(e, 0, 8, 0).ok()) << e;
  EXPECT_TRUE(orders.Record(5, 0, 8, 0).ok());
  EXPECT_EQ(orders.Record(10, 8, 8, 0).code(), StatusCode::kDataLoss) << "kept";
  EXPECT_TRUE(orders.Record(13, 8, 8, 0).ok()) << "forgotten: its second half starts over";
  EXPECT_EQ(orders.Record(5, 8, 8, 0).code(), StatusCode::kDataLoss);
  // Many epochs begun and left: nothing piles up; the one written completes.
  for (uint64_t e = 100; e < 200; ++e) EXPECT_TRUE(orders.Record(e, 0, 8, 0).ok()) << e;
  EXPECT_EQ(orders.Record(199, 8, 8, 0).code(), StatusCode::kDataLoss);
  EXPECT_TRUE(orders.Record(100, 8, 8, 0).ok()) << "forgotten";
}

}  // namespace
}  // namespace batchcast
