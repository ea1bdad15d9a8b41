#include "core/src/sampler.h"

#include <numeric>

namespace batchcast {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t state = a;
  uint64_t h = SplitMix64(state);
  state = h ^ b;
  h = SplitMix64(state);
  state = h ^ c;
  return SplitMix64(state);
}

namespace {
// Uniform integer in [0, bound) without modulo bias (Lemire's method would need
// 128-bit products; plain rejection is portable and cheap enough here).
uint64_t UniformBelow(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do {
    x = SplitMix64(state);
  } while (x >= limit);
  return x % bound;
}
}  // namespace

Result<Sampler> Sampler::Make(uint64_t dataset_size, SamplerOptions options) {
  if (options.num_shards == 0) return InvalidArgumentError("num_shards must be at least 1");
  if (options.shard_rank >= options.num_shards) {
    return InvalidArgumentError("shard_rank " + std::to_string(options.shard_rank) +
                                " must be below num_shards " + std::to_string(options.num_shards));
  }
  const uint64_t len = dataset_size / options.num_shards +
                       (options.shard_rank < dataset_size % options.num_shards ? 1 : 0);
  if (len == 0) {
    return InvalidArgumentError("shard " + std::to_string(options.shard_rank) + " of " +
                                std::to_string(options.num_shards) + " of a dataset of " +
                                std::to_string(dataset_size) + " samples is empty");
  }
  return Sampler(dataset_size, options, len);
}

std::vector<int64_t> Sampler::EpochOrder(uint64_t epoch) const {
  std::vector<int64_t> order(epoch_len_);
  for (uint64_t k = 0; k < epoch_len_; ++k) {
    order[k] = static_cast<int64_t>(options_.shard_rank + k * options_.num_shards);
  }
  if (options_.shuffle) {
    uint64_t state = MixSeed(options_.seed, epoch, 0x5A3D1E);
    for (uint64_t i = epoch_len_ - 1; i > 0; --i) {
      std::swap(order[i], order[UniformBelow(state, i + 1)]);
    }
  }
  return order;
}

}  // namespace batchcast
