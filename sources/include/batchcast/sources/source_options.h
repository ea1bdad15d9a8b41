// SourceOptions: what the built-in sources (synthetic data, image datasets on
// the CPU or the GPU) are made of. One struct for the component; the server's
// options hold one (ServerOptions::source), and the option table
// (batchcast/server/option_table.h) names its fields for the command line and
// Python.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/dtype.h"
#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"

namespace batchcast {

// The augmentation of image sources (torchvision's ImageNet recipes).
enum class TransformKind : uint8_t {
  kTrain = 0,  // RandomResizedCrop + RandomHorizontalFlip + Normalize
  kEval = 1,   // Resize(size / 0.875) + CenterCrop + Normalize
};
Result<TransformKind> ParseTransformKind(std::string_view text);
std::string_view TransformKindName(TransformKind kind);

// Memory layout of an image field.
enum class ImageLayout : uint8_t {
  kNchw = 0,  // [3, H, W] per sample
  kNhwc = 1,  // [H, W, 3] per sample
};
Result<ImageLayout> ParseImageLayout(std::string_view text);
std::string_view ImageLayoutName(ImageLayout layout);

// Where JPEGs are decoded.
enum class DecodeMode : uint8_t {
  kAuto = 0,  // the GPU (nvJPEG) when the ring is on a GPU and the build has nvJPEG, else the CPU
  kCpu = 1,   // libjpeg-turbo on the CPU
  kGpu = 2,   // nvJPEG; an error when the ring is not on a GPU or nvJPEG is missing
};
Result<DecodeMode> ParseDecodeMode(std::string_view text);
std::string_view DecodeModeName(DecodeMode mode);

// What an undecodable file does (docs/semantics.md, "Bad input").
enum class ErrorPolicy : uint8_t {
  kSkip = 0,  // drop it from the stream, warn once, count it
  kFail = 1,  // stop with the file's path and reason
};
Result<ErrorPolicy> ParseErrorPolicy(std::string_view text);
std::string_view ErrorPolicyName(ErrorPolicy policy);

// --gpu-priority: normal | high (StreamPriority, batchcast/core/cuda_stream.h).
Result<StreamPriority> ParseStreamPriority(std::string_view text);
std::string_view StreamPriorityName(StreamPriority priority);

struct SourceOptions {
  // A dataset path (ImageFolder directory or .tsv list), or synthetic > 0.
  std::string data;
  // Not an option of the command line: a listing of `data` that a server
  // saved (Source::SaveListing), read instead of listing the folder and
  // reading every file's header again. The server gives it to the attached
  // producers of its rings.
  std::string listing_file;
  uint64_t synthetic = 0;  // sample count of the synthetic source

  // Where the source writes: host memory, or the device of a CUDA ring.
  Device device = Device::Cpu();

  // Transforms (image sources).
  TransformKind transform = TransformKind::kTrain;
  int size = 224;
  // float32 | float16 | bfloat16 | uint8; unset: float32, or uint8 for the
  // synthetic source (which makes uint8 images).
  std::optional<DType> dtype;
  ImageLayout layout = ImageLayout::kNchw;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  DecodeMode decode = DecodeMode::kAuto;
  ErrorPolicy on_error = ErrorPolicy::kSkip;
  uint64_t max_pixels = 178956970;
  uint64_t seed = 0;  // crop and flip parameters are a function of (seed, epoch, index)
  // CPU decode threads; 0 = one per core (CPU decode) or 2 (GPU decode:
  // fallback decoders of the files the hardware engine refuses, beside the
  // pipeline thread and the read-ahead thread; they decode the next batch's
  // refused files while this batch's hardware call runs).
  int workers = 0;
  // GPU decode: MiB of device memory caching the files decoded on the CPU
  // (each decoded whole once, then read from the device); 0 (the default) =
  // no cache.
  uint64_t device_cache_mb = 0;
  // GPU decode: MiB of host memory keeping progressive JPEGs re-encoded
  // losslessly as baseline (once, then decoded by the hardware engine;
  // beyond the budget they are decoded on the CPU); 0 = off. Not with the
  // device cache.
  uint64_t transcode_cache_mb = 1024;
  // GPU decode: nvJPEG calls that share one batch's hardware-decoded files,
  // run at once, each with its own decoder, stream and thread; 1..4.
  int nvjpeg_calls = 1;
  // GPU decode: nvJPEG's hardware engine writes only the region of each image
  // the crop reads (the same pixels, a smaller decode buffer); false: whole
  // images.
  bool nvjpeg_region = true;
  // A device ring: the priority of every stream the server's GPU work runs on
  // (decode, augment, copies into the ring; see StreamPriority; Note
  // [Server stream priority], server/src/slot_publisher.h).
  StreamPriority gpu_priority = StreamPriority::kNormal;
  // GPU decode: threads reading the next batch's files at once, 1..64 (the
  // read-ahead thread and a pool; docs/design.md, "Reads at once"); 1: the
  // read-ahead thread alone (tar shards always; Note [Shard reads]).
  int read_threads = 4;
  // Tar shards: samples of the shuffle buffer that mixes the shards' streams
  // (each shard is read front to back); the source holds at most about this
  // many encoded samples plus one batch in memory. 0 or 1: no mixing.
  uint64_t shuffle_buffer = 1000;

  // The output dtype: `dtype`, else its default (see above).
  DType output_dtype() const;
  // Checks ranges and combinations; InvalidArgument naming the option otherwise.
  Status Validate() const;
};

}  // namespace batchcast
