// The sampler's order for grouped datasets (tar shards; core/src/sampler.h):
// exactly once per epoch over several epochs and seeds, deterministic in
// (seed, epoch), different across epochs, groups split across servers by
// group, a bounded shuffle buffer (every sample is emitted at most
// shuffle_buffer input positions after its group's sequential read reached
// it, and never before), and the plain orders without shuffle or buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "core/src/sampler.h"

namespace batchcast {
namespace {

Sampler Make(std::vector<uint64_t> groups, uint64_t k, uint64_t seed = 1, bool shuffle = true,
             uint32_t rank = 0, uint32_t shards = 1) {
  const uint64_t n = std::accumulate(groups.begin(), groups.end(), uint64_t{0});
  auto s = Sampler::Make(n, SamplerOptions{seed, shuffle, rank, shards, std::move(groups), k});
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

// The group of each index, for groups of the given sizes.
std::vector<size_t> GroupOf(const std::vector<uint64_t>& groups) {
  std::vector<size_t> out;
  for (size_t g = 0; g < groups.size(); ++g) out.insert(out.end(), groups[g], g);
  return out;
}

TEST(GroupedSampler, ExactlyOncePerEpochOverEpochsAndSeeds) {
  const std::vector<uint64_t> groups = {10, 7, 0, 13, 1, 9};
  for (uint64_t seed : {0, 1, 42}) {
    for (uint64_t k : {0, 1, 5, 16, 1000}) {
      Sampler s = Make(groups, k, seed);
      EXPECT_EQ(s.epoch_len(), 40u);
      for (uint64_t e = 0; e < 4; ++e) {
        std::vector<int64_t> order = s.EpochOrder(e);
        EXPECT_EQ(order, s.EpochOrder(e)) << "deterministic";
        std::sort(order.begin(), order.end());
        std::vector<int64_t> all(40);
        std::iota(all.begin(), all.end(), 0);
        EXPECT_EQ(order, all) << "seed " << seed << " k " << k << " epoch " << e;
      }
      EXPECT_NE(s.EpochOrder(0), s.EpochOrder(1));
    }
  }
  EXPECT_NE(Make(groups, 5, 1).EpochOrder(0), Make(groups, 5, 2).EpochOrder(0));
}

// Replays the sequential reads (GroupOrder, each group front to back): a
// sample is emitted only after it was read, and the samples read but not yet
// emitted never exceed k (what bounds the shard reader's memory).
TEST(GroupedSampler, TheShuffleBufferIsBounded) {
  const std::vector<uint64_t> groups = {30, 25, 40, 5, 33};
  for (uint64_t k : {2, 8, 32}) {
    Sampler s = Make(groups, k, 7);
    for (uint64_t e = 0; e < 3; ++e) {
      const std::vector<int64_t> order = s.EpochOrder(e);
      std::vector<int64_t> input;
      for (uint64_t g : s.GroupOrder(e)) {
        const int64_t first = std::accumulate(groups.begin(), groups.begin() + g, int64_t{0});
        for (uint64_t j = 0; j < groups[g]; ++j) input.push_back(first + int64_t(j));
      }
      ASSERT_EQ(input.size(), order.size());
      std::map<int64_t, size_t> input_pos;
      for (size_t p = 0; p < input.size(); ++p) input_pos[input[p]] = p;
      size_t read = 0;  // input samples read so far
      size_t max_held = 0;
      for (size_t p = 0; p < order.size(); ++p) {
        read = std::max(read, input_pos[order[p]] + 1);
        max_held = std::max(max_held, read - (p + 1));
      }
      EXPECT_LE(max_held, k) << "k " << k << " epoch " << e;
      EXPECT_GE(max_held, k / 2) << "the buffer is used";
    }
  }
}

TEST(GroupedSampler, NoShuffleKeepsTheDatasetOrder) {
  Sampler s = Make({3, 2}, 100, 5, /*shuffle=*/false);
  EXPECT_EQ(s.EpochOrder(3), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // k <= 1: whole groups in a seeded order, each in order.
  Sampler g = Make({3, 2}, 1, 5);
  const auto o = g.EpochOrder(0);
  EXPECT_TRUE(o == (std::vector<int64_t>{0, 1, 2, 3, 4}) ||
              o == (std::vector<int64_t>{3, 4, 0, 1, 2}));
}

TEST(GroupedSampler, ServersSplitWholeGroups) {
  const std::vector<uint64_t> groups = {4, 5, 6, 7, 8};
  const std::vector<size_t> group_of = GroupOf(groups);
  std::set<int64_t> seen;
  for (uint32_t r = 0; r < 2; ++r) {
    Sampler s = Make(groups, 3, 1, true, r, 2);
    EXPECT_EQ(s.epoch_len(), r == 0 ? 18u : 12u);
    for (int64_t i : s.EpochOrder(0)) {
      EXPECT_EQ(group_of[size_t(i)] % 2, r);
      EXPECT_TRUE(seen.insert(i).second);
    }
  }
  EXPECT_EQ(seen.size(), 30u);
  auto empty = Sampler::Make(4, SamplerOptions{0, true, 1, 2, {4}, 0});
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("tar shards"), std::string::npos);
  EXPECT_EQ(Sampler::Make(5, SamplerOptions{0, true, 0, 1, {4}, 0}).status().code(),
            StatusCode::kInternal);
}

}  // namespace
}  // namespace batchcast
