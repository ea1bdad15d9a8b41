// Little- and big-endian integers at a byte offset of a buffer, for the
// header parsers (image_format.cc) and the BMP and PNM decoders.
//
// REQUIRES (every function): the bytes read lie inside `b`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace batchcast::image {

inline uint16_t ReadLe16(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint16_t>(b[at] | b[at + 1] << 8);
}
inline uint32_t ReadLe24(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint32_t>(b[at] | b[at + 1] << 8 | b[at + 2] << 16);
}
inline uint32_t ReadLe32(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint32_t>(b[at]) | static_cast<uint32_t>(b[at + 1]) << 8 |
         static_cast<uint32_t>(b[at + 2]) << 16 | static_cast<uint32_t>(b[at + 3]) << 24;
}
inline uint16_t ReadBe16(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint16_t>(b[at] << 8 | b[at + 1]);
}
inline uint32_t ReadBe32(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint32_t>(b[at]) << 24 | static_cast<uint32_t>(b[at + 1]) << 16 |
         static_cast<uint32_t>(b[at + 2]) << 8 | static_cast<uint32_t>(b[at + 3]);
}

}  // namespace batchcast::image
