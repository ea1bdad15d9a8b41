#include "batchcast/image/pipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "batchcast/image/half.h"
#include "test_jpegs.h"

// In the namespace of the test images and encoders (test_jpegs.h).
namespace batchcast::image::testing {
namespace {

TransformOptions Options(TransformOptions::Kind kind, DType dtype, bool nchw, int size = 64) {
  TransformOptions o;
  o.kind = kind;
  o.dtype = dtype;
  o.nchw = nchw;
  o.size = size;
  o.seed = 1234;
  return o;
}

template <typename T>
std::vector<T> Transform(CpuImagePipeline& p, const std::vector<uint8_t>& jpeg, uint32_t epoch,
                         int64_t index, CropParams* crop = nullptr) {
  std::vector<T> out(p.output_bytes() / sizeof(T));
  const Status s = p.Process(jpeg, epoch, index, out.data(), crop);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

template <typename T>
std::vector<T> RunCrop(CpuImagePipeline& p, const std::vector<uint8_t>& jpeg,
                       const CropParams& crop) {
  std::vector<T> out(p.output_bytes() / sizeof(T));
  const Status s = p.ProcessWithCrop(jpeg, crop, out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

float Normalize(int v, int c, const TransformOptions& o) {
  return (static_cast<float>(v) / 255.0f - o.mean[c]) / o.std[c];
}

TEST(CpuImagePipeline, UniformColorNormalizes) {
  Image img{40, 30, 3, std::vector<uint8_t>(40 * 30 * 3)};
  for (size_t i = 0; i < img.pixels.size(); i += 3) {
    img.pixels[i] = 200;
    img.pixels[i + 1] = 100;
    img.pixels[i + 2] = 50;
  }
  const auto jpeg = EncodeJpeg(img, 100, TJSAMP_444);
  for (auto kind : {TransformOptions::Kind::kTrain, TransformOptions::Kind::kEval}) {
    const TransformOptions o = Options(kind, DType::kFloat32, true, 32);
    CpuImagePipeline p(o);
    const auto out = Transform<float>(p, jpeg, 0, 5);
    const int want[3] = {200, 100, 50};
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 32 * 32; ++i) {
        ASSERT_NEAR(out[c * 32 * 32 + i], Normalize(want[c], c, o), 1.01f / 255 / o.std[c]);
      }
    }
  }
}

TEST(CpuImagePipeline, LayoutsAreTransposesForEveryDType) {
  const auto jpeg = EncodeJpeg(TexturedRgb(150, 110, 1), 90);
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kUInt8}) {
    const size_t elem = DTypeSize(dtype);
    CpuImagePipeline nchw(Options(TransformOptions::Kind::kTrain, dtype, true, 48));
    CpuImagePipeline nhwc(Options(TransformOptions::Kind::kTrain, dtype, false, 48));
    for (int64_t index = 0; index < 4; ++index) {
      const auto a = Transform<uint8_t>(nchw, jpeg, 2, index);
      const auto b = Transform<uint8_t>(nhwc, jpeg, 2, index);
      ASSERT_EQ(a.size(), 3u * 48 * 48 * elem);
      ASSERT_EQ(b.size(), a.size());
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < 48; ++y) {
          for (int x = 0; x < 48; ++x) {
            ASSERT_EQ(std::memcmp(&a[((c * 48 + y) * 48 + x) * elem],
                                  &b[((y * 48 + x) * 3 + c) * elem], elem),
                      0)
                << DTypeName(dtype) << " c" << c << " y" << y << " x" << x;
          }
        }
      }
    }
  }
}

