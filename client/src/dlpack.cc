// Batch::ToDLPack: a standard DLPack tensor that keeps the batch (and so its
// lease, Note [Leases]) alive until its deleter runs.
#include <dlpack/dlpack.h>

#include "connection.h"

namespace batchcast {
namespace {

DLDataType ToDLDataType(DType dtype) {
  DLDataType t{};
  t.lanes = 1;
  t.bits = static_cast<uint8_t>(DTypeSize(dtype) * 8);
  switch (dtype) {
    case DType::kUInt8: t.code = kDLUInt; break;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64: t.code = kDLInt; break;
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64: t.code = kDLFloat; break;
    case DType::kBFloat16: t.code = kDLBfloat; break;
    case DType::kBool:
#if defined(DLPACK_VERSION) && DLPACK_VERSION >= 80
      t.code = kDLBool;
#else
      t.code = kDLUInt;  // DLPack < 0.8 has no boolean type code
#endif
      break;
  }
  return t;
}

struct DLPackContext {
  std::shared_ptr<internal::BatchState> state;
  std::vector<int64_t> shape;
  DLManagedTensor tensor{};
};

void DeleteDLPack(DLManagedTensor* t) {
  delete static_cast<DLPackContext*>(t->manager_ctx);
}

}  // namespace

Result<DLManagedTensor*> Batch::ToDLPack(std::string_view name) const {
  BATCHCAST_ASSIGN_OR_RETURN(FieldView view, field(name));
  auto* ctx = new DLPackContext();
  ctx->state = state_;
  ctx->shape = view.shape;
  DLTensor& t = ctx->tensor.dl_tensor;
  t.data = const_cast<void*>(view.data);
  t.device = view.device.kind == MemoryKind::kCuda
                 ? DLDevice{kDLCUDA, view.device.index}
                 : DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int>(ctx->shape.size());
  t.dtype = ToDLDataType(view.dtype);
  t.shape = ctx->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  ctx->tensor.manager_ctx = ctx;
  ctx->tensor.deleter = DeleteDLPack;
  return &ctx->tensor;
}

}  // namespace batchcast
