// FieldSpec: the fixed per-sample shape and type of one field of a sample.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "batchcast/core/dtype.h"
#include "batchcast/core/status.h"

namespace batchcast {

// Where ring memory lives. Numeric values travel on the wire.
enum class MemoryKind : uint8_t {
  kHost = 0,  // POSIX shared memory
  kCuda = 1,  // one cudaMalloc allocation shared through CUDA IPC
};

// Device of a memory region as DLPack understands it: {kHost, -1} or {kCuda, N}.
struct Device {
  MemoryKind kind = MemoryKind::kHost;
  int index = -1;
  bool operator==(const Device&) const = default;

  static constexpr Device Cpu() { return Device{}; }
  static constexpr Device Cuda(int index) { return Device{MemoryKind::kCuda, index}; }
  bool is_cuda() const { return kind == MemoryKind::kCuda; }
};

// "cpu" or "cuda:N" (N a device number below 65536); InvalidArgument otherwise.
Result<Device> ParseDevice(std::string_view text);
// "cpu" or "cuda:N".
std::string DeviceName(Device device);

struct FieldSpec {
  std::string name;  // "image", "label", ...
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;  // per sample, e.g. {3, 224, 224}; {} is a scalar
  MemoryKind memory = MemoryKind::kHost;

  int64_t elements_per_sample() const;
  size_t bytes_per_sample() const;
  bool operator==(const FieldSpec&) const = default;
};

}  // namespace batchcast
