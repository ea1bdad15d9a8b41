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

TEST(EpochOrders, EpochsTheStreamMovedAwayFromAreForgotten) {
  EpochOrders orders = Orders();
  // Half of each of many epochs, all holes (moves), then one whole epoch of
  // holes: only that one is DataLoss, and nothing piles up on the way.
  for (uint64_t e = 0; e < 100; ++e) EXPECT_TRUE(orders.Record(e, 0, 8, 0).ok()) << e;
  EXPECT_TRUE(orders.Record(99, 8, 4, 0).ok());
  EXPECT_EQ(orders.Record(99, 12, 4, 0).code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace batchcast
