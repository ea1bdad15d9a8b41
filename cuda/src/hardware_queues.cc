#include "batchcast/cuda/hardware_queues.h"

#include <cctype>
#include <cstdlib>
#include <string>

namespace batchcast::cuda {

int HardwareQueuesFor(std::optional<std::string_view> value) {
  // No blanks around the number (strtol would skip leading ones).
  if (!value || value->empty() || std::isspace(static_cast<unsigned char>(value->front()))) {
    return kDefaultHardwareQueues;
  }
  const std::string text(*value);
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() + text.size() || n < 1 || n > kMaxHardwareQueues) {
    return kDefaultHardwareQueues;
  }
  return static_cast<int>(n);
}

int HardwareQueues() {
  const char* value = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  return HardwareQueuesFor(value == nullptr ? std::nullopt
                                            : std::optional<std::string_view>(value));
}

}  // namespace batchcast::cuda
