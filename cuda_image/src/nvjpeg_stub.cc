// NvJpegDecoder for builds without nvJPEG: Create() says why it is missing.
#include "batchcast/cuda/check.h"
#include "batchcast/cuda_image/nvjpeg.h"

namespace batchcast::cuda {

namespace internal {
Status NvJpegStatus(int error, const char* expression, const char* file, int line) {
  if (error == 0) return Status::Ok();
  return InternalError(
      CheckMessage(expression, "nvJPEG status " + std::to_string(error), file, line));
}
}  // namespace internal

struct NvJpegDecoder::Impl {};

Result<std::unique_ptr<NvJpegDecoder>> NvJpegDecoder::Create(int, const Options&) {
  return internal::NotBuiltError(
      "nvJPEG (the CUDA toolkit it was built with lacks it): use --decode cpu");
}
NvJpegDecoder::~NvJpegDecoder() = default;
std::string NvJpegDecoder::backend_name() const { return "none"; }
bool NvJpegDecoder::Supports(std::span<const uint8_t>) { return false; }
Status NvJpegDecoder::DecodeBatch(int, std::span<const std::span<const uint8_t>>,
                                  std::span<const Output>, CudaStreamRef) {
  return internal::NotBuiltError("nvJPEG");
}

}  // namespace batchcast::cuda
