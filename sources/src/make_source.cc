#include "batchcast/sources/make_source.h"

#include <thread>

#include "batchcast/core/check.h"
#include "batchcast/sources/synthetic_source.h"
#include "core/src/logging.h"
#include "cuda_image_source.h"
#include "image_source.h"

namespace batchcast {

namespace {

// MakeSource, over the dataset `share` holds (scanned here when it holds none).
Result<std::unique_ptr<Source>> MakeSharing(const SourceOptions& options, DatasetShare* share) {
  BATCHCAST_RETURN_IF_ERROR(options.Validate());
  if (options.synthetic > 0) {
    const int workers = options.workers > 0
                            ? options.workers
                            : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    return std::unique_ptr<Source>(new SyntheticSource(options.synthetic, options.size, workers));
  }
  // GPU decode (nvJPEG + the fused kernel) needs a device ring; --decode auto
  // takes it when this build and the device allow, else the CPU pipeline.
  // Rings after a first one that fell back to the CPU (--decode auto) decode
  // on the CPU too: their shared scan did not pick the GPU's files.
  const bool scanned_for_cpu = share != nullptr && share->dataset != nullptr && !share->for_gpu;
  if (scanned_for_cpu && options.device.is_cuda() && options.decode == DecodeMode::kAuto) {
    BC_LOG_INFO("--decode auto: {} decodes on the CPU too, as the first ring does",
                DeviceName(options.device));
  } else if (options.device.is_cuda() && options.decode != DecodeMode::kCpu) {
    Result<std::unique_ptr<Source>> gpu = MakeCudaImageSource(options, share);
    if (gpu.ok() || options.decode == DecodeMode::kGpu ||
        gpu.status().code() != StatusCode::kUnavailable) {
      return gpu;
    }
    BC_LOG_INFO("--decode auto: decoding on the CPU ({})", gpu.status().message());
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
  std::vector<std::unique_ptr<Source>> sources;
  for (const Device& device : devices) {
    SourceOptions o = options;
    o.device = device;
    Result<std::unique_ptr<Source>> source = MakeSharing(o, &share);
    if (!source.ok() && device.is_cuda()) return source.status().WithContext(DeviceName(device));
    if (!source.ok()) return source.status();
    sources.push_back(std::move(*source));
  }
  return sources;
}

}  // namespace batchcast
