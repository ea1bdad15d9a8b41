#include "batchcast/sources/source_options.h"

#include <string>

#include "core/src/enum_names.h"

namespace batchcast {
namespace {
constexpr EnumNames<TransformKind, 2> kTransformNames{
    "transform", {{{TransformKind::kTrain, "train"}, {TransformKind::kEval, "eval"}}}};
constexpr EnumNames<ImageLayout, 2> kLayoutNames{
    "layout", {{{ImageLayout::kNchw, "nchw"}, {ImageLayout::kNhwc, "nhwc"}}}};
constexpr EnumNames<DecodeMode, 3> kDecodeNames{
    "decode",
    {{{DecodeMode::kAuto, "auto"}, {DecodeMode::kCpu, "cpu"}, {DecodeMode::kGpu, "gpu"}}}};
constexpr EnumNames<ErrorPolicy, 2> kErrorPolicyNames{
    "on_error", {{{ErrorPolicy::kSkip, "skip"}, {ErrorPolicy::kFail, "fail"}}}};
constexpr EnumNames<StreamPriority, 2> kStreamPriorityNames{
    "gpu_priority", {{{StreamPriority::kNormal, "normal"}, {StreamPriority::kHigh, "high"}}}};
}  // namespace

Result<TransformKind> ParseTransformKind(std::string_view t) { return kTransformNames.Parse(t); }
std::string_view TransformKindName(TransformKind k) { return kTransformNames.Name(k); }
Result<ImageLayout> ParseImageLayout(std::string_view t) { return kLayoutNames.Parse(t); }
std::string_view ImageLayoutName(ImageLayout l) { return kLayoutNames.Name(l); }
Result<DecodeMode> ParseDecodeMode(std::string_view t) { return kDecodeNames.Parse(t); }
std::string_view DecodeModeName(DecodeMode m) { return kDecodeNames.Name(m); }
Result<ErrorPolicy> ParseErrorPolicy(std::string_view t) { return kErrorPolicyNames.Parse(t); }
std::string_view ErrorPolicyName(ErrorPolicy p) { return kErrorPolicyNames.Name(p); }
Result<StreamPriority> ParseStreamPriority(std::string_view t) {
  return kStreamPriorityNames.Parse(t);
}
std::string_view StreamPriorityName(StreamPriority p) { return kStreamPriorityNames.Name(p); }

DType SourceOptions::output_dtype() const {
  if (dtype) return *dtype;
  return synthetic > 0 ? DType::kUInt8 : DType::kFloat32;
}

Status SourceOptions::Validate() const {
  auto bad = [](const std::string& what) { return InvalidArgumentError(what); };
  if (data.empty() && synthetic == 0) {
    return bad(
        "no data: give a dataset path (an image folder, a .tsv list or tar shards) or "
        "--synthetic COUNT");
  }
  if (!data.empty() && synthetic != 0)
    return bad("give either a dataset path or --synthetic, not both");
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
    return bad(
        "decode (--decode) gpu needs a CUDA ring (--device cuda:N): the GPU path writes "
        "the ring in device memory");
  }
  if (workers < 0 || workers > 1024) return bad("workers (--workers) must be in 0..1024");
  if (device_cache_mb > (uint64_t{1} << 24)) {
    return bad("device_cache_mb (--device-cache-mb) must be at most 16777216 (16 TiB)");
  }
  if (transcode_cache_mb > (uint64_t{1} << 24)) {
    return bad("transcode_cache_mb (--transcode-cache-mb) must be at most 16777216 (16 TiB)");
  }
  if (nvjpeg_calls < 1 || nvjpeg_calls > 4)
    return bad("nvjpeg_calls (--nvjpeg-calls) must be in 1..4");
  if (read_threads < 1 || read_threads > 64)
    return bad("read_threads (--read-threads) must be in 1..64");
  if (max_pixels == 0) return bad("max_pixels (--max-pixels) must be positive");
  if (shuffle_buffer > 10'000'000)
    return bad("shuffle_buffer (--shuffle-buffer) must be at most 10000000");
  return Status::Ok();
}

}  // namespace batchcast
