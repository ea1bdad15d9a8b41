// The augmentation kernel's launcher for builds without CUDA.
#include "batchcast/cuda_image/augment.h"

namespace batchcast::cuda {

Status AugmentAsync(const AugmentSample*, int, const AugmentParams&, CudaStreamRef) {
  return UnavailableError("this build of batchcast has no CUDA support");
}

}  // namespace batchcast::cuda
