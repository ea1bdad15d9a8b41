// CudaStatus of batchcast/cuda/check.h (CUDA builds): a cudaError_t as a Status.
#include "batchcast/cuda/check.h"

#include <cuda_runtime_api.h>

#include <string>

namespace batchcast::cuda::internal {

Status CudaStatus(int error, const char* expression, const char* file, int line) {
  if (error == cudaSuccess) return Status::Ok();
  const auto e = static_cast<cudaError_t>(error);
  (void)cudaGetLastError();  // clear the (non-sticky) error state
  std::string message = CheckMessage(
      expression, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e), file, line);
  switch (e) {
    case cudaErrorMemoryAllocation:
      return ResourceExhaustedError(std::move(message));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCudartUnloading:
      return UnavailableError(std::move(message));
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidDevicePointer:
      return InvalidArgumentError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

}  // namespace batchcast::cuda::internal
