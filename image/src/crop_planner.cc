#include "batchcast/image/crop_planner.h"

namespace batchcast::image {

CropParams SampleCrop(const TransformOptions& options, uint32_t epoch, int64_t index, int width,
                      int height) {
  return options.kind == TransformOptions::Kind::kTrain
             ? TrainCrop(options, epoch, index, width, height)
             : EvalCrop(options, width, height);
}

CropPlan PlanCrop(const TransformOptions& options, uint32_t epoch, int64_t index, int width,
                  int height, bool allow_dct_scaling) {
  CropPlan plan;
  plan.crop = SampleCrop(options, epoch, index, width, height);
  plan.decode = PlanDecode(width, height, plan.crop, options.size, allow_dct_scaling);
  return plan;
}

}  // namespace batchcast::image
