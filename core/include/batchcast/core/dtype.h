// Element types of sample fields, with their sizes, names and DLPack codes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast {

// Numeric values travel on the wire: never renumber.
enum class DType : uint8_t {
  kUInt8 = 0,
  kInt32 = 1,
  kInt64 = 2,
  kFloat16 = 3,
  kBFloat16 = 4,
  kFloat32 = 5,
  kFloat64 = 6,
  kInt8 = 7,
  kInt16 = 8,
  kBool = 9,
};
inline constexpr int kNumDTypes = 10;

size_t DTypeSize(DType dtype);
// "uint8", "float16", ... (the names torch and numpy use).
std::string_view DTypeName(DType dtype);
Result<DType> ParseDType(std::string_view name);
bool IsValidDType(uint8_t raw);

}  // namespace batchcast
