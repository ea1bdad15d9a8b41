// Tests of batchcast::Sampler: permutations, determinism (with a golden value),
// sharding and errors.
#include "core/src/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace batchcast {
namespace {

Sampler MakeOrDie(uint64_t size, SamplerOptions options) {
  Result<Sampler> r = Sampler::Make(size, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

// The indices of shard `rank` of `shards` in dataset order.
std::vector<int64_t> ShardIndices(uint64_t size, uint32_t rank, uint32_t shards) {
  std::vector<int64_t> out;
  for (uint64_t i = rank; i < size; i += shards) out.push_back(static_cast<int64_t>(i));
  return out;
}

TEST(SamplerTest, EpochIsAPermutation) {
  for (uint64_t size : {1u, 2u, 3u, 10u, 1000u, 4097u}) {
    const Sampler s = MakeOrDie(size, {.seed = 7});
    EXPECT_EQ(s.epoch_len(), size);
    for (uint64_t e : {0u, 1u, 2u, 1000u}) {
      std::vector<int64_t> order = s.EpochOrder(e);
      ASSERT_EQ(order.size(), size);
      std::sort(order.begin(), order.end());
      EXPECT_EQ(order, ShardIndices(size, 0, 1)) << "size " << size << " epoch " << e;
    }
  }
}

TEST(SamplerTest, EpochsDiffer) {
  const Sampler s = MakeOrDie(1000, {.seed = 0});
  std::set<std::vector<int64_t>> seen;
  for (uint64_t e = 0; e < 20; ++e) {
    const std::vector<int64_t> order = s.EpochOrder(e);
    EXPECT_NE(order, ShardIndices(1000, 0, 1)) << "epoch " << e << " is not shuffled";
    EXPECT_TRUE(seen.insert(order).second) << "epoch " << e << " repeats an earlier order";
  }
  // Consecutive epochs are not just rotations of one another: they disagree
  // in most positions.
  const std::vector<int64_t> a = s.EpochOrder(0), b = s.EpochOrder(1);
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 20u);
}

TEST(SamplerTest, SeedsDiffer) {
  const Sampler a = MakeOrDie(1000, {.seed = 0});
  const Sampler b = MakeOrDie(1000, {.seed = 1});
  EXPECT_NE(a.EpochOrder(0), b.EpochOrder(0));
  // (seed, epoch) pairs are mixed, not added: seed 1 epoch 0 != seed 0 epoch 1.
  EXPECT_NE(b.EpochOrder(0), a.EpochOrder(1));
}

TEST(SamplerTest, SameSeedSameOrder) {
  for (uint64_t seed : {0ull, 1ull, 42ull, 0xFFFFFFFFFFFFFFFFull}) {
    const Sampler a = MakeOrDie(777, {.seed = seed});
    const Sampler b = MakeOrDie(777, {.seed = seed});
    for (uint64_t e : {0u, 3u, 99u}) {
      EXPECT_EQ(a.EpochOrder(e), b.EpochOrder(e));
      EXPECT_EQ(a.EpochOrder(e), a.EpochOrder(e));  // pure function
    }
  }
}

TEST(SamplerTest, GoldenOrder) {
  // The order must be the same on every machine and build; a change of the
  // generator (SplitMix64, MixSeed, the rejection sampler, Fisher-Yates)
  // breaks reproducibility of every run and must be deliberate.
  const Sampler s = MakeOrDie(1000, {.seed = 0});
  const std::vector<int64_t> order = s.EpochOrder(0);
  const std::vector<int64_t> first10(order.begin(), order.begin() + 10);
  EXPECT_EQ(first10, (std::vector<int64_t>{352, 467, 740, 134, 710, 987, 838, 315, 167, 124}));
  const std::vector<int64_t> order1 = s.EpochOrder(1);
  EXPECT_EQ(std::vector<int64_t>(order1.begin(), order1.begin() + 5),
            (std::vector<int64_t>{300, 354, 230, 681, 187}));
}

TEST(SamplerTest, GoldenSplitMix64) {
  // Reference values of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64(state), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(SplitMix64(state), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(SplitMix64(state), 0x06C45D188009454Full);
  EXPECT_EQ(state, 3 * 0x9E3779B97F4A7C15ull);
}

TEST(SamplerTest, MixSeedDependsOnEveryWord) {
  const uint64_t base = MixSeed(1, 2, 3);
  EXPECT_EQ(base, MixSeed(1, 2, 3));
  EXPECT_NE(base, MixSeed(0, 2, 3));
  EXPECT_NE(base, MixSeed(1, 0, 3));
  EXPECT_NE(base, MixSeed(1, 2, 0));
  EXPECT_NE(MixSeed(1, 2), MixSeed(2, 1));
  EXPECT_EQ(MixSeed(5, 6), MixSeed(5, 6, 0));
}

TEST(SamplerTest, NoShuffleKeepsOrder) {
  const Sampler s = MakeOrDie(50, {.seed = 3, .shuffle = false});
  EXPECT_EQ(s.EpochOrder(0), ShardIndices(50, 0, 1));
  EXPECT_EQ(s.EpochOrder(17), ShardIndices(50, 0, 1));
  const Sampler t = MakeOrDie(50, {.shuffle = false, .shard_rank = 2, .num_shards = 3});
  EXPECT_EQ(t.EpochOrder(0), ShardIndices(50, 2, 3));
  EXPECT_EQ(t.EpochOrder(0).front(), 2);
  EXPECT_EQ(t.EpochOrder(0).back(), 47);
}

TEST(SamplerTest, ShardsPartitionTheDataset) {
  const std::vector<std::pair<uint64_t, uint32_t>> cases = {
      {10, 1}, {10, 2}, {10, 3}, {10, 10}, {11, 4}, {1000, 7}, {1001, 8}, {4097, 16}, {3, 3}};
  for (const auto& [size, shards] : cases) {
    for (bool shuffle : {true, false}) {
      SCOPED_TRACE("size " + std::to_string(size) + " shards " + std::to_string(shards) +
                   (shuffle ? " shuffled" : ""));
      for (uint64_t epoch : {0u, 5u}) {
        std::vector<int64_t> all;
        uint64_t min_len = UINT64_MAX, max_len = 0;
        for (uint32_t rank = 0; rank < shards; ++rank) {
          const Sampler s = MakeOrDie(
              size, {.seed = 11, .shuffle = shuffle, .shard_rank = rank, .num_shards = shards});
          const std::vector<int64_t> order = s.EpochOrder(epoch);
          ASSERT_EQ(order.size(), s.epoch_len());
          min_len = std::min<uint64_t>(min_len, order.size());
          max_len = std::max<uint64_t>(max_len, order.size());
          // Each shard is a permutation of its static share i % S == rank.
          std::vector<int64_t> sorted = order;
          std::sort(sorted.begin(), sorted.end());
          EXPECT_EQ(sorted, ShardIndices(size, rank, shards)) << "rank " << rank;
          all.insert(all.end(), order.begin(), order.end());
        }
        // Disjoint and complete: the union, sorted, is 0..size-1 with no repeats.
        std::sort(all.begin(), all.end());
        std::vector<int64_t> expected(size);
        std::iota(expected.begin(), expected.end(), 0);
        EXPECT_EQ(all, expected);
        // Shards differ in size by at most one.
        EXPECT_LE(max_len - min_len, 1u);
      }
    }
  }
}

TEST(SamplerTest, ShardLengths) {
  // 10 samples over 4 shards: ranks 0 and 1 get 3, ranks 2 and 3 get 2.
  const uint64_t expected[] = {3, 3, 2, 2};
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(MakeOrDie(10, {.shard_rank = r, .num_shards = 4}).epoch_len(), expected[r]);
  }
}

TEST(SamplerTest, ShardsShuffleIndependently) {
  // Two shards with the same seed do not just visit "the same positions".
  const Sampler a = MakeOrDie(2000, {.seed = 5, .shard_rank = 0, .num_shards = 2});
  const Sampler b = MakeOrDie(2000, {.seed = 5, .shard_rank = 1, .num_shards = 2});
  const std::vector<int64_t> oa = a.EpochOrder(0), ob = b.EpochOrder(0);
  ASSERT_EQ(oa.size(), ob.size());
  // Both shuffled (not the static order).
  EXPECT_NE(oa, ShardIndices(2000, 0, 2));
  EXPECT_NE(ob, ShardIndices(2000, 1, 2));
}

TEST(SamplerTest, ShuffleLooksUniform) {
  // Position of index 0 over many epochs of a 4-element dataset: each of the 4
  // positions should occur about 1/4 of the time.
  const Sampler s = MakeOrDie(4, {.seed = 123});
  int counts[4] = {0, 0, 0, 0};
  constexpr int kEpochs = 8000;
  for (uint64_t e = 0; e < kEpochs; ++e) {
    const std::vector<int64_t> order = s.EpochOrder(e);
    for (int p = 0; p < 4; ++p) {
      if (order[p] == 0) ++counts[p];
    }
  }
  for (int p = 0; p < 4; ++p) {
    EXPECT_GT(counts[p], kEpochs / 4 - 300) << "position " << p;
    EXPECT_LT(counts[p], kEpochs / 4 + 300) << "position " << p;
  }
}

TEST(SamplerTest, SingleSample) {
  const Sampler s = MakeOrDie(1, {.seed = 9});
  EXPECT_EQ(s.EpochOrder(0), std::vector<int64_t>{0});
  EXPECT_EQ(s.EpochOrder(12345), std::vector<int64_t>{0});
  const Sampler t = MakeOrDie(5, {.shard_rank = 4, .num_shards = 5});
  EXPECT_EQ(t.EpochOrder(3), std::vector<int64_t>{4});
}

void ExpectInvalid(uint64_t size, SamplerOptions options, const std::string& what) {
  Result<Sampler> r = Sampler::Make(size, options);
  ASSERT_FALSE(r.ok()) << what << " was accepted";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << what;
  EXPECT_FALSE(r.status().message().empty());
}

TEST(SamplerTest, Errors) {
  ExpectInvalid(100, {.num_shards = 0}, "zero shards");
  ExpectInvalid(100, {.shard_rank = 0, .num_shards = 0}, "zero shards, rank 0");
  ExpectInvalid(100, {.shard_rank = 4, .num_shards = 4}, "rank == shards");
  ExpectInvalid(100, {.shard_rank = 9, .num_shards = 4}, "rank > shards");
  ExpectInvalid(0, {}, "empty dataset");
  ExpectInvalid(3, {.shard_rank = 3, .num_shards = 4}, "empty shard (3 samples, rank 3 of 4)");
  ExpectInvalid(3, {.shard_rank = 5, .num_shards = 8}, "empty shard (3 samples, rank 5 of 8)");
  // The last non-empty shard is fine.
  EXPECT_TRUE(Sampler::Make(3, {.shard_rank = 2, .num_shards = 4}).ok());
}

TEST(SamplerTest, ErrorMessagesNameTheNumbers) {
  Result<Sampler> r = Sampler::Make(100, {.shard_rank = 6, .num_shards = 4});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find('6'), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find('4'), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace batchcast