TEST(CpuImagePipeline, DTypesAgreeWithUint8AndFloat32) {
  const auto jpeg = EncodeJpeg(TexturedRgb(130, 170, 2), 90);
  for (auto kind : {TransformOptions::Kind::kTrain, TransformOptions::Kind::kEval}) {
    CpuImagePipeline u8(Options(kind, DType::kUInt8, true));
    CpuImagePipeline f32(Options(kind, DType::kFloat32, true));
    CpuImagePipeline f16(Options(kind, DType::kFloat16, true));
    CpuImagePipeline bf16(Options(kind, DType::kBFloat16, true));
    const TransformOptions& o = f32.options();
    for (int64_t index = 0; index < 3; ++index) {
      const auto u = Transform<uint8_t>(u8, jpeg, 0, index);
      const auto f = Transform<float>(f32, jpeg, 0, index);
      const auto h = Transform<uint16_t>(f16, jpeg, 0, index);
      const auto b = Transform<uint16_t>(bf16, jpeg, 0, index);
      const size_t plane = 64 * 64;
      for (size_t i = 0; i < u.size(); ++i) {
        const int c = static_cast<int>(i / plane);
        // uint8 skips normalization; float32 is exactly torchvision's arithmetic.
        ASSERT_EQ(f[i], Normalize(u[i], c, o)) << i;
        ASSERT_EQ(h[i], FloatToHalf(f[i])) << i;
        ASSERT_EQ(b[i], FloatToBFloat16(f[i])) << i;
        ASSERT_NEAR(HalfToFloat(h[i]), f[i], std::abs(f[i]) * 0x1.0p-11f + 1e-7f);
        ASSERT_NEAR(BFloat16ToFloat(b[i]), f[i], std::abs(f[i]) * 0x1.0p-8f + 1e-7f);
      }
    }
  }
}

TEST(CpuImagePipeline, FlipMirrors) {
  const auto jpeg = EncodeJpeg(TexturedRgb(200, 150, 4), 90);
  for (bool nchw : {true, false}) {
    CpuImagePipeline p(Options(TransformOptions::Kind::kTrain, DType::kUInt8, nchw, 40));
    CropParams crop{30, 20, 100, 90, false};
    const auto plain = RunCrop<uint8_t>(p, jpeg, crop);
    crop.flip = true;
    const auto flipped = RunCrop<uint8_t>(p, jpeg, crop);
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < 40; ++y) {
        for (int x = 0; x < 40; ++x) {
          const auto at = [&](const std::vector<uint8_t>& v, int xx) {
            return nchw ? v[(c * 40 + y) * 40 + xx] : v[(y * 40 + xx) * 3 + c];
          };
          ASSERT_EQ(at(flipped, x), at(plain, 39 - x));
        }
      }
    }
  }
}

TEST(CpuImagePipeline, ReportsTheCropItUsed) {
  const auto jpeg = EncodeJpeg(SmoothRgb(321, 123), 90);
  CpuImagePipeline train(Options(TransformOptions::Kind::kTrain, DType::kUInt8, true));
  CpuImagePipeline eval(Options(TransformOptions::Kind::kEval, DType::kUInt8, true));
  for (int64_t index = 0; index < 10; ++index) {
    CropParams crop;
    const auto out = Transform<uint8_t>(train, jpeg, 3, index, &crop);
    EXPECT_EQ(crop, TrainCrop(train.options(), 3, index, 321, 123));
    EXPECT_EQ(out, RunCrop<uint8_t>(train, jpeg, crop));
    Transform<uint8_t>(eval, jpeg, 3, index, &crop);
    EXPECT_EQ(crop, EvalCrop(eval.options(), 321, 123));
  }
  // Epochs and indices give different samples.
  EXPECT_NE(Transform<uint8_t>(train, jpeg, 0, 1), Transform<uint8_t>(train, jpeg, 1, 1));
  EXPECT_NE(Transform<uint8_t>(train, jpeg, 0, 1), Transform<uint8_t>(train, jpeg, 0, 2));
  EXPECT_EQ(Transform<uint8_t>(eval, jpeg, 0, 1), Transform<uint8_t>(eval, jpeg, 1, 2));
}

// The full-decode path is exactly: decode, crop, cv::resize(INTER_LINEAR), flip.
TEST(CpuImagePipeline, MatchesDecodeCropResizeExactly) {
  const Image src = TexturedRgb(320, 240, 8);
  const auto jpeg = EncodeJpeg(src, 90);
  JpegDecoder decoder;
  auto full = decoder.DecodeRgb(jpeg, 0);
  ASSERT_TRUE(full.ok());
  const cv::Mat decoded =
      cv::Mat(full->height, full->width, CV_8UC3, const_cast<uint8_t*>(full->data), full->stride)
          .clone();
  PipelineTuning tuning;
  tuning.allow_dct_scaling = false;
  tuning.allow_cropped_decode = false;
  tuning.interpolation = PipelineTuning::Interpolation::kLinear;
  CpuImagePipeline p(Options(TransformOptions::Kind::kTrain, DType::kUInt8, false, 64), tuning);
  for (const CropParams crop :
       {CropParams{0, 0, 320, 240, false}, CropParams{10, 20, 100, 50, true},
        CropParams{100, 3, 40, 41, false}, CropParams{250, 200, 64, 40, true}}) {
    const auto out = RunCrop<uint8_t>(p, jpeg, crop);
    cv::Mat want;
    cv::resize(decoded(cv::Rect(crop.x, crop.y, crop.w, crop.h)), want, cv::Size(64, 64), 0, 0,
               cv::INTER_LINEAR);
    if (crop.flip) cv::flip(want, want, 1);
    ASSERT_TRUE(want.isContinuous());
    ASSERT_EQ(std::memcmp(out.data(), want.data, out.size()), 0) << crop.x << "," << crop.y;
  }
}

double MeanAbsDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int* max) {
  double sum = 0;
  *max = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int d = std::abs(a[i] - b[i]);
    sum += d;
    *max = std::max(*max, d);
  }
  return sum / a.size();
}

TEST(CpuImagePipeline, DctScaledAndCroppedDecodeCloseToFullDecode) {
  const Image src = TexturedRgb(1200, 900, 6);
  const auto jpeg = EncodeJpeg(src, 92);
  PipelineTuning full_tuning;
  full_tuning.allow_dct_scaling = false;
  full_tuning.allow_cropped_decode = false;
  PipelineTuning crop_only = full_tuning;
  crop_only.allow_cropped_decode = true;
  // An antialiased reference for the downscales: full decode + INTER_AREA.
  PipelineTuning area_tuning = full_tuning;
  area_tuning.interpolation = PipelineTuning::Interpolation::kArea;
  const TransformOptions o = Options(TransformOptions::Kind::kTrain, DType::kUInt8, true, 112);
  CpuImagePipeline fast(o);
  CpuImagePipeline cropped(o, crop_only);
  CpuImagePipeline reference(o, full_tuning);
  CpuImagePipeline area_reference(o, area_tuning);
  int scaled_seen = 0;
  for (const CropParams crop :
       {CropParams{0, 0, 1200, 900, false}, CropParams{104, 56, 1000, 800, false},
        CropParams{296, 200, 504, 448, true}, CropParams{8, 8, 232, 240, false},
        CropParams{101, 57, 999, 801, false}, CropParams{3, 5, 230, 240, false},
        CropParams{1000, 700, 200, 200, false}, CropParams{500, 0, 60, 900, false}}) {
    const int d = PlanDecode(1200, 900, crop, o.size).scale_denom;
    scaled_seen += d > 1;
    const auto full = RunCrop<uint8_t>(reference, jpeg, crop);
    int max = 0;
    // Cropped decode alone gives exactly the pixels of a full decode.
    EXPECT_EQ(MeanAbsDiff(RunCrop<uint8_t>(cropped, jpeg, crop), full, &max), 0.0);
    EXPECT_EQ(max, 0);
    const auto out = RunCrop<uint8_t>(fast, jpeg, crop);
    if (d == 1) {
      EXPECT_EQ(out, full) << crop.x << "," << crop.y;
      continue;
    }
    // DCT scaling is a different low-pass than a box filter; the crop box is
    // mapped exactly (warpAffine when its edges fall between scaled pixels).
    // On this striped, noisy image within a few levels on average.
    const auto area = RunCrop<uint8_t>(area_reference, jpeg, crop);
    const double diff = MeanAbsDiff(out, area, &max);
    EXPECT_LT(diff, 3.0) << crop.x << "," << crop.y << " 1/" << d << " max " << max;
  }
  EXPECT_GE(scaled_seen, 3);
}

TEST(CpuImagePipeline, GrayscaleReplicatedAndCmykDecoded) {
  const auto gray = EncodeJpeg(SmoothGray(90, 70), 95);
  for (bool nchw : {true, false}) {
    CpuImagePipeline p(Options(TransformOptions::Kind::kEval, DType::kUInt8, nchw, 32));
    const auto out = Transform<uint8_t>(p, gray, 0, 0);
    for (int i = 0; i < 32 * 32; ++i) {
      const int r = nchw ? out[i] : out[3 * i];
      const int g = nchw ? out[1024 + i] : out[3 * i + 1];
      const int b = nchw ? out[2048 + i] : out[3 * i + 2];
      ASSERT_EQ(r, g);
      ASSERT_EQ(r, b);
    }
  }
  // Flat CMYK (stored inverted): the output is the Pillow RGB of that colour.
  Image stored{48, 48, 4, std::vector<uint8_t>(48 * 48 * 4)};
  const uint8_t cmyk[4] = {10, 120, 200, 30};
  for (size_t i = 0; i < stored.pixels.size(); ++i) stored.pixels[i] = 255 - cmyk[i % 4];
  CpuImagePipeline p(Options(TransformOptions::Kind::kTrain, DType::kUInt8, false, 16));
  const auto out = Transform<uint8_t>(p, EncodeCmykJpeg(stored, false), 0, 0);
  const int nk = 255 - cmyk[3];
  for (int c = 0; c < 3; ++c) {
    const int want = static_cast<int>(std::lround((255.0 - cmyk[c]) * nk / 255.0));
    for (int i = 0; i < 16 * 16; ++i) ASSERT_NEAR(out[3 * i + c], want, 3) << c;
  }
}

