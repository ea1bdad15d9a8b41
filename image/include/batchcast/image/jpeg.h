// JPEG header parsing and (region, DCT-scaled) decoding with libjpeg-turbo.
//
// ReadJpegInfo() parses only the header. JpegDecoder decodes a rectangle of a
// JPEG, optionally at DCT scale 1/2, 1/4 or 1/8 (libjpeg's scaled IDCT: a good,
// cheap low-pass downscale), touching as little of the image as libjpeg allows:
// columns outside the rectangle are not inverse-transformed or colour-converted
// (jpeg_crop_scanline), rows above it are only entropy-decoded
// (jpeg_skip_scanlines), and rows below it are not decoded at all.
//
// Colour: YCbCr and RGB JPEGs decode to RGB; grayscale to one channel (or to
// RGB on request); CMYK and YCCK (Adobe) JPEGs decode to RGB with Pillow's
// conventions, so outputs match `Image.open(f).convert("RGB")` exactly for
// those pixels: the stored channels are taken as inverted CMYK (the Adobe /
// Photoshop convention, which Pillow assumes for every 4-channel JPEG) and
// R = (255 - C) * (255 - K) / 255 (rounded like Pillow's MULDIV255), likewise
// G from M and B from Y.
//
// Bad input never crashes and never aborts the process: libjpeg's error_exit
// longjmps back into the decoder, which then returns DataLoss with the reason
// (empty input, PNG signature, "Not a JPEG file: starts with 0x.. 0x..", a
// libjpeg error message, ...). These libjpeg warnings are errors too, because
// they mean the pixels are not what the file's author encoded:
//   "Premature end of JPEG file", "Corrupt JPEG data: premature end of data
//   segment", "Corrupt JPEG data: bad Huffman code" (and the arithmetic-coding
//   one), "must resync", "bogus progression" and "not sequential".
// Benign warnings (extraneous bytes before a marker, unknown JFIF revision,
// unknown Adobe transform, bogus ICC data) are ignored.
// A decode must see the JPEG's EOI marker after the scan data, so a truncated
// file is an error whatever rectangle is asked for (the decoder checks the
// unread tail for EOI when it stops before the last row). Corrupt entropy data
// below a rectangle that ends early is not looked at and so not reported.
//
// Images with width * height > max_pixels give ResourceExhausted after the
// header is parsed and before any pixel memory is allocated.
//
// Thread-safety: ReadJpegInfo is thread-safe. A JpegDecoder is NOT: use one per
// thread. Distinct decoders are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "batchcast/core/status.h"

namespace batchcast::image {

// Default bound on width * height: Pillow's decompression-bomb error threshold
// (2 * Image.MAX_IMAGE_PIXELS = 178,956,970, about 13,377 x 13,377).
inline constexpr uint64_t kDefaultMaxPixels = 178'956'970;

struct JpegInfo {
  enum class ColorSpace { kGray, kYCbCr, kRGB, kCMYK, kYCCK, kUnknown };
  int width = 0;
  int height = 0;
  int components = 0;        // components in the file: 1, 3 or 4
  bool progressive = false;  // progressive (multi-scan) coding
  ColorSpace color = ColorSpace::kUnknown;
  // YCbCr with chroma halved both ways (4:2:0: Y sampled 2x2, Cb and Cr 1x1),
  // the only layout nvJPEG's NV12 output takes.
  bool yuv420 = false;
};

// "gray", "ycbcr", "rgb", "cmyk", "ycck", "unknown".
std::string_view ColorSpaceName(JpegInfo::ColorSpace color);

// Parses the JPEG header in `bytes`. DataLoss for empty input, non-JPEG data
// (the message names PNG, GIF, ... when it recognizes the signature), a
// corrupt/truncated header or a colour space that cannot be decoded to RGB
// (so color is never kUnknown on success); ResourceExhausted when
// width * height > max_pixels (0 means kDefaultMaxPixels). What it accepts,
// JpegDecoder decodes unless the entropy-coded data is corrupt or truncated.
Result<JpegInfo> ReadJpegInfo(std::span<const uint8_t> bytes,
                              uint64_t max_pixels = kDefaultMaxPixels);

// Size of one image dimension after DCT scaling by 1/scale_denom, as libjpeg
// computes it: ceil(dim / scale_denom).
// REQUIRES: dim >= 0 and scale_denom in {1, 2, 4, 8}.
int ScaledDimension(int dim, int scale_denom);

// An axis-aligned pixel rectangle [x, x + w) x [y, y + h).
struct PixelRect {
  int x = 0;
  int y = 0;
  int w = 0;
  int h = 0;
};

// A decoded rectangle: interleaved 8-bit pixels, `channels` 1 (gray) or 3 (RGB).
// A view into the decoder's memory, valid until the next call on the decoder.
struct DecodedImage {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 0;
  size_t stride = 0;  // bytes from one row to the next
};

// Decodes JPEGs, reusing its libjpeg state and pixel buffers across images (no
// per-image allocation once the buffers have grown to the largest rectangle).
//
// Use: ReadHeader(bytes) and then at most one Decode(...) for that header; the
// bytes must stay alive and unchanged until Decode returns. Any call may follow
// a failed one.
class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;
  // A moved-from decoder may only be destroyed or assigned to.
  JpegDecoder(JpegDecoder&&) noexcept;
  JpegDecoder& operator=(JpegDecoder&&) noexcept;

  // Parses the header of `bytes` (errors as ReadJpegInfo; max_pixels 0 means
  // kDefaultMaxPixels) and prepares a Decode of it.
  Result<JpegInfo> ReadHeader(std::span<const uint8_t> bytes, uint64_t max_pixels);

  // Decodes `rect`, given in the coordinates of the image scaled by
  // 1/scale_denom (ScaledDimension of the width and height), of the image whose
  // header the last ReadHeader parsed. Grayscale images come out with one
  // channel unless gray_as_rgb. DataLoss when the data is corrupt or truncated.
  // REQUIRES: the last call was a successful ReadHeader; scale_denom in
  // {1, 2, 4, 8}; rect non-empty and inside the scaled image.
  Result<DecodedImage> Decode(int scale_denom, PixelRect rect, bool gray_as_rgb);

  // ReadHeader + Decode of the whole image at full size as RGB.
  Result<DecodedImage> DecodeRgb(std::span<const uint8_t> bytes, uint64_t max_pixels);

  struct Impl;  // libjpeg state; public only for the implementation's helpers

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace batchcast::image
