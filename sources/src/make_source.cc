#include "batchcast/sources/make_source.h"

#include <optional>
#include <thread>

#include "batchcast/core/check.h"
#include "batchcast/sources/synthetic_source.h"
#include "core/src/logging.h"
#include "cuda_image_source.h"
#include "image_source.h"

namespace batchcast {

namespace {

// MakeSource, over the dataset `share` holds (scanned here when it holds
// none). `first_on_gpu`: how the first of several rings decodes, which the
// others follow under --decode auto, since a server's rings write their slots
// alike (SlotWriter): after a first ring on the CPU they take the CPU
// pipeline; after one on its GPU a GPU they cannot use is an error.
Result<std::unique_ptr<Source>> MakeSharing(const SourceOptions& options, DatasetShare* share,
                                            std::optional<bool> first_on_gpu = std::nullopt) {
  BATCHCAST_RETURN_IF_ERROR(options.Validate());
  if (options.synthetic > 0) {
    const int workers = options.workers > 0
                            ? options.workers
                            : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    return std::unique_ptr<Source>(new SyntheticSource(options.synthetic, options.size, workers));
  }
  // GPU decode (nvJPEG + the fused kernel) needs a device ring; --decode auto
  // takes it when this build and the device allow, else the CPU pipeline.
  if (options.device.is_cuda() && options.decode != DecodeMode::kCpu) {
    if (first_on_gpu == false && options.decode == DecodeMode::kAuto) {
      BC_LOG_INFO("--decode auto: {} decodes on the CPU too, as the first ring does",
                  DeviceName(options.device));
    } else {
      Result<std::unique_ptr<Source>> gpu = MakeCudaImageSource(options, share);
      if (gpu.ok() || options.decode == DecodeMode::kGpu ||
          gpu.status().code() != StatusCode::kUnavailable || first_on_gpu == true) {
        return gpu;
      }
      BC_LOG_INFO("--decode auto: decoding on the CPU ({})", gpu.status().message());
    }
  }
  return MakeImageSource(options, nullptr, share);
}

}  // namespace

Result<std::unique_ptr<Source>> MakeSource(const SourceOptions& options) {
  return MakeSharing(options, nullptr);
}

Result<std::vector<std::unique_ptr<Source>>> MakeSources(const SourceOptions& options,
                                                         std::span<const Device> devices) {
  BATCHCAST_CHECK(!devices.empty());
  DatasetShare share;
  share.rings = static_cast<uint32_t>(devices.size());
  std::optional<bool> first_on_gpu;
  std::vector<std::unique_ptr<Source>> sources;
  for (const Device& device : devices) {
    SourceOptions o = options;
    o.device = device;
    Result<std::unique_ptr<Source>> source = MakeSharing(o, &share, first_on_gpu);
    if (!source.ok() && device.is_cuda()) return source.status().WithContext(DeviceName(device));
    if (!source.ok()) return source.status();
    if (!first_on_gpu) first_on_gpu = (*source)->output_memory() == MemoryKind::kCuda;
    sources.push_back(std::move(*source));
  }
  return sources;
}

}  // namespace batchcast
