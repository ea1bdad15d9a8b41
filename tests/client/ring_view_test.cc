// MappedRing and the host RingView (client/src/ring_view.h) over a shared
// memory ring made here, without a server: mapping checks, zero-copy
// addresses, gathers, and that the host path has nothing to order or wait for.
#include "client/src/ring_view.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "batchcast/cuda/runtime.h"
#include "core/src/host_shm.h"

namespace batchcast::internal {
namespace {

constexpr uint32_t kWindow = 3;
constexpr uint32_t kBatch = 4;

// A WELCOME for a host ring of fields `image` (uint8 [2,3]) and `label`
// (int64), backed by a shared memory object this fixture creates and fills
// with byte i = i % 251.
class HostRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    welcome_.window = kWindow;
    welcome_.producer_batch_size = kBatch;
    welcome_.fields = {FieldSpec{"image", DType::kUInt8, {2, 3}, MemoryKind::kHost},
                       FieldSpec{"label", DType::kInt64, {}, MemoryKind::kHost}};
    Result<RingLayout> layout = RingLayout::Make(welcome_.fields, kWindow, kBatch);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    layout_.emplace(std::move(*layout));
    name_ = "bctest-ring-view-" + std::to_string(getpid());
    const size_t bytes = layout_->allocation_bytes(MemoryKind::kHost);
    Result<std::unique_ptr<HostSharedMemory>> shm = HostSharedMemory::Create(name_, bytes);
    ASSERT_TRUE(shm.ok()) << shm.status().ToString();
    shm_ = std::move(*shm);
    for (size_t i = 0; i < bytes; ++i) shm_->data()[i] = static_cast<uint8_t>(i % 251);
    proto::Allocation a;
    a.kind = MemoryKind::kHost;
    a.bytes = bytes;
    a.shm_name = name_;
    welcome_.rings = {proto::RingInfo{-1, {a}}};
  }
  void TearDown() override { HostSharedMemory::Remove(name_); }

  proto::Welcome welcome_;
  std::optional<RingLayout> layout_;
  std::string name_;
  std::unique_ptr<HostSharedMemory> shm_;
};

TEST_F(HostRingTest, MapsTheAllocationZeroCopy) {
  Result<MappedRing> ring = MappedRing::Map(welcome_);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  const RingView& view = ring->view(MemoryKind::kHost);
  EXPECT_EQ(view.device(), Device::Cpu());
  ASSERT_EQ(ring->views().size(), 1u);
  // Sample 1 of slot 2 of `label` is where the server wrote it.
  const size_t offset = layout_->SampleOffset(1, 2, 1);
  EXPECT_EQ(std::memcmp(view.data() + offset, shm_->data() + offset, 8), 0);
}

TEST_F(HostRingTest, GathersSegmentsIntoAPrivateBuffer) {
  Result<MappedRing> ring = MappedRing::Map(welcome_);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  const RingView& view = ring->view(MemoryKind::kHost);
  // Samples 2..3 of slot 0 then 0..1 of slot 1, field `image` (6 bytes each).
  const std::vector<RingCopy> copies = {{nullptr, layout_->SampleOffset(0, 0, 2), 0, 12},
                                        {nullptr, layout_->SampleOffset(0, 1, 0), 12, 12}};
  Result<void*> buffer = view.Gather(copies, 24, CudaStreamRef());
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  const auto* out = static_cast<const uint8_t*>(*buffer);
  for (const RingCopy& c : copies) {
    EXPECT_EQ(std::memcmp(out + c.dst, shm_->data() + c.src, c.bytes), 0);
  }
  // A private copy: the ring may change under it.
  shm_->data()[copies[0].src] ^= 0xff;
  EXPECT_NE(out[0], shm_->data()[copies[0].src]);
  view.FreeGather(*buffer, {});
}

