// Devices of batchcast/cuda/runtime.h (CUDA builds): what this build has, which
// devices exist, DeviceGuard, memory info.
#include <cuda_runtime_api.h>

#include <string>

#include "batchcast/cuda/check.h"
#include "batchcast/cuda/runtime.h"

namespace batchcast::cuda {

bool BuiltWithCuda() { return true; }

bool BuiltWithNvJpeg() {
#ifdef BATCHCAST_HAVE_NVJPEG
  return true;
#else
  return false;
#endif
}

Result<int> DeviceCount() {
  int n = 0;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaGetDeviceCount(&n)));
  if (n == 0) return UnavailableError("no CUDA device is visible");
  return n;
}

Status CheckDevice(int device) {
  BATCHCAST_ASSIGN_OR_RETURN(int n, DeviceCount());
  if (device < 0 || device >= n) {
    return InvalidArgumentError("no CUDA device " + std::to_string(device) + ": " +
                                std::to_string(n) +
                                " visible (cuda:0 .. cuda:" + std::to_string(n - 1) + ")");
  }
  return Status::Ok();
}

Result<int> CurrentDevice() {
  int device = -1;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaGetDevice(&device)));
  return device;
}

std::string DeviceDescription(int device) {
  cudaDeviceProp p{};
  Status s = BATCHCAST_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  if (!s.ok()) return s.ToString();
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.multiProcessorCount) + " SMs, " + std::to_string(p.totalGlobalMem >> 20) +
         " MiB)";
}

DeviceGuard::DeviceGuard(int device) {
  status_ = BATCHCAST_CUDA_CHECK(cudaGetDevice(&previous_));
  if (!status_.ok()) return;
  if (previous_ != device) {
    status_ = BATCHCAST_CUDA_CHECK(cudaSetDevice(device));
    restore_ = status_.ok();
  }
}

DeviceGuard::~DeviceGuard() {
  if (restore_) (void)cudaSetDevice(previous_);
}

Result<MemInfo> GetMemInfo(int device) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  MemInfo m;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaMemGetInfo(&m.free, &m.total)));
  return m;
}

}  // namespace batchcast::cuda
