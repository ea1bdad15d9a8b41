#include "batchcast/sources/make_source.h"

#include <thread>

#include "batchcast/sources/synthetic_source.h"
#include "core/src/logging.h"
#include "cuda_image_source.h"
#include "image_source.h"

namespace batchcast {

Result<std::unique_ptr<Source>> MakeSource(const SourceOptions& options) {
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
    Result<std::unique_ptr<Source>> gpu = MakeCudaImageSource(options);
    if (gpu.ok() || options.decode == DecodeMode::kGpu ||
        gpu.status().code() != StatusCode::kUnavailable) {
      return gpu;
    }
    BC_LOG_INFO("--decode auto: decoding on the CPU ({})", gpu.status().message());
  }
  return MakeImageSource(options);
}

}  // namespace batchcast
