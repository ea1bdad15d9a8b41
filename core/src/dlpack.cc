#include "core/src/dlpack.h"

#include <vector>

namespace batchcast {
namespace {

// What a tensor of MakeDLManagedTensor owns: its shape and the keep-alive.
struct ManagedContext {
  std::shared_ptr<const void> keep_alive;
  std::vector<int64_t> shape;
  DLManagedTensor tensor{};
};

void DeleteManagedContext(DLManagedTensor* t) {
  delete static_cast<ManagedContext*>(t->manager_ctx);
}

}  // namespace

#if defined(DLPACK_VERSION) && DLPACK_VERSION >= 80
constexpr bool kHasBool = true;
constexpr uint8_t kBoolCode = kDLBool;
#else
constexpr bool kHasBool = false;
constexpr uint8_t kBoolCode = kDLUInt;  // DLPack < 0.8 has no boolean type code
#endif

bool DLPackHasBool() { return kHasBool; }

DLDataType ToDLDataType(DType dtype) {
  DLDataType t{};
  t.lanes = 1;
  t.bits = static_cast<uint8_t>(DTypeSize(dtype) * 8);
  t.code = kDLUInt;
  switch (dtype) {
    case DType::kUInt8:
      break;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      t.code = kDLInt;
      break;
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      t.code = kDLFloat;
      break;
    case DType::kBFloat16:
      t.code = kDLBfloat;
      break;
    case DType::kBool:
      t.code = kBoolCode;
      break;
  }
  return t;
}

DLDevice ToDLDevice(Device device) {
  return device.is_cuda() ? DLDevice{kDLCUDA, device.index} : DLDevice{kDLCPU, 0};
}

DLManagedTensor* MakeDLManagedTensor(void* data, std::span<const int64_t> shape, DType dtype,
                                     Device device, std::shared_ptr<const void> keep_alive) {
  auto* ctx = new ManagedContext();
  ctx->keep_alive = std::move(keep_alive);
  ctx->shape.assign(shape.begin(), shape.end());
  DLTensor& t = ctx->tensor.dl_tensor;
  t.data = data;
  t.device = ToDLDevice(device);
  t.ndim = static_cast<int>(ctx->shape.size());
  t.dtype = ToDLDataType(dtype);
  t.shape = ctx->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  ctx->tensor.manager_ctx = ctx;
  ctx->tensor.deleter = DeleteManagedContext;
  return &ctx->tensor;
}

}  // namespace batchcast