TEST(CpuImagePipeline, BadInput) {
  CpuImagePipeline p(Options(TransformOptions::Kind::kTrain, DType::kFloat32, true));
  std::vector<uint8_t> out(p.output_bytes());
  EXPECT_EQ(p.Process({}, 0, 0, out.data()).code(), StatusCode::kDataLoss);
  const std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 1, 2, 3};
  Status s = p.Process(png, 0, 0, out.data());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("PNG"), std::string::npos);

  const auto jpeg = EncodeJpeg(TexturedRgb(300, 200, 3), 90);
  for (int64_t index = 0; index < 20; ++index) {  // whatever the crop
    s = p.Process(std::span(jpeg).first(jpeg.size() / 2), 0, index, out.data());
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  }
  auto huge = jpeg;
  ASSERT_TRUE(PatchSofDimensions(huge, 60000, 60000));
  EXPECT_EQ(p.Process(huge, 0, 0, out.data()).code(), StatusCode::kResourceExhausted);
  TransformOptions small = p.options();
  small.max_pixels = 300 * 200 - 1;
  CpuImagePipeline bounded(small);
  EXPECT_EQ(bounded.Process(jpeg, 0, 0, out.data()).code(), StatusCode::kResourceExhausted);

  EXPECT_EQ(p.ProcessWithCrop(jpeg, CropParams{250, 0, 51, 10, false}, out.data()).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(p.ProcessWithCrop(jpeg, CropParams{0, 0, 0, 10, false}, out.data()).code(),
            StatusCode::kInvalidArgument);
  // Still fine afterwards.
  EXPECT_TRUE(p.Process(jpeg, 0, 0, out.data()).ok());
}

TEST(CpuImagePipeline, Movable) {
  const auto jpeg = EncodeJpeg(TexturedRgb(90, 70, 2), 90);
  CpuImagePipeline a(Options(TransformOptions::Kind::kTrain, DType::kFloat32, true, 32));
  const auto want = Transform<float>(a, jpeg, 0, 3);
  std::vector<CpuImagePipeline> pipelines;
  pipelines.push_back(std::move(a));
  pipelines.emplace_back(Options(TransformOptions::Kind::kEval, DType::kUInt8, true, 16));
  EXPECT_EQ(Transform<float>(pipelines[0], jpeg, 0, 3), want);
  CpuImagePipeline b(Options(TransformOptions::Kind::kEval, DType::kUInt8, true, 16));
  b = std::move(pipelines[0]);
  EXPECT_EQ(Transform<float>(b, jpeg, 0, 3), want);
  std::vector<JpegDecoder> decoders(2);
  decoders.emplace_back();
  EXPECT_TRUE(decoders[2].DecodeRgb(jpeg, 0).ok());
}

TEST(CpuImagePipeline, ReuseAcrossImagesMatchesFreshPipeline) {
  const TransformOptions o = Options(TransformOptions::Kind::kTrain, DType::kFloat16, true, 56);
  CpuImagePipeline reused(o);
  for (int i = 0; i < 12; ++i) {
    const int w = 40 + (i * 97) % 600;
    const int h = 30 + (i * 61) % 500;
    const auto jpeg = i % 3 == 2 ? EncodeJpeg(SmoothGray(w, h), 90)
                                 : EncodeJpeg(TexturedRgb(w, h, i), 85,
                                              i % 2 ? TJSAMP_444 : TJSAMP_420, i % 4 == 1);
    CpuImagePipeline fresh(o);
    EXPECT_EQ(Transform<uint16_t>(reused, jpeg, 1, i), Transform<uint16_t>(fresh, jpeg, 1, i)) << i;
  }
}

}  // namespace
}  // namespace batchcast::image::testing
