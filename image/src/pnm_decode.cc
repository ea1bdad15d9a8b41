// DecodePnm (format_decoders.h): binary PGM (P5, gray) and PPM (P6, RGB),
// 8-bit (maxval < 256, scaled to 0..255 with rounding) or 16-bit big-endian
// (scaled to 0..65535, then the high byte).
#include <string>

#include "format_decoders.h"

namespace batchcast::image {

Status DecodePnm(std::span<const uint8_t> b, const ImageHeader& hdr, DecodeBuffers& buffers,
                 int* channels) {
  std::vector<uint8_t>& out = buffers.pixels;
  size_t at = 0;
  int maxval = 0;
  BATCHCAST_RETURN_IF_ERROR(ReadPnmHeader(b, &at, &maxval).status());
  const uint64_t samples = static_cast<uint64_t>(hdr.width) * hdr.height * hdr.channels;
  const uint64_t bytes = samples * (maxval < 256 ? 1 : 2);
  if (at > b.size() || b.size() - at < bytes) {
    return DataLossError("truncated PNM: " + std::to_string(b.size() - std::min(at, b.size())) +
                         " bytes of samples, " + std::to_string(bytes) + " needed");
  }
  out.resize(samples);
  const uint8_t* src = b.data() + at;
  const uint32_t m = static_cast<uint32_t>(maxval);
  for (uint64_t i = 0; i < samples; ++i) {
    if (maxval < 256) {
      out[i] = static_cast<uint8_t>(std::min<uint32_t>(255, (src[i] * 255u + m / 2) / m));
    } else {
      const uint32_t v =
          std::min<uint32_t>(m, static_cast<uint32_t>(src[2 * i]) << 8 | src[2 * i + 1]);
      out[i] = static_cast<uint8_t>((v * 65535u / m) >> 8);
    }
  }
  *channels = hdr.channels;
  return Status::Ok();
}

}  // namespace batchcast::image
