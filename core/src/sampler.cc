#include "core/src/sampler.h"

#include <algorithm>
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
  // An epoch's order is materialized (8 bytes a sample): refuse sizes no
  // machine could hold at start, not when the producer first needs them.
  constexpr uint64_t kMaxSamples = uint64_t{1} << 32;
  if (dataset_size > kMaxSamples) {
    return InvalidArgumentError("a dataset of " + std::to_string(dataset_size) +
                                " samples is too large: at most " + std::to_string(kMaxSamples));
  }
  uint64_t len = dataset_size / options.num_shards +
                 (options.shard_rank < dataset_size % options.num_shards ? 1 : 0);
  if (!options.groups.empty()) {
    uint64_t total = 0;
    len = 0;
    for (size_t g = 0; g < options.groups.size(); ++g) {
      total += options.groups[g];
      if (g % options.num_shards == options.shard_rank) len += options.groups[g];
    }
    if (total != dataset_size) {
      return InternalError("sample groups hold " + std::to_string(total) + " samples, not " +
                           std::to_string(dataset_size));
    }
    if (len == 0) {
      return InvalidArgumentError("shard " + std::to_string(options.shard_rank) + " of " +
                                  std::to_string(options.num_shards) + " of a dataset of " +
                                  std::to_string(options.groups.size()) +
                                  " tar shards holds no samples (the shards are split by file: "
                                  "shard file g goes to rank g % num_shards)");
    }
  }
  if (len == 0) {
    return InvalidArgumentError("shard " + std::to_string(options.shard_rank) + " of " +
                                std::to_string(options.num_shards) + " of a dataset of " +
                                std::to_string(dataset_size) + " samples is empty");
  }
  return Sampler(std::move(options), len);
}

std::vector<uint64_t> Sampler::GroupOrder(uint64_t epoch) const {
  std::vector<uint64_t> mine;  // this shard's groups
  for (uint64_t g = options_.shard_rank; g < options_.groups.size(); g += options_.num_shards) {
    mine.push_back(g);
  }
  if (options_.shuffle) {
    uint64_t state = MixSeed(options_.seed, epoch, 0x6A7B01);
    for (uint64_t i = mine.size(); i > 1; --i) {
      std::swap(mine[i - 1], mine[UniformBelow(state, i)]);
    }
  }
  return mine;
}

std::vector<int64_t> Sampler::GroupedEpochOrder(uint64_t epoch) const {
  std::vector<uint64_t> first(options_.groups.size());  // first index of each group
  for (uint64_t g = 0, at = 0; g < options_.groups.size(); at += options_.groups[g], ++g) {
    first[g] = at;
  }
  const std::vector<uint64_t> mine = GroupOrder(epoch);
  uint64_t state = MixSeed(options_.seed, epoch, 0x5B0FF3);
  const uint64_t k = options_.shuffle ? options_.shuffle_buffer : 0;
  std::vector<int64_t> order;
  order.reserve(epoch_len_);
  std::vector<int64_t> buffer;
  buffer.reserve(static_cast<size_t>(std::min<uint64_t>(k, epoch_len_)));
  for (uint64_t g : mine) {
    for (uint64_t i = 0; i < options_.groups[g]; ++i) {
      const int64_t index = static_cast<int64_t>(first[g] + i);
      if (k <= 1) {
        order.push_back(index);
      } else if (buffer.size() < k) {
        buffer.push_back(index);
      } else {
        int64_t& slot = buffer[UniformBelow(state, k)];
        order.push_back(slot);
        slot = index;
      }
    }
  }
  for (uint64_t i = buffer.size(); i > 1; --i) {
    std::swap(buffer[i - 1], buffer[UniformBelow(state, i)]);
  }
  order.insert(order.end(), buffer.begin(), buffer.end());
  return order;
}

std::vector<int64_t> Sampler::EpochOrder(uint64_t epoch) const {
  if (!options_.groups.empty()) return GroupedEpochOrder(epoch);
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
