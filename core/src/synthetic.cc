#include "core/src/synthetic.h"

#include <cstring>

namespace batchcast::synthetic {
namespace {
// 251 + a chunk: any run of the formula is a substring of this periodic table.
constexpr size_t kChunk = 4096;
struct Table {
  uint8_t bytes[251 + kChunk];
  Table() {
    for (size_t i = 0; i < sizeof(bytes); ++i) bytes[i] = static_cast<uint8_t>(i % 251);
  }
};
const Table& PeriodicTable() {
  static const Table table;
  return table;
}
}  // namespace

void FillImage(int64_t index, std::span<uint8_t> out) {
  const uint8_t* table = PeriodicTable().bytes;
  uint64_t phase = ImageByte(index, 0);
  for (size_t pos = 0; pos < out.size(); pos += kChunk) {
    const size_t n = std::min(kChunk, out.size() - pos);
    std::memcpy(out.data() + pos, table + (phase + pos) % 251, n);
  }
}

int64_t FirstMismatch(int64_t index, std::span<const uint8_t> image) {
  const uint8_t* table = PeriodicTable().bytes;
  const uint64_t phase = ImageByte(index, 0);
  for (size_t pos = 0; pos < image.size(); pos += kChunk) {
    const size_t n = std::min(kChunk, image.size() - pos);
    if (std::memcmp(image.data() + pos, table + (phase + pos) % 251, n) != 0) {
      for (size_t k = 0; k < n; ++k) {
        if (image[pos + k] != ImageByte(index, pos + k)) return static_cast<int64_t>(pos + k);
      }
    }
  }
  return -1;
}

}  // namespace batchcast::synthetic
