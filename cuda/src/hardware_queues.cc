#include "batchcast/cuda/hardware_queues.h"

#include <cctype>
#include <cstdlib>

namespace batchcast::cuda {

int HardwareQueues() {
  const char* value = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  // No blanks around the number (strtol would skip leading ones), as
  // python/batchcast/_queues.py's parse().
  if (value == nullptr || *value == '\0' || std::isspace(static_cast<unsigned char>(*value))) {
    return kDefaultHardwareQueues;
  }
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (*end != '\0' || n < 1 || n > kMaxHardwareQueues) return kDefaultHardwareQueues;
  return static_cast<int>(n);
}

}  // namespace batchcast::cuda
