// Lossless re-encoding of a JPEG as baseline (jpegtran-style), so that a
// decoder that takes only baseline files (the nvJPEG hardware engine refuses
// progressive ones) can decode it.
//
// TranscodeToBaseline reads the input's quantized DCT coefficients
// (jpeg_read_coefficients) and writes them again with the same quantization
// tables, sampling factors and colour space, as one sequential Huffman-coded
// scan (SOF0, one interleaved scan) with libjpeg's standard Huffman tables
// (not optimized: the output is about 5% larger than the progressive input,
// and a third cheaper to make). Only the entropy coding changes, so decoding
// the result gives exactly the pixels of decoding the input with the same
// decoder (same IDCT and upsampling). No marker is copied except a JFIF APP0 header (with the
// input's density when it had one): EXIF, ICC profiles, comments, ... are
// dropped (batchcast does not use them).
//
// What it takes: 8-bit grayscale (1 component) or YCbCr (3 components) JPEGs,
// baseline, extended or progressive, Huffman or arithmetic coded, whose
// quantization tables fit baseline (all values <= 255, true for quality >= 25
// or so with the standard tables). Anything else is refused cheaply (from the
// header), without decoding the coefficients.
//
// Errors (none crashes or aborts; libjpeg's errors longjmp back):
//   InvalidArgument: not a JPEG (empty, PNG, ...: the message says what), or a
//     JPEG that is not transcoded: "... not transcoded: 4 components", other
//     colour spaces (RGB, ...), data precision other than 8, quantization
//     values over 255.
//   ResourceExhausted: width * height > max_pixels (0 means kDefaultMaxPixels),
//     found from the header, before the coefficients are allocated.
//   DataLoss: a corrupt or truncated JPEG (header or entropy-coded data; the
//     same libjpeg warnings as JpegDecoder's count as errors).
//
// Cost: one entropy decode plus one entropy encode, no IDCT and no colour
// conversion; for progressive files about as much CPU as decoding them (whose
// cost is mostly the progressive entropy decode): `cpu_pipeline_cost
// --progressive` measures both (docs/performance.md, "The GPU server").
// Memory: the whole coefficient image (2 bytes per sample) plus the output.
//
// Thread-safety: a pure function; each call has its own libjpeg objects, so
// calls on several threads at once are independent.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/image/jpeg.h"

namespace batchcast::image {

// Returns the baseline JPEG with the coefficients of `jpeg` (see above).
Result<std::vector<uint8_t>> TranscodeToBaseline(std::span<const uint8_t> jpeg,
                                                 uint64_t max_pixels = kDefaultMaxPixels);

}  // namespace batchcast::image
