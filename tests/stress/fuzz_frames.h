// FrameFuzzer: the frames a hostile peer sends (bc_fuzz_peer, and the
// decoder test in stress_test): random bytes; well-formed client messages
// (HELLO, NEXT, RELEASE, BYE, HEARTBEAT, STATS) whose fields take random and
// absurd values (names that are not UTF-8 or hold newlines, 4 KiB names, batch
// size 0 or 2^32-1, prefetch 0, forged lease ids, ...); messages only a server
// sends; and truncations and mutations of encoded valid messages (bit flips,
// count fields set to huge values, insertions, deletions, splices, another
// version or type in the header). Deterministic for a seed.
//
// Thread-safety: none (one per thread).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/src/protocol.h"

namespace batchcast::stress {

class FrameFuzzer {
 public:
  enum class Kind { kRandom, kValid, kServerOnly, kTruncated, kMutated, kCount };
  static std::string_view KindName(Kind kind);

  explicit FrameFuzzer(uint64_t seed) : rng_(seed) {}

  // A frame of a random kind (stored in *kind when given).
  std::string Any(Kind* kind = nullptr);
  std::string Random(size_t max_len = 512);
  // A client message, well formed, with random (often absurd) field values.
  proto::Message ValidMessage();
  std::string Valid() { return proto::Encode(ValidMessage()); }
  std::string ServerOnly();
  std::string Truncated();
  std::string Mutated();
  // Applies 1-3 random mutations to `frame`.
  std::string Mutate(std::string frame);

  proto::Hello Hello();
  // Lease ids a peer may not own: small ones (other consumers' ids start at
  // 1 too), huge ones, duplicates.
  std::vector<uint64_t> LeaseIds();
  std::string Name();

  // A uniform integer in [lo, hi].
  uint64_t U(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool OneIn(uint64_t n) { return U(0, n - 1) == 0; }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

}  // namespace batchcast::stress
