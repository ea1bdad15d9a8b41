#include "batchcast/core/field_spec.h"

namespace batchcast {

Result<Device> ParseDevice(std::string_view text) {
  if (text == "cpu") return Device::Cpu();
  if (text.starts_with("cuda:") && text.size() > 5 && text.size() <= 10 &&
      text.find_first_not_of("0123456789", 5) == std::string_view::npos) {
    const int index = std::stoi(std::string(text.substr(5)));
    if (index < 65536) return Device::Cuda(index);
  }
  return InvalidArgumentError("device must be cpu or cuda:N, got '" + std::string(text) + "'");
}

std::string DeviceName(Device device) {
  return device.is_cuda() ? "cuda:" + std::to_string(device.index) : std::string("cpu");
}

int64_t FieldSpec::elements_per_sample() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t FieldSpec::bytes_per_sample() const {
  return static_cast<size_t>(elements_per_sample()) * DTypeSize(dtype);
}

}  // namespace batchcast
