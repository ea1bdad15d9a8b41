// The crop planner (batchcast/image/crop_planner.h) that every image path asks
// for a sample's crop: train crops are a pure function of (seed, epoch,
// index, image size); the eval crop is centered and the same for every
// sample; the decode plan is PlanDecode of the crop; the CPU pipeline applies
// exactly the planned crop.
#include "batchcast/image/crop_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "batchcast/image/pipeline.h"
#include "temp_dataset.h"

namespace batchcast::image {
namespace {

TransformOptions Options(TransformOptions::Kind kind, uint64_t seed = 7, int size = 32) {
  TransformOptions o;
  o.kind = kind;
  o.seed = seed;
  o.size = size;
  return o;
}

TEST(CropPlanner, TrainCropIsAPureFunctionOfSeedEpochIndex) {
  const TransformOptions o = Options(TransformOptions::Kind::kTrain);
  // The same (seed, epoch, index, size) gives the same crop, whatever was
  // planned before (here: forwards, then backwards).
  std::vector<CropParams> forward;
  for (int64_t i = 0; i < 200; ++i) forward.push_back(SampleCrop(o, 3, i, 500, 375));
  for (int64_t i = 199; i >= 0; --i) {
    EXPECT_EQ(SampleCrop(o, 3, i, 500, 375), forward[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(SampleCrop(o, 3, i, 500, 375), TrainCrop(o, 3, i, 500, 375)) << i;
  }
  // Each of seed, epoch and index changes most crops.
  const TransformOptions other_seed = Options(TransformOptions::Kind::kTrain, 8);
  int same_epoch = 0, same_index = 0, same_seed = 0, flips = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const CropParams c = forward[static_cast<size_t>(i)];
    same_epoch += c == SampleCrop(o, 4, i, 500, 375);
    same_index += c == SampleCrop(o, 3, i + 1000, 500, 375);
    same_seed += c == SampleCrop(other_seed, 3, i, 500, 375);
    flips += c.flip;
  }
  EXPECT_LT(same_epoch, 5);
  EXPECT_LT(same_index, 5);
  EXPECT_LT(same_seed, 5);
  EXPECT_GT(flips, 60);
  EXPECT_LT(flips, 140);
}

TEST(CropPlanner, EvalCropIsCenteredAndTheSameForEverySample) {
  const TransformOptions o = Options(TransformOptions::Kind::kEval, 7, 224);
  for (auto [w, h] : std::vector<std::pair<int, int>>{
           {500, 375}, {375, 500}, {256, 256}, {1024, 200}, {224, 224}, {100, 80}}) {
    const CropParams c = SampleCrop(o, 0, 0, w, h);
    EXPECT_EQ(c, EvalCrop(o, w, h));
    EXPECT_FALSE(c.flip);
    // Centered: the crop's centre is the image's, up to one pixel of the
    // resized image (Resize(256) for size 224), in source pixels.
    const double tolerance = std::max(1.0, std::min(w, h) / 256.0);
    EXPECT_LE(std::abs(2 * c.x + c.w - w) / 2.0, tolerance) << w << "x" << h;
    EXPECT_LE(std::abs(2 * c.y + c.h - h) / 2.0, tolerance) << w << "x" << h;
    EXPECT_GT(c.w, 0);
    EXPECT_GT(c.h, 0);
    for (uint32_t epoch : {1u, 9u}) {
      for (int64_t index : {int64_t{1}, int64_t{123456}}) {
        EXPECT_EQ(SampleCrop(o, epoch, index, w, h), c);
      }
    }
  }
}

TEST(CropPlanner, DecodePlanIsPlanDecodeOfTheCrop) {
  for (auto kind : {TransformOptions::Kind::kTrain, TransformOptions::Kind::kEval}) {
    const TransformOptions o = Options(kind, 11, 64);
    for (int64_t i = 0; i < 50; ++i) {
      const CropPlan p = PlanCrop(o, 2, i, 1200, 900);
      EXPECT_EQ(p.crop, SampleCrop(o, 2, i, 1200, 900));
      const DecodePlan want = PlanDecode(1200, 900, p.crop, o.size);
      EXPECT_EQ(p.decode.scale_denom, want.scale_denom);
      EXPECT_EQ(p.decode.rect.x, want.rect.x);
      EXPECT_EQ(p.decode.rect.y, want.rect.y);
      EXPECT_EQ(p.decode.rect.w, want.rect.w);
      EXPECT_EQ(p.decode.rect.h, want.rect.h);
      EXPECT_EQ(p.decode.box_x, want.box_x);
      EXPECT_EQ(p.decode.box_w, want.box_w);
      EXPECT_EQ(PlanCrop(o, 2, i, 1200, 900, /*allow_dct_scaling=*/false).decode.scale_denom, 1);
    }
  }
  // Big crops of a big image are DCT-scaled.
  const TransformOptions eval = Options(TransformOptions::Kind::kEval, 0, 64);
  EXPECT_EQ(PlanCrop(eval, 0, 0, 1200, 900).decode.scale_denom, 8);
}

TEST(CropPlanner, CpuPipelineAppliesThePlannedCrop) {
  const std::vector<uint8_t> jpeg = batchcast::testing::TempDataset::Jpeg(321, 123, 5);
  for (auto kind : {TransformOptions::Kind::kTrain, TransformOptions::Kind::kEval}) {
    const TransformOptions o = Options(kind, 99, 48);
    CpuImagePipeline pipeline(o);
    std::vector<uint8_t> out(pipeline.output_bytes());
    for (int64_t i = 0; i < 20; ++i) {
      CropParams used;
      ASSERT_TRUE(pipeline.Process(jpeg, 6, i, out.data(), &used).ok());
      EXPECT_EQ(used, PlanCrop(o, 6, i, 321, 123).crop);
    }
  }
}

}  // namespace
}  // namespace batchcast::image
