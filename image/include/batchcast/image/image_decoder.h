// ImageDecoder: decodes a whole image of a format other than JPEG (PNG, WebP,
// BMP, TIFF, PNM: Note [Image formats], image_format.h) to 8-bit gray or RGB,
// reusing its pixel buffers across images.
//
// Bad input never crashes: the header is checked first (ReadImageHeader:
// --max-pixels is applied before any pixel memory is allocated), then the
// format's decoder reports corrupt or truncated data as DataLoss with the
// reason.
//
// Thread-safety: NOT thread-safe; use one per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/image/image_format.h"
#include "batchcast/image/jpeg.h"

namespace batchcast::image {

struct DecodeBuffers;  // image/src/format_decoders.h

class ImageDecoder {
 public:
  ImageDecoder();
  ~ImageDecoder();
  ImageDecoder(const ImageDecoder&) = delete;
  ImageDecoder& operator=(const ImageDecoder&) = delete;
  ImageDecoder(ImageDecoder&&) noexcept;
  ImageDecoder& operator=(ImageDecoder&&) noexcept;

  // Decodes the whole image in `bytes`: RGB, or one channel for a gray image
  // unless gray_as_rgb (then replicated to RGB). The result is a view into
  // the decoder's memory, valid until its next call. Errors: those of
  // ReadImageHeader (max_pixels 0 means kDefaultMaxPixels), DataLoss when the
  // data is corrupt or truncated.
  Result<DecodedImage> Decode(std::span<const uint8_t> bytes, uint64_t max_pixels,
                              bool gray_as_rgb);

 private:
  std::unique_ptr<DecodeBuffers> buffers_;  // the decoders' (created when first needed)
  std::vector<uint8_t> rgb_;                // gray replicated, for gray_as_rgb
};

}  // namespace batchcast::image
