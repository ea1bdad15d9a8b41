// DecodeBmp (format_decoders.h): uncompressed BMPs (BI_RGB: 1/4/8-bit
// palette, 16-bit 5-5-5, 24-bit BGR, 32-bit BGRX) and bit-field ones
// (BI_BITFIELDS, BI_ALPHABITFIELDS: 16 or 32 bits, any masks), bottom-up or
// top-down. A masked field of n bits is scaled to 8 as PIL does
// (v * 255 / (2^n - 1), rounded down); a palette index beyond the palette is
// black.
#include <bit>
#include <string>

#include "byte_reader.h"
#include "format_decoders.h"

namespace batchcast::image {
namespace {

// One colour field of a bit-field pixel.
struct Field {
  uint32_t mask = 0;
  int shift = 0;
  uint32_t max = 1;
  explicit Field(uint32_t m) : mask(m) {
    if (m == 0) return;
    shift = std::countr_zero(m);
    max = m >> shift;
  }
  uint8_t operator()(uint32_t pixel) const {
    if (mask == 0) return 0;
    return static_cast<uint8_t>(static_cast<uint64_t>((pixel & mask) >> shift) * 255 / max);
  }
};

}  // namespace

Status DecodeBmp(std::span<const uint8_t> b, const ImageHeader& hdr, DecodeBuffers& buffers,
                 int* channels) {
  std::vector<uint8_t>& out = buffers.pixels;
  const uint64_t info_size = ReadLe32(b, 14);
  const bool core = info_size == 12;  // OS/2: 3-byte palette entries
  const uint64_t data = ReadLe32(b, 10);
  const bool top_down = !core && static_cast<int32_t>(ReadLe32(b, 22)) < 0;
  const int bpp = hdr.bit_depth;
  const uint32_t compression = core ? 0 : ReadLe32(b, 30);
  const uint64_t w = static_cast<uint64_t>(hdr.width), h = static_cast<uint64_t>(hdr.height);
  const uint64_t stride = (w * bpp + 31) / 32 * 4;
  if (data < 14 + info_size || data > b.size() || (b.size() - data) / stride < h) {
    return DataLossError("truncated BMP: " + std::to_string(b.size()) +
                         " bytes hold less than its " + std::to_string(h) + " rows of " +
                         std::to_string(stride) + " bytes");
  }
  // The palette (BGR0 entries; BGR for OS/2), for 1/4/8 bits per pixel.
  uint8_t palette[256][3] = {};
  if (bpp <= 8) {
    const size_t entry = core ? 3 : 4;
    const uint64_t at = 14 + info_size;
    uint64_t count = core ? 0 : ReadLe32(b, 46);
    if (count == 0 || count > (1u << bpp)) count = 1u << bpp;
    count = std::min<uint64_t>(count, (data - std::min<uint64_t>(data, at)) / entry);
    for (size_t k = 0; k < count; ++k) {
      palette[k][0] = b[at + entry * k + 2];
      palette[k][1] = b[at + entry * k + 1];
      palette[k][2] = b[at + entry * k];
    }
  }
  // The fields of 16- and 32-bit pixels: the masks after a 40-byte header (or
  // inside a larger one at the same place), else BI_RGB's.
  Field r(0x7c00), g(0x03e0), bl(0x001f);
  if (bpp == 32) r = Field(0xff0000), g = Field(0xff00), bl = Field(0xff);
  if (compression != 0) {
    if (b.size() < 14 + 40 + 12) return DataLossError("truncated BMP: no bit-field masks");
    r = Field(ReadLe32(b, 54)), g = Field(ReadLe32(b, 58)), bl = Field(ReadLe32(b, 62));
  }
  out.resize(w * h * 3);
  for (uint64_t y = 0; y < h; ++y) {
    const uint8_t* src = b.data() + data + stride * (top_down ? y : h - 1 - y);
    uint8_t* dst = out.data() + w * 3 * y;
    for (uint64_t x = 0; x < w; ++x, dst += 3) {
      if (bpp <= 8) {
        const uint64_t bit = x * bpp;
        const int index = (src[bit / 8] >> (8 - bpp - bit % 8)) & ((1 << bpp) - 1);
        dst[0] = palette[index][0], dst[1] = palette[index][1], dst[2] = palette[index][2];
      } else if (bpp == 24) {
        dst[0] = src[3 * x + 2], dst[1] = src[3 * x + 1], dst[2] = src[3 * x];
      } else {
        const uint32_t p =
            bpp == 16 ? ReadLe16(b, src - b.data() + 2 * x) : ReadLe32(b, src - b.data() + 4 * x);
        dst[0] = r(p), dst[1] = g(p), dst[2] = bl(p);
      }
    }
  }
  *channels = 3;
  return Status::Ok();
}

}  // namespace batchcast::image
