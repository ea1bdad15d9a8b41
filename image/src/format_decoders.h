// The decoders of ImageDecoder (image_decoder.h), one per format, and the
// PNM header parse they share with ReadImageHeader.
//
// Each decodes the whole image whose header `hdr` (ReadImageHeader's, of the
// same bytes) describes into out.pixels: packed rows of hdr.width * *channels
// bytes, 8 bits per sample, *channels 1 (gray) or 3 (RGB), as Note [Image
// formats] (image_format.h) says. DataLoss when the data is corrupt or
// truncated, or says another size than the header.
//
// Thread-safety: pure functions (their buffers are the caller's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/image/image_format.h"

namespace batchcast::image {

// What the decoders write: the pixels, and TIFF's RGBA raster (libtiff's).
struct DecodeBuffers {
  std::vector<uint8_t> pixels;
  std::vector<uint32_t> rgba;
};

Status DecodePng(std::span<const uint8_t> bytes, const ImageHeader& hdr, DecodeBuffers& out,
                 int* channels);
Status DecodeWebp(std::span<const uint8_t> bytes, const ImageHeader& hdr, DecodeBuffers& out,
                  int* channels);
Status DecodeTiff(std::span<const uint8_t> bytes, const ImageHeader& hdr, DecodeBuffers& out,
                  int* channels);
Status DecodeBmp(std::span<const uint8_t> bytes, const ImageHeader& hdr, DecodeBuffers& out,
                 int* channels);
Status DecodePnm(std::span<const uint8_t> bytes, const ImageHeader& hdr, DecodeBuffers& out,
                 int* channels);

// The header of a binary PNM image ("P5"/"P6", then width, height and maxval)
// and where its samples start (*data_offset); maxval in *maxval.
// REQUIRES: bytes start with 'P' and a digit.
Result<ImageHeader> ReadPnmHeader(std::span<const uint8_t> bytes, size_t* data_offset, int* maxval);

}  // namespace batchcast::image
