// DecodeWebp (format_decoders.h): libwebp's one-call RGB decode (alpha
// dropped, colours as stored).
#include <webp/decode.h>

#include "format_decoders.h"

namespace batchcast::image {

Status DecodeWebp(std::span<const uint8_t> bytes, const ImageHeader& hdr, DecodeBuffers& buffers,
                  int* channels) {
  std::vector<uint8_t>& out = buffers.pixels;
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(bytes.data(), bytes.size(), &features) != VP8_STATUS_OK) {
    return DataLossError("corrupt WebP: libwebp cannot read its features");
  }
  if (features.has_animation)
    return DataLossError("WebP animation: not a variant batchcast decodes");
  if (features.width != hdr.width || features.height != hdr.height) {
    return DataLossError("corrupt WebP: the image's size differs from its header's");
  }
  const size_t row = static_cast<size_t>(hdr.width) * 3;
  out.resize(row * static_cast<size_t>(hdr.height));
  if (WebPDecodeRGBInto(bytes.data(), bytes.size(), out.data(), out.size(),
                        static_cast<int>(row)) == nullptr) {
    return DataLossError("corrupt or truncated WebP data");
  }
  *channels = 3;
  return Status::Ok();
}

}  // namespace batchcast::image
