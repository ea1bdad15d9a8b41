// The augmentation kernel's launcher for builds without CUDA.
#include "batchcast/core/cuda/augment.h"

namespace batchcast::cuda {

Status AugmentAsync(const AugmentSample*, int, const AugmentParams&, void*) {
  return UnavailableError("this build of batchcast has no CUDA support");
}

}  // namespace batchcast::cuda
