#include "batchcast/image/transform.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

#include "batchcast/image/half.h"

namespace batchcast::image {
namespace {

// `c` is a non-empty box inside a `w` x `h` image.
::testing::AssertionResult CropInImage(const CropParams& c, int w, int h) {
  if (c.x >= 0 && c.y >= 0 && c.w >= 1 && c.h >= 1 && c.x + c.w <= w && c.y + c.h <= h) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "crop (" << c.x << ", " << c.y << ") " << c.w << "x"
                                       << c.h << " is not a non-empty box in " << w << "x" << h;
}

TEST(TransformOptions, ValidateAndOutputBytes) {
  TransformOptions o;
  EXPECT_TRUE(ValidateTransformOptions(o).ok());
  EXPECT_EQ(OutputBytes(o), 3u * 224 * 224 * 4);
  o.dtype = DType::kFloat16;
  EXPECT_EQ(OutputBytes(o), 3u * 224 * 224 * 2);
  o.dtype = DType::kUInt8;
  o.size = 7;
  EXPECT_EQ(OutputBytes(o), 3u * 7 * 7);
  EXPECT_EQ(EffectiveMaxPixels(o), kDefaultMaxPixels);
  o.max_pixels = 5;
  EXPECT_EQ(EffectiveMaxPixels(o), 5u);

  auto bad = [](auto mutate) {
    TransformOptions t;
    mutate(t);
    const Status s = ValidateTransformOptions(t);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    return s.message();
  };
  EXPECT_NE(bad([](TransformOptions& t) { t.size = 0; }).find("size"), std::string::npos);
  bad([](TransformOptions& t) { t.size = kMaxTransformSize + 1; });
  EXPECT_NE(bad([](TransformOptions& t) { t.dtype = DType::kInt64; }).find("int64"),
            std::string::npos);
  EXPECT_NE(bad([](TransformOptions& t) { t.std[1] = 0; }).find("std[1]"), std::string::npos);
  bad([](TransformOptions& t) { t.mean[2] = NAN; });
  bad([](TransformOptions& t) { t.scale_min = 0; });
  bad([](TransformOptions& t) { t.scale_min = 0.9f, t.scale_max = 0.5f; });
  bad([](TransformOptions& t) { t.ratio_min = 2, t.ratio_max = 1; });
  bad([](TransformOptions& t) { t.ratio_max = INFINITY; });
}

TEST(TrainCrop, DeterministicPerSeedEpochIndex) {
  TransformOptions o;
  o.seed = 42;
  EXPECT_EQ(TrainCrop(o, 3, 17, 500, 375), TrainCrop(o, 3, 17, 500, 375));
  int same_epoch = 0;
  int same_index = 0;
  int same_seed = 0;
  TransformOptions other = o;
  other.seed = 43;
  for (int64_t i = 0; i < 200; ++i) {
    const CropParams c = TrainCrop(o, 1, i, 500, 375);
    same_epoch += c == TrainCrop(o, 2, i, 500, 375);
    same_index += c == TrainCrop(o, 1, i + 1, 500, 375);
    same_seed += c == TrainCrop(other, 1, i, 500, 375);
  }
  EXPECT_LE(same_epoch, 2);
  EXPECT_LE(same_index, 2);
  EXPECT_LE(same_seed, 2);
}

// Pins the generator: the crop stream is part of the contract (CPU and GPU
// paths, and reference tests, depend on it). Change only on purpose.
TEST(TrainCrop, GoldenValues) {
  TransformOptions o;
  const CropParams c0 = TrainCrop(o, 0, 0, 500, 375);
  const CropParams c1 = TrainCrop(o, 7, 123456789, 640, 480);
  o.seed = 0xDEADBEEF;
  const CropParams c2 = TrainCrop(o, 1, 5, 333, 500);
  const auto as_tuple = [](const CropParams& c) {
    return std::make_tuple(c.x, c.y, c.w, c.h, c.flip);
  };
  // Values recorded from the implementation of the documented algorithm;
  // tests/python/test_image_reference.py re-derives crops independently.
  EXPECT_EQ(as_tuple(c0), std::make_tuple(312, 68, 170, 220, false))
      << c0.x << " " << c0.y << " " << c0.w << " " << c0.h << " " << c0.flip;
  EXPECT_EQ(as_tuple(c1), std::make_tuple(143, 42, 155, 206, true))
      << c1.x << " " << c1.y << " " << c1.w << " " << c1.h << " " << c1.flip;
  EXPECT_EQ(as_tuple(c2), std::make_tuple(75, 38, 244, 225, true))
      << c2.x << " " << c2.y << " " << c2.w << " " << c2.h << " " << c2.flip;
}

TEST(TrainCrop, InBoundsWithScaleAndRatioInRange) {
  TransformOptions o;
  o.seed = 9;
  int flips = 0;
  int draws = 0;
  int fallbacks = 0;
  const int sizes[][2] = {{500, 375}, {375, 500}, {640, 480}, {300, 300},
                          {1000, 40}, {7, 5},     {1, 1},     {2048, 1536}};
  for (const auto& s : sizes) {
    const int w = s[0];
    const int h = s[1];
    const double area = static_cast<double>(w) * h;
    for (int64_t i = 0; i < 2000; ++i) {
      const CropParams c = TrainCrop(o, static_cast<uint32_t>(i % 3), i, w, h);
      ++draws;
      flips += c.flip;
      ASSERT_TRUE(CropInImage(c, w, h));
      if (w >= 100 && h >= 100) {
        // w = round(sqrt(A * r)), h = round(sqrt(A / r)) with r in the ratio
        // range and A / area in the scale range, so up to the rounding:
        EXPECT_GE(c.w + 0.5, o.ratio_min * (c.h - 0.5));
        EXPECT_LE(c.w - 0.5, o.ratio_max * (c.h + 0.5));
        EXPECT_GE((c.w + 0.5) * (c.h + 0.5), o.scale_min * area);
        EXPECT_LE((c.w - 0.5) * (c.h - 0.5), o.scale_max * area);
      }
      if (w == 1000 && h == 40) {
        // No crop of >= 8% of the area has w / h <= 4/3 here: always the
        // fallback, h = 40, w = round(40 * 4/3).
        fallbacks += c == CropParams{(1000 - 53) / 2, 0, 53, 40, c.flip};
      }
    }
  }
  EXPECT_NEAR(static_cast<double>(flips) / draws, 0.5, 0.02);
  EXPECT_EQ(fallbacks, 2000);
}

TEST(TrainCrop, FallbackIsCenterCropWithClampedRatio) {
  TransformOptions o;
  o.scale_min = 0.99f;  // a crop of >= 99% of the area never has ratio <= 4/3 here
  for (int64_t i = 0; i < 50; ++i) {
    const CropParams wide = TrainCrop(o, 0, i, 1000, 100);
    EXPECT_EQ(wide.h, 100);
    EXPECT_EQ(wide.w, 133);  // round(100 * 4/3)
    EXPECT_EQ(wide.x, (1000 - 133) / 2);
    EXPECT_EQ(wide.y, 0);
    const CropParams tall = TrainCrop(o, 0, i, 100, 1000);
    EXPECT_EQ(tall.w, 100);
    EXPECT_EQ(tall.h, 133);  // round(100 / (3/4))
    EXPECT_EQ(tall.y, (1000 - 133) / 2);
  }
  o.scale_min = 2.0f;  // impossible: whole image when the ratio is in range
  o.scale_max = 3.0f;
  const CropParams whole = TrainCrop(o, 0, 0, 400, 300);
  EXPECT_EQ(whole, (CropParams{0, 0, 400, 300, whole.flip}));
}

TEST(EvalCrop, CenteredTorchvisionBox) {
  TransformOptions o;
  // 500x375: Resize(256) -> 341x256, CenterCrop(224) at left 58 (round(58.5)), top 16.
  CropParams c = EvalCrop(o, 500, 375);
  EXPECT_FALSE(c.flip);
  EXPECT_EQ(c.x, 85);  // 58 * 500 / 341 = 85.04
  EXPECT_EQ(c.w, 413 - 85);
  EXPECT_EQ(c.y, 23);  // 16 * 375 / 256 = 23.4
  EXPECT_EQ(c.h, 352 - 23);
  // Square 256: the box is exactly [16, 240).
  c = EvalCrop(o, 256, 256);
  EXPECT_EQ(c, (CropParams{16, 16, 224, 224, false}));
  // Centered within a pixel and about size * short / 256 on a side, for many shapes.
  for (int w : {1, 2, 50, 224, 333, 500, 1024, 4000}) {
    for (int h : {1, 3, 100, 256, 375, 999, 3000}) {
      c = EvalCrop(o, w, h);
      ASSERT_TRUE(CropInImage(c, w, h));
      // torchvision rounds the crop offset in the resized image (to even on
      // ties): off center by up to half a resized pixel, plus our rounding.
      const double center_tol = 1.0 + 0.5 * std::min(w, h) / 256.0;
      EXPECT_NEAR(c.x + c.w / 2.0, w / 2.0, center_tol) << w << "x" << h;
      EXPECT_NEAR(c.y + c.h / 2.0, h / 2.0, center_tol) << w << "x" << h;
      const double side = 224.0 * std::min(w, h) / 256.0;
      if (side >= 1) {
        // The long side is floor(256 * long / short): up to 0.4% anisotropy.
        EXPECT_NEAR(c.w, side, 1.0 + side * 0.004) << w << "x" << h;
        EXPECT_NEAR(c.h, side, 1.0 + side * 0.004) << w << "x" << h;
      }
    }
  }
  o.size = 128;  // R = round(128 / 0.875) = 146
  c = EvalCrop(o, 146, 146);
  EXPECT_EQ(c, (CropParams{9, 9, 128, 128, false}));
}

TEST(PlanDecode, ScaleAndRect) {
  auto plan = PlanDecode(2000, 1500, CropParams{0, 0, 2000, 1500, false}, 224);
  EXPECT_EQ(plan.scale_denom, 4);  // 1500 / 8 < 224 <= 1500 / 4
  EXPECT_EQ(plan.rect.w, 500);
  EXPECT_EQ(plan.rect.h, 375);
  plan = PlanDecode(5000, 5000, CropParams{100, 100, 4000, 4000, false}, 224);
  EXPECT_EQ(plan.scale_denom, 8);
  plan = PlanDecode(1000, 1000, CropParams{10, 20, 447, 900, false}, 224);
  EXPECT_EQ(plan.scale_denom, 1);
  EXPECT_EQ(plan.rect.x, 10);
  EXPECT_EQ(plan.rect.w, 447);
  EXPECT_TRUE(plan.box_is_integral());
  EXPECT_EQ(plan.box_w, 447.0);
  plan = PlanDecode(1000, 1000, CropParams{11, 20, 448, 900, false}, 224);
  EXPECT_EQ(plan.scale_denom, 2);
  EXPECT_EQ(plan.rect.x, 5);    // floor(5.5)
  EXPECT_EQ(plan.rect.w, 225);  // ceil(229.5) - 5
  EXPECT_EQ(plan.box_x, 0.5);
  EXPECT_EQ(plan.box_w, 224.0);
  EXPECT_EQ(plan.rect.y, 10);
  EXPECT_EQ(plan.rect.h, 450);
  EXPECT_EQ(plan.box_y, 0.0);
  EXPECT_EQ(plan.box_h, 450.0);
  EXPECT_FALSE(plan.box_is_integral());
  plan = PlanDecode(1000, 1000, CropParams{0, 0, 1000, 1000, false}, 224, false);
  EXPECT_EQ(plan.scale_denom, 1);
  // Odd-sized image at 1/8: the scaled image is ceil(1001 / 8) = 126 wide.
  plan = PlanDecode(1001, 1001, CropParams{0, 0, 1001, 1001, false}, 100);
  EXPECT_EQ(plan.scale_denom, 8);
  EXPECT_EQ(plan.rect.x + plan.rect.w, 126);
  EXPECT_EQ(plan.box_w, 125.125);
  // Property: always non-empty and inside the scaled image.
  for (int i = 0; i < 5000; ++i) {
    const int w = 1 + (i * 7919) % 3000;
    const int h = 1 + (i * 104729) % 3000;
    TransformOptions o;
    o.size = 16 + i % 300;
    const CropParams c = TrainCrop(o, 0, i, w, h);
    plan = PlanDecode(w, h, c, o.size);
    const int d = plan.scale_denom;
    if (d > 1) {
      ASSERT_GE(std::min(c.w, c.h), o.size * d);
    }
    ASSERT_GE(plan.rect.w, 1);
    ASSERT_GE(plan.rect.h, 1);
    ASSERT_GE(plan.rect.x, 0);
    ASSERT_GE(plan.rect.y, 0);
    ASSERT_LE(plan.rect.x + plan.rect.w, ScaledDimension(w, d));
    ASSERT_LE(plan.rect.y + plan.rect.h, ScaledDimension(h, d));
    ASSERT_GE(plan.box_x, 0.0);
    ASSERT_GE(plan.box_y, 0.0);
    ASSERT_LE(plan.box_x + plan.box_w, plan.rect.w);
    ASSERT_LE(plan.box_y + plan.box_h, plan.rect.h);
    ASSERT_LT(plan.rect.w, plan.box_w + 2);
    ASSERT_LT(plan.rect.h, plan.box_h + 2);
    ASSERT_EQ((plan.rect.x + plan.box_x) * d, c.x);
    ASSERT_EQ((plan.rect.y + plan.box_y) * d, c.y);
    ASSERT_EQ(plan.box_w * d, c.w);
    if (d > 1) {
      ASSERT_GE(std::min(plan.box_w, plan.box_h), o.size);
    }
  }
}

TEST(Half, KnownValuesAndRoundTrip) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7C00);
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(FloatToHalf(NAN) & 0x7C00, 0x7C00);
  EXPECT_NE(FloatToHalf(NAN) & 0x03FF, 0);
  // Ties to even.
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.0p-11f), 0x3C00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1.0p-11f), 0x3C02);
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.0p-11f + 0x1.0p-20f), 0x3C01);
  // Subnormals.
  EXPECT_EQ(FloatToHalf(0x1.0p-24f), 0x0001);
  EXPECT_EQ(FloatToHalf(0x1.0p-25f), 0x0000);
  EXPECT_EQ(FloatToHalf(0x1.8p-25f), 0x0001);
  EXPECT_EQ(FloatToHalf(0x1.0p-14f), 0x0400);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    if ((half & 0x7C00) == 0x7C00 && (half & 0x03FF) != 0) continue;  // NaN
    ASSERT_EQ(FloatToHalf(HalfToFloat(half)), half) << std::hex << h;
  }
  EXPECT_EQ(HalfToFloat(0x3555), 0x1.554p-2f);

  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(-1.0f), 0xBF80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1.0p-8f), 0x3F80);      // tie -> even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * 0x1.0p-8f), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 0x3F81);
  EXPECT_EQ(FloatToBFloat16(INFINITY), 0x7F80);
  EXPECT_EQ(FloatToBFloat16(NAN) & 0x7FC0, 0x7FC0);
  EXPECT_EQ(BFloat16ToFloat(0x4049), 3.140625f);
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bf = static_cast<uint16_t>(b);
    if ((bf & 0x7F80) == 0x7F80 && (bf & 0x007F) != 0) continue;
    ASSERT_EQ(FloatToBFloat16(BFloat16ToFloat(bf)), bf) << std::hex << b;
  }
}

}  // namespace
}  // namespace batchcast::image