// Note [Placement]: a second ring (here another host ring standing in for a
// GPU's) is mapped when first asked for, and a gather on the home ring
// copies out of it.
TEST_F(HostRingTest, GathersFromAnotherRingMappedOnFirstUse) {
  const std::string other = name_ + "-1";
  const size_t bytes = layout_->allocation_bytes(MemoryKind::kHost);
  Result<std::unique_ptr<HostSharedMemory>> shm = HostSharedMemory::Create(other, bytes);
  ASSERT_TRUE(shm.ok()) << shm.status().ToString();
  for (size_t i = 0; i < bytes; ++i) (*shm)->data()[i] = static_cast<uint8_t>(i % 13 + 100);
  proto::Allocation a = welcome_.rings[0].allocations[0];
  a.shm_name = other;
  welcome_.rings.push_back(proto::RingInfo{-1, {a}});
  welcome_.home_ring = 0;
  Result<MappedRing> ring = MappedRing::Map(welcome_);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  EXPECT_EQ(ring->ring_count(), 2u);
  Result<const RingView*> peer = ring->view(1, MemoryKind::kHost);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  Result<const RingView*> again = ring->view(1, MemoryKind::kHost);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*peer, *again) << "mapped twice";
  const RingView& home = ring->view(MemoryKind::kHost);
  // A sample of the home ring's slot 0, then one of the other ring's slot 1.
  const std::vector<RingCopy> copies = {{nullptr, layout_->SampleOffset(0, 0, 0), 0, 6},
                                        {*peer, layout_->SampleOffset(0, 1, 0), 6, 6}};
  Result<void*> buffer = home.Gather(copies, 12, CudaStreamRef());
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  const auto* out = static_cast<const uint8_t*>(*buffer);
  EXPECT_EQ(std::memcmp(out, shm_->data() + copies[0].src, 6), 0);
  EXPECT_EQ(std::memcmp(out + 6, (*shm)->data() + copies[1].src, 6), 0);
  home.FreeGather(*buffer, {});
  HostSharedMemory::Remove(other);
}

TEST_F(HostRingTest, HostMemoryHasNothingToOrderOrWaitFor) {
  Result<MappedRing> ring = MappedRing::Map(welcome_);
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  const std::vector<Segment> segments = {Segment{0, 0, 1, 0, 0}, Segment{2, 0, 1, 0, 0}};
  const std::vector<CudaStreamRef> streams = {CudaStreamRef()};
  EXPECT_TRUE(ring->OrderAfterProducer(segments, CudaStreamRef()).ok());
  EXPECT_TRUE(ring->StreamWaitsFor(CudaStreamRef(), CudaStreamRef()).ok());
  EXPECT_TRUE(ring->TokensAfter(streams).empty());  // so a host lease ends at once
}

TEST_F(HostRingTest, RefusesASizeTheLayoutDoesNotExplain) {
  welcome_.rings[0].allocations[0].bytes += 256;
  Result<MappedRing> ring = MappedRing::Map(welcome_);
  ASSERT_FALSE(ring.ok());
  EXPECT_EQ(ring.status().code(), StatusCode::kInternal);
  EXPECT_NE(ring.status().message().find("ring size mismatch"), std::string::npos);
}

TEST_F(HostRingTest, RefusesAFieldWithoutAnAllocation) {
  welcome_.rings[0].allocations.clear();
  Result<MappedRing> ring = MappedRing::Map(welcome_);
  ASSERT_FALSE(ring.ok());
  EXPECT_EQ(ring.status().code(), StatusCode::kInternal);
  EXPECT_NE(ring.status().message().find("field 'image'"), std::string::npos);
}

TEST_F(HostRingTest, MissingSharedMemoryIsNotFound) {
  welcome_.rings[0].allocations[0].shm_name = name_ + "-gone";
  Result<MappedRing> ring = MappedRing::Map(welcome_);
  ASSERT_FALSE(ring.ok());
  EXPECT_EQ(ring.status().code(), StatusCode::kNotFound);
}

TEST(CudaRingView, RefusedWithAClearReasonWhereItCannotMap) {
  // A CUDA allocation with the wrong number of slot events: without CUDA the
  // build says it cannot map device memory at all; with CUDA the count is
  // checked before any driver call.
  proto::Allocation a;
  a.kind = MemoryKind::kCuda;
  a.device_index = 0;
  a.event_handles.resize(kWindow - 1);
  Result<std::unique_ptr<RingView>> view = MapCudaRing(a, kWindow);
  ASSERT_FALSE(view.ok());
  if (cuda::BuiltWithCuda()) {
    EXPECT_EQ(view.status().code(), StatusCode::kInternal);
    EXPECT_NE(view.status().message().find("slot events"), std::string::npos);
  } else {
    EXPECT_EQ(view.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(view.status().message().find("without CUDA"), std::string::npos);
  }
}

}  // namespace
}  // namespace batchcast::internal
