// The crop planner: the one place that turns (transform options, epoch, index,
// image size) into a sample's crop and the way to decode it. The CPU pipeline
// (pipeline.h) and the image sources of batchcast::sources (CPU and GPU) ask
// it, so every path crops sample (epoch, index) alike.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "batchcast/image/transform.h"

namespace batchcast::image {

// The crop of sample (epoch, index) of a width x height image: TrainCrop for
// Kind::kTrain (a pure function of (seed, epoch, index, width, height)),
// EvalCrop for Kind::kEval (centered; the same for every epoch and index).
// REQUIRES: ValidateTransformOptions(options).ok(); width, height >= 1.
CropParams SampleCrop(const TransformOptions& options, uint32_t epoch, int64_t index, int width,
                      int height);

// A sample's crop and how to decode it (DCT scale and rectangle, PlanDecode
// for options.size).
struct CropPlan {
  CropParams crop;
  DecodePlan decode;
};

// SampleCrop + PlanDecode. allow_dct_scaling false: scale_denom is 1.
// REQUIRES: as SampleCrop.
CropPlan PlanCrop(const TransformOptions& options, uint32_t epoch, int64_t index, int width,
                  int height, bool allow_dct_scaling = true);

}  // namespace batchcast::image
