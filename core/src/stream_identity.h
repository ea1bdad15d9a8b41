// StreamIdentity: what makes two servers' streams the same stream, so that a
// consumer's saved place in one is the same place in the other (Note
// [Resume], server/src/scheduler.h): every component that shapes a sample or
// the order (the dataset's listing, shard, seed, shuffle, transform, fields,
// normalization, ...), as named text values.
//
// Its text form, "key=value;key=value;...", travels in WELCOME and in a
// consumer's saved position; Compare() names each component that differs.
//
// Thread-safety: a value type.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "batchcast/core/status.h"

namespace batchcast {

class StreamIdentity {
 public:
  // Adds a component. REQUIRES: `key` is new, non-empty and holds neither ';'
  // nor '='; `value` holds no ';'.
  void Add(std::string_view key, std::string value);
  std::string ToString() const;
  // InvalidArgument for text that is not of the form above.
  static Result<StreamIdentity> Parse(std::string_view text);
  // OK when `saved` (a ToString()) names this stream; else InvalidArgument
  // listing every component that differs with both values ("seed: saved 1,
  // here 0"), or saying that `saved` is no identity at all.
  Status CheckSaved(std::string_view saved) const;

  const std::vector<std::pair<std::string, std::string>>& components() const { return components_; }

 private:
  std::vector<std::pair<std::string, std::string>> components_;
};

// FNV-1a, 64 bits, continuing from `h`: the digests of identities and of
// saved positions (not for security: a check against corruption and mix-ups).
uint64_t Fnv1a64(std::string_view bytes, uint64_t h = 0xCBF29CE484222325ull);
// 16 lower-case hex digits.
std::string Hex64(uint64_t v);

}  // namespace batchcast
