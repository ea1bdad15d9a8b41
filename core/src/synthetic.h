// The deterministic synthetic dataset: every delivered byte can be checked.
//
// Sample i has field `image`, uint8 [3,S,S], whose byte p (row-major over C,H,W)
// is (i * 2654435761 + p) mod 251, and field `label`, int64, equal to i mod 1000.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace batchcast::synthetic {

inline uint8_t ImageByte(int64_t index, uint64_t p) {
  const uint64_t base = (static_cast<uint64_t>(index) * 2654435761ull) % 251;
  return static_cast<uint8_t>((base + p % 251) % 251);
}
inline int64_t Label(int64_t index) { return index % 1000; }

// Writes the image of sample `index` into `out` (out.size() = 3*S*S).
void FillImage(int64_t index, std::span<uint8_t> out);
// Returns the first byte offset p at which `image` differs from the formula, or -1.
int64_t FirstMismatch(int64_t index, std::span<const uint8_t> image);

}  // namespace batchcast::synthetic
