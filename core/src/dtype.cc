#include "batchcast/core/dtype.h"

#include <array>
#include <string>

namespace batchcast {
namespace {
struct DTypeInfo {
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"uint8", 1},
    {"int32", 4},
    {"int64", 8},
    {"float16", 2},
    {"bfloat16", 2},
    {"float32", 4},
    {"float64", 8},
    {"int8", 1},
    {"int16", 2},
    {"bool", 1},
}};
}  // namespace

bool IsValidDType(uint8_t raw) { return raw < kNumDTypes; }

size_t DTypeSize(DType dtype) {
  BATCHCAST_CHECK(IsValidDType(static_cast<uint8_t>(dtype)));
  return kInfo[static_cast<size_t>(dtype)].size;
}

std::string_view DTypeName(DType dtype) {
  BATCHCAST_CHECK(IsValidDType(static_cast<uint8_t>(dtype)));
  return kInfo[static_cast<size_t>(dtype)].name;
}

Result<DType> ParseDType(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i) {
    if (kInfo[i].name == name) return static_cast<DType>(i);
  }
  if (name == "float" || name == "fp32") return DType::kFloat32;
  if (name == "half" || name == "fp16") return DType::kFloat16;
  if (name == "bf16") return DType::kBFloat16;
  return InvalidArgumentError("unknown dtype '" + std::string(name) +
                              "' (expected uint8, float16, bfloat16, float32, ...)");
}

}  // namespace batchcast
