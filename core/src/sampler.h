// Sampler: the order in which the producer visits a dataset.
//
// The dataset is first sharded statically: shard r of S holds the indices i
// with i % S == r (so shards differ in size by at most one). Producer epoch e
// is a permutation of the shard seeded by (seed, e) with a portable generator
// (SplitMix64 + Fisher-Yates with rejection sampling), so the order is the
// same on every machine and build. shuffle=false keeps the shard's order.
//
// Thread-safety: immutable after construction; EpochOrder is a pure function.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "batchcast/core/status.h"

namespace batchcast {

struct SamplerOptions {
  uint64_t seed = 0;
  bool shuffle = true;
  uint32_t shard_rank = 0;
  uint32_t num_shards = 1;
  // Grouped datasets (see above): samples per group; empty: not grouped.
  // REQUIRES: the sizes add up to the dataset size.
  std::vector<uint64_t> groups;
  uint64_t shuffle_buffer = 0;
};

class Sampler {
 public:
  // InvalidArgument when num_shards == 0, shard_rank >= num_shards, or the
  // shard is empty.
  static Result<Sampler> Make(uint64_t dataset_size, SamplerOptions options);

  // Samples per producer epoch (the shard size).
  uint64_t epoch_len() const { return epoch_len_; }
  // The dataset indices of producer epoch `epoch`, in order.
  std::vector<int64_t> EpochOrder(uint64_t epoch) const;
  // Grouped datasets: this shard's groups in the order epoch `epoch` reads
  // them (the input of its shuffle buffer). Empty when not grouped.
  std::vector<uint64_t> GroupOrder(uint64_t epoch) const;

 private:
  Sampler(SamplerOptions options, uint64_t epoch_len)
      : options_(std::move(options)), epoch_len_(epoch_len) {}
  std::vector<int64_t> GroupedEpochOrder(uint64_t epoch) const;
  SamplerOptions options_;
  uint64_t epoch_len_;
};

// SplitMix64 step: the project's one seed mixer (sampler, crop parameters).
uint64_t SplitMix64(uint64_t& state);
// Mixes several words into one seed.
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0);

}  // namespace batchcast
