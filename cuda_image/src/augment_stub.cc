// The augmentation kernel's launcher for builds without CUDA.
#include "batchcast/cuda/check.h"
#include "batchcast/cuda_image/augment.h"

namespace batchcast::cuda {

Status AugmentAsync(const AugmentSample*, int, const AugmentParams&, CudaStreamRef) {
  return internal::NotBuiltError("CUDA support");
}

}  // namespace batchcast::cuda
