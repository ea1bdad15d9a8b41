#include "batchcast/sources/source_options.h"

#include <string>

namespace batchcast {
namespace {
Status BadChoice(std::string_view option, std::string_view choices, std::string_view got) {
  return InvalidArgumentError(std::string(option) + " must be " + std::string(choices) +
                              ", got '" + std::string(got) + "'");
}
}  // namespace

Result<TransformKind> ParseTransformKind(std::string_view text) {
  if (text == "train") return TransformKind::kTrain;
  if (text == "eval") return TransformKind::kEval;
  return BadChoice("transform", "train or eval", text);
}
std::string_view TransformKindName(TransformKind kind) {
  return kind == TransformKind::kEval ? "eval" : "train";
}

Result<ImageLayout> ParseImageLayout(std::string_view text) {
  if (text == "nchw") return ImageLayout::kNchw;
  if (text == "nhwc") return ImageLayout::kNhwc;
  return BadChoice("layout", "nchw or nhwc", text);
}
std::string_view ImageLayoutName(ImageLayout layout) {
  return layout == ImageLayout::kNhwc ? "nhwc" : "nchw";
}

Result<DecodeMode> ParseDecodeMode(std::string_view text) {
  if (text == "auto") return DecodeMode::kAuto;
  if (text == "cpu") return DecodeMode::kCpu;
  if (text == "gpu") return DecodeMode::kGpu;
  return BadChoice("decode", "auto, cpu or gpu", text);
}
std::string_view DecodeModeName(DecodeMode mode) {
  switch (mode) {
    case DecodeMode::kAuto: return "auto";
    case DecodeMode::kCpu: return "cpu";
    case DecodeMode::kGpu: return "gpu";
  }
  return "?";
}

Result<ErrorPolicy> ParseErrorPolicy(std::string_view text) {
  if (text == "skip") return ErrorPolicy::kSkip;
  if (text == "fail") return ErrorPolicy::kFail;
  return BadChoice("on_error", "skip or fail", text);
}
std::string_view ErrorPolicyName(ErrorPolicy policy) {
  return policy == ErrorPolicy::kFail ? "fail" : "skip";
}

DType SourceOptions::output_dtype() const {
  if (dtype) return *dtype;
  return synthetic > 0 ? DType::kUInt8 : DType::kFloat32;
}

Status SourceOptions::Validate() const {
  auto bad = [](const std::string& what) { return InvalidArgumentError(what); };
  if (data.empty() && synthetic == 0) {
    return bad("no data: give a dataset path (an image folder or a .tsv list) or --synthetic COUNT");
  }
  if (!data.empty() && synthetic != 0) return bad("give either a dataset path or --synthetic, not both");
  if (size < 1 || size > 8192) return bad("size (--size) must be in 1..8192");
  const DType dt = output_dtype();
  if (synthetic > 0 && dt != DType::kUInt8) {
    return bad("dtype (--dtype): the synthetic source makes uint8 images, got " +
               std::string(DTypeName(dt)));
  }
  if (dt != DType::kFloat32 && dt != DType::kFloat16 && dt != DType::kBFloat16 &&
      dt != DType::kUInt8) {
    return bad("dtype (--dtype) must be float32, float16, bfloat16 or uint8");
  }
  for (float s : std) {
    if (!(s > 0)) return bad("std (--std) values must be positive");
  }
  if (decode == DecodeMode::kGpu && !device.is_cuda()) {
    return bad("decode (--decode) gpu needs a CUDA ring (--device cuda:N): the GPU path writes "
               "the ring in device memory");
  }
  if (workers < 0 || workers > 1024) return bad("workers (--workers) must be in 0..1024");
  if (max_pixels == 0) return bad("max_pixels (--max-pixels) must be positive");
  return Status::Ok();
}

}  // namespace batchcast
