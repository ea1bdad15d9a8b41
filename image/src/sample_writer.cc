#include "sample_writer.h"

#include <cstring>

#include "batchcast/core/check.h"
#include "batchcast/image/half.h"

namespace batchcast::image {
namespace {

// One pass over the source rows (all channels of a pixel at once), each byte
// mapped through its channel's table. Output column x reads source pixel x
// (flip: size - 1 - x).
template <typename T, int kSrcC, bool kNchw>
void WriteRows(const uint8_t* src, size_t stride, int size, bool flip, const T* lut, T* out) {
  const T* t0 = lut;
  const T* t1 = lut + 256;
  const T* t2 = lut + 512;
  constexpr int k1 = kSrcC == 1 ? 0 : 1;
  constexpr int k2 = kSrcC == 1 ? 0 : 2;
  const size_t plane = static_cast<size_t>(size) * size;
  const ptrdiff_t step = flip ? -kSrcC : kSrcC;
  for (int y = 0; y < size; ++y) {
    const uint8_t* row = src + stride * y + (flip ? (size - 1) * kSrcC : 0);
    const size_t first = static_cast<size_t>(y) * size;
    for (int x = 0; x < size; ++x) {
      const uint8_t* p = row + step * x;
      if constexpr (kNchw) {
        T* d = out + first + x;
        d[0] = t0[p[0]];
        d[plane] = t1[p[k1]];
        d[2 * plane] = t2[p[k2]];
      } else {
        T* d = out + (first + x) * 3;
        d[0] = t0[p[0]];
        d[1] = t1[p[k1]];
        d[2] = t2[p[k2]];
      }
    }
  }
}

template <typename T>
void WriteTyped(const uint8_t* src, size_t stride, int channels, int size, bool nchw, bool flip,
                const uint8_t* lut_bytes, void* out) {
  const T* lut = reinterpret_cast<const T*>(lut_bytes);
  T* dst = static_cast<T*>(out);
  if (channels == 1) {
    nchw ? WriteRows<T, 1, true>(src, stride, size, flip, lut, dst)
         : WriteRows<T, 1, false>(src, stride, size, flip, lut, dst);
  } else {
    nchw ? WriteRows<T, 3, true>(src, stride, size, flip, lut, dst)
         : WriteRows<T, 3, false>(src, stride, size, flip, lut, dst);
  }
}

}  // namespace

SampleWriter::SampleWriter(const TransformOptions& options)
    : size_(options.size), dtype_(options.dtype), nchw_(options.nchw) {
  const Status valid = ValidateTransformOptions(options);
  BATCHCAST_CHECK(valid.ok()) << valid.ToString();
  // Normalization in float32 as torchvision does (ToTensor: v / 255;
  // Normalize: (t - mean) / std), then rounded to the 16-bit formats, so for a
  // given resized byte the output is bit-identical to torch's.
  const size_t elem = DTypeSize(dtype_);
  lut_.assign(3 * 256 * elem, 0);
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) {
      const size_t i = static_cast<size_t>(c) * 256 + v;
      const float t = static_cast<float>(v) / 255.0f;
      const float normalized = (t - options.mean[c]) / options.std[c];
      switch (dtype_) {
        case DType::kFloat32:
          std::memcpy(lut_.data() + i * 4, &normalized, 4);
          break;
        case DType::kFloat16: {
          const uint16_t h = FloatToHalf(normalized);
          std::memcpy(lut_.data() + i * 2, &h, 2);
          break;
        }
        case DType::kBFloat16: {
          const uint16_t b = FloatToBFloat16(normalized);
          std::memcpy(lut_.data() + i * 2, &b, 2);
          break;
        }
        case DType::kUInt8:
          lut_[i] = static_cast<uint8_t>(v);
          break;
        default:
          BATCHCAST_CHECK(false) << "unsupported dtype";
      }
    }
  }
}

void SampleWriter::Write(const uint8_t* src, size_t stride, int channels, bool flip,
                         void* out) const {
  BATCHCAST_CHECK(channels == 1 || channels == 3) << "channels " << channels;
  switch (DTypeSize(dtype_)) {
    case 4:
      WriteTyped<float>(src, stride, channels, size_, nchw_, flip, lut_.data(), out);
      break;
    case 2:
      WriteTyped<uint16_t>(src, stride, channels, size_, nchw_, flip, lut_.data(), out);
      break;
    case 1:
      WriteTyped<uint8_t>(src, stride, channels, size_, nchw_, flip, lut_.data(), out);
      break;
    default:
      BATCHCAST_CHECK(false) << "unsupported dtype size";
  }
}

}  // namespace batchcast::image
