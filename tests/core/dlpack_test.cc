// The one DLPack conversion (core/src/dlpack.h), used by Batch::ToDLPack and
// by the bindings' WriteSlot.field_dlpack.
#include "core/src/dlpack.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace batchcast {
namespace {

TEST(DLPack, DataTypes) {
  struct Case {
    DType dtype;
    uint8_t code;
    uint8_t bits;
  };
  const Case cases[] = {
      {DType::kUInt8, kDLUInt, 8},       {DType::kInt8, kDLInt, 8},
      {DType::kInt16, kDLInt, 16},       {DType::kInt32, kDLInt, 32},
      {DType::kInt64, kDLInt, 64},       {DType::kFloat16, kDLFloat, 16},
      {DType::kFloat32, kDLFloat, 32},   {DType::kFloat64, kDLFloat, 64},
      {DType::kBFloat16, kDLBfloat, 16},
  };
  for (const Case& c : cases) {
    const DLDataType t = ToDLDataType(c.dtype);
    EXPECT_EQ(t.code, c.code) << DTypeName(c.dtype);
    EXPECT_EQ(t.bits, c.bits) << DTypeName(c.dtype);
    EXPECT_EQ(t.lanes, 1) << DTypeName(c.dtype);
  }
}

TEST(DLPack, BoolIsBoolWhereDLPackHasIt) {
  const DLDataType t = ToDLDataType(DType::kBool);
  EXPECT_EQ(t.bits, 8);
  EXPECT_EQ(t.lanes, 1);
#if defined(DLPACK_VERSION) && DLPACK_VERSION >= 80
  EXPECT_TRUE(DLPackHasBool());
  EXPECT_EQ(t.code, kDLBool);
#else
  EXPECT_FALSE(DLPackHasBool());
  EXPECT_EQ(t.code, kDLUInt);
#endif
}

TEST(DLPack, Devices) {
  const DLDevice cpu = ToDLDevice(Device::Cpu());
  EXPECT_EQ(cpu.device_type, kDLCPU);
  EXPECT_EQ(cpu.device_id, 0);
  const DLDevice gpu = ToDLDevice(Device::Cuda(3));
  EXPECT_EQ(gpu.device_type, kDLCUDA);
  EXPECT_EQ(gpu.device_id, 3);
}

TEST(DLPack, ManagedTensorViewsTheDataAndKeepsItsOwnerUntilDeleted) {
  auto owner = std::make_shared<std::vector<float>>(6, 1.5f);
  std::weak_ptr<std::vector<float>> watch = owner;
  std::vector<int64_t> shape = {2, 3};
  DLManagedTensor* t =
      MakeDLManagedTensor(owner->data(), shape, DType::kFloat32, Device::Cpu(), owner);
  owner.reset();
  shape.assign({9, 9});  // the tensor has its own copy of the shape
  ASSERT_FALSE(watch.expired());
  const DLTensor& d = t->dl_tensor;
  EXPECT_EQ(d.data, watch.lock()->data());
  EXPECT_EQ(d.ndim, 2);
  EXPECT_EQ(d.shape[0], 2);
  EXPECT_EQ(d.shape[1], 3);
  EXPECT_EQ(d.strides, nullptr);
  EXPECT_EQ(d.byte_offset, 0u);
  EXPECT_EQ(d.dtype.code, kDLFloat);
  EXPECT_EQ(d.device.device_type, kDLCPU);
  t->deleter(t);
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace batchcast
