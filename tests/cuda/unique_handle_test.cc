// UniqueHandle<Traits> (batchcast/cuda/unique_handle.h), the owner inside every
// CUDA RAII type: each resource is destroyed exactly once, moves leave the
// source null, and the null handle is never destroyed. Runs without a GPU (a
// fake traits type), plus the null states of the CUDA types themselves.
#include "batchcast/cuda/unique_handle.h"

#include <gtest/gtest.h>

#include <type_traits>
#include <utility>
#include <vector>

#include "batchcast/cuda/runtime.h"

namespace batchcast::cuda {
namespace {

std::vector<int> destroyed;  // ids passed to FakeTraits::Destroy, in order

struct FakeTraits {
  struct Handle {
    int id = 0;  // 0: null
    int device = -1;
  };
  static bool IsNull(const Handle& h) { return h.id == 0; }
  static void Destroy(const Handle& h) noexcept { destroyed.push_back(h.id); }
};
using Fake = UniqueHandle<FakeTraits>;

class UniqueHandleTest : public ::testing::Test {
 protected:
  void SetUp() override { destroyed.clear(); }
};

TEST_F(UniqueHandleTest, DestroysOnceAtScopeEndAndNeverTheNullHandle) {
  {
    Fake empty;
    EXPECT_FALSE(empty);
    Fake owner(FakeTraits::Handle{7, 2});
    EXPECT_TRUE(owner);
    EXPECT_EQ(owner->device, 2);
  }
  EXPECT_EQ(destroyed, std::vector<int>{7});
}

TEST_F(UniqueHandleTest, MoveConstructionLeavesTheSourceNull) {
  Fake a(FakeTraits::Handle{1, 3});
  Fake b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the state is specified
  EXPECT_EQ(a->device, -1);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->id, 1);
  EXPECT_TRUE(destroyed.empty());
  b.reset();
  EXPECT_FALSE(b);
  EXPECT_EQ(destroyed, std::vector<int>{1});
}

TEST_F(UniqueHandleTest, MoveAssignmentDestroysTheTargetsOldResource) {
  Fake a(FakeTraits::Handle{1, 0});
  Fake b(FakeTraits::Handle{2, 0});
  b = std::move(a);
  EXPECT_EQ(destroyed, std::vector<int>{2});  // b's old resource, once
  EXPECT_FALSE(a);                            // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b->id, 1);
  Fake c;
  c = std::move(b);  // into a null handle: nothing to destroy
  EXPECT_EQ(destroyed, std::vector<int>{2});
  EXPECT_EQ(c->id, 1);
}

TEST_F(UniqueHandleTest, SelfMoveKeepsTheResource) {
  Fake a(FakeTraits::Handle{5, 0});
  Fake& alias = a;
  a = std::move(alias);
  EXPECT_TRUE(a);
  EXPECT_TRUE(destroyed.empty());
}

TEST_F(UniqueHandleTest, ReleaseGivesUpOwnership) {
  Fake a(FakeTraits::Handle{9, 4});
  const FakeTraits::Handle h = a.release();
  EXPECT_EQ(h.id, 9);
  EXPECT_FALSE(a);
  a.reset();
  EXPECT_TRUE(destroyed.empty());
}

TEST_F(UniqueHandleTest, StateTravelsWithTheResource) {
  Fake a(FakeTraits::Handle{3, 0});
  a.mutable_handle()->device = 6;  // e.g. Event's `exported` flag
  Fake b = std::move(a);
  EXPECT_EQ(b->device, 6);
}

// The CUDA types built on it are move-only through it (they declare no moves
// of their own), with moves that cannot throw (so containers move them); an
// IpcMapping, shared through OpenIpcMemory, is not even movable. Only their
// factories make them from a raw handle.
template <typename T>
constexpr bool kMoveOnly =
    std::is_nothrow_move_constructible_v<T>&& std::is_nothrow_move_assignable_v<T> &&
    !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T>;
static_assert(kMoveOnly<Stream> && kMoveOnly<Event> && kMoveOnly<DeviceBuffer> &&
              kMoveOnly<PinnedBuffer>);
static_assert(!std::is_move_constructible_v<IpcMapping> &&
              !std::is_default_constructible_v<IpcMapping>);
static_assert(!std::is_constructible_v<Stream, const internal::StreamTraits::Handle&>);
static_assert(!std::is_constructible_v<DeviceBuffer, const internal::DeviceBufferTraits::Handle&>);

// The CUDA types built on it, in their null (default or moved-from) state:
// nothing to release, in CUDA builds and stub builds alike.
TEST(CudaHandles, DefaultAndMovedFromObjectsAreEmpty) {
  Stream s;
  EXPECT_TRUE(s.ref().is_legacy_default());
  EXPECT_EQ(s.device(), -1);
  Event e;
  EXPECT_FALSE(e.valid());
  EXPECT_EQ(e.handle(), nullptr);
  Event e2 = std::move(e);
  EXPECT_FALSE(e2.valid());
  DeviceBuffer d;
  EXPECT_EQ(d.data(), nullptr);
  EXPECT_EQ(d.size(), 0u);
  DeviceBuffer d2;
  d2 = std::move(d);
  EXPECT_EQ(d2.device(), -1);
  PinnedBuffer p;
  EXPECT_EQ(p.data(), nullptr);
  EXPECT_EQ(p.size(), 0u);
}

// Without a usable device (or without CUDA in this build) creation fails with
// a Status instead of handing out an object.
TEST(CudaHandles, CreateWithoutADeviceIsAnError) {
  if (DeviceCount().ok()) GTEST_SKIP() << "a CUDA device is usable here";
  EXPECT_FALSE(Stream::Create(0).ok());
  EXPECT_FALSE(Event::Create(0).ok());
  EXPECT_FALSE(DeviceBuffer::Create(0, 16).ok());
}

}  // namespace
}  // namespace batchcast::cuda
