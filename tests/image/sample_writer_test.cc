// SampleWriter (image/src/sample_writer.h) writes exactly the reference bytes
// (the formula of its header, element by element) for every byte value,
// dtype, layout, flip and source channel count.
#include "image/src/sample_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "batchcast/image/half.h"

namespace batchcast::image {
namespace {

// A size x size image of `channels` bytes per pixel, rows `stride` bytes apart
// (padding bytes 0xEE, which must never be read into the output), holding
// every byte value in every channel.
struct Source {
  std::vector<uint8_t> bytes;
  size_t stride;
};

Source MakeSource(int size, int channels, uint32_t seed) {
  Source s;
  s.stride = static_cast<size_t>(size) * channels + 5;
  s.bytes.assign(s.stride * size, 0xEE);
  std::mt19937 rng(seed);
  size_t n = 0;
  for (int y = 0; y < size; ++y) {
    for (int x = 0; x < size * channels; ++x, ++n) {
      // The first 256 bytes of each channel run through all values.
      s.bytes[s.stride * y + x] =
          n < 256u * channels ? static_cast<uint8_t>(n / channels) : static_cast<uint8_t>(rng());
    }
  }
  return s;
}

// The header's formula, one element at a time, written as bytes.
std::vector<uint8_t> Reference(const TransformOptions& o, const Source& src, int channels,
                               bool flip) {
  const int s = o.size;
  const size_t elem = DTypeSize(o.dtype);
  std::vector<uint8_t> out(OutputBytes(o));
  for (int y = 0; y < s; ++y) {
    for (int x = 0; x < s; ++x) {
      const int sx = flip ? s - 1 - x : x;
      for (int c = 0; c < 3; ++c) {
        const uint8_t v = src.bytes[src.stride * y + sx * channels + (channels == 1 ? 0 : c)];
        const size_t i = o.nchw ? (static_cast<size_t>(c) * s + y) * s + x
                                : (static_cast<size_t>(y) * s + x) * 3 + c;
        const float n = (static_cast<float>(v) / 255.0f - o.mean[c]) / o.std[c];
        uint8_t* d = out.data() + i * elem;
        if (o.dtype == DType::kFloat32) {
          std::memcpy(d, &n, 4);
        } else if (o.dtype == DType::kFloat16) {
          const uint16_t h = FloatToHalf(n);
          std::memcpy(d, &h, 2);
        } else if (o.dtype == DType::kBFloat16) {
          const uint16_t b = FloatToBFloat16(n);
          std::memcpy(d, &b, 2);
        } else {
          *d = v;
        }
      }
    }
  }
  return out;
}

// Index of the first differing element, or -1.
int64_t FirstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t elem) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i / elem);
  }
  return -1;
}

TEST(SampleWriter, WritesTheReferenceBytes) {
  struct Norm {
    std::array<float, 3> mean, std;
  };
  const Norm norms[] = {
      {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}},  // ImageNet
      {{0.5f, 0.0f, 1.0f}, {0.5f, 1.0f, 0.25f}},             // exact zeros, ties
      // float16 overflow to infinity and subnormal results; bfloat16 rounding.
      {{-3.0f, 0.1f, 0.7f}, {1e-5f, 3e4f, 7.0f}},
  };
  int runs = 0;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kUInt8}) {
    for (bool nchw : {true, false}) {
      for (int size : {1, 7, 8, 16, 21, 224}) {
        for (int channels : {3, 1}) {
          for (const Norm& norm : norms) {
            TransformOptions o;
            o.dtype = dtype;
            o.nchw = nchw;
            o.size = size;
            o.mean = norm.mean;
            o.std = norm.std;
            const Source src = MakeSource(size, channels, static_cast<uint32_t>(runs));
            const SampleWriter writer(o);
            for (bool flip : {false, true}) {
              SCOPED_TRACE(std::string(DTypeName(dtype)) + (nchw ? " nchw" : " nhwc") + " size " +
                           std::to_string(size) + " channels " + std::to_string(channels) +
                           " mean[0] " + std::to_string(norm.mean[0]) + (flip ? " flip" : ""));
              const std::vector<uint8_t> want = Reference(o, src, channels, flip);
              std::vector<uint8_t> got(want.size() + 64, 0xAB);
              writer.Write(src.bytes.data(), src.stride, channels, flip, got.data());
              for (size_t i = want.size(); i < got.size(); ++i) {
                ASSERT_EQ(got[i], 0xAB) << "wrote past the output";
              }
              got.resize(want.size());
              ASSERT_EQ(FirstDifference(got, want, DTypeSize(dtype)), -1);
              ++runs;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(runs, 4 * 2 * 6 * 2 * 3 * 2);
}

}  // namespace
}  // namespace batchcast::image
