// Image formats: which one a file holds, told from its bytes (the magic
// numbers at its start, never the file name: a PNG named .JPEG is a PNG), and
// the size of an image read from its header alone, without decoding it.
//
// Note [Image formats]
// JPEG files take the fast paths (libjpeg-turbo's DCT-scaled crop decode on
// the CPU, nvJPEG on the GPU; jpeg.h). The other formats a dataset commonly
// holds are decoded whole on the CPU (ImageDecoder, image_decoder.h) with
// their own libraries, then cropped, resized and normalized like a JPEG
// decoded at DCT scale 1 (pipeline.h); on the GPU path they go to the CPU
// fallback decoder and then the same augmentation kernel:
//   PNG   libpng: 1/2/4/8/16-bit gray, gray + alpha, RGB, RGBA, palette,
//         interlaced
//   WebP  libwebp: lossy and lossless, with or without alpha (still images;
//         an animated WebP is refused at its header)
//   TIFF  libtiff's RGBA interface: every layout it reads (8/16-bit, gray,
//         palette, RGB, YCbCr, planar, compressed)
//   BMP   read here: 1/4/8-bit palette, 16/24/32-bit, uncompressed or
//         bit fields; top-down or bottom-up
//   PNM   read here: binary PGM (P5) and PPM (P6), 8 or 16 bit
// Every decode gives 8-bit pixels as PIL's Image.convert("RGB") does:
// 16-bit samples keep their high byte, gray is replicated to RGB, palettes
// are expanded, alpha is dropped (not composited: the colour channels as
// stored; PIL does the same). One exception: a TIFF with unassociated alpha
// comes out premultiplied by its alpha (libtiff's RGBA interface).
// GIF, JPEG 2000, OpenEXR, HEIF and the rest are recognized or not but never
// decoded: such a file follows the bad-file policy.
//
// The scan of a dataset reads each file's first 256 KiB and gets the size
// from the header (ReadImageHeader), so --max-pixels is applied to every
// format before any decode, and the crop plan of a sample (PlanCrop with the
// image's full size) is the same whatever the format. A header that cannot be
// parsed means the file is unusable at the scan (never decoded to find out):
// a decoder would have to run before --max-pixels could be applied. A TIFF
// whose first directory (IFD) lies beyond the bytes read is read whole.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast::image {

enum class ImageFormat : uint8_t { kJpeg, kPng, kWebp, kBmp, kTiff, kPnm, kGif, kUnknown };

// The formats batchcast decodes, in the order of their counters (stats:
// files_jpeg, files_png, ...).
inline constexpr ImageFormat kDecodedFormats[] = {ImageFormat::kJpeg, ImageFormat::kPng,
                                                  ImageFormat::kWebp, ImageFormat::kBmp,
                                                  ImageFormat::kTiff, ImageFormat::kPnm};

// "jpeg", "png", "webp", "bmp", "tiff", "pnm", "gif", "unknown" (counter names).
std::string_view ImageFormatName(ImageFormat format);
// "JPEG", "PNG", "WebP", "BMP", "TIFF", "PNM", "GIF", "unknown" (messages).
std::string_view ImageFormatTitle(ImageFormat format);

// The format whose signature `bytes` start with; kUnknown when none matches
// (too short, random bytes, another format).
ImageFormat SniffImageFormat(std::span<const uint8_t> bytes);

// What the header of a non-JPEG image says.
struct ImageHeader {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0;
  int height = 0;
  int channels = 0;   // samples per pixel in the file (palette: 3), alpha included
  int bit_depth = 0;  // bits per sample (palette images: bits per index)
};

// Parses the header of a PNG, WebP, BMP, TIFF or PNM image in `bytes` (the
// file's first bytes; what the header needs). Errors: DataLoss for a JPEG
// (use ReadJpegInfo), another format ("a GIF image: not a format batchcast
// decodes"), unknown data, a corrupt or truncated header, or a variant the
// decoder refuses (an animated WebP, a compressed BMP, an ASCII PNM);
// OutOfRange for a TIFF whose first directory lies beyond `bytes` (read
// more); ResourceExhausted when width * height > max_pixels (0 means
// kDefaultMaxPixels).
Result<ImageHeader> ReadImageHeader(std::span<const uint8_t> bytes, uint64_t max_pixels = 0);

}  // namespace batchcast::image
