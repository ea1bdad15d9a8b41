// Tests of batchcast::RingLayout: alignment, disjointness of every (field, slot)
// byte range, allocation sizes, FindField and the errors of Make().
#include "core/src/ring_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace batchcast {
namespace {

size_t AlignUp(size_t n) { return (n + 255) / 256 * 256; }

std::vector<FieldSpec> ImageLabel() {
  return {FieldSpec{"image", DType::kFloat16, {3, 224, 224}, MemoryKind::kCuda},
          FieldSpec{"label", DType::kInt64, {}, MemoryKind::kHost}};
}

// Several fields per memory kind, with per-sample sizes that are not multiples
// of the alignment (so that padding matters).
std::vector<FieldSpec> Mixed() {
  return {
      FieldSpec{"image", DType::kUInt8, {3, 17, 13}, MemoryKind::kHost},
      FieldSpec{"label", DType::kInt64, {}, MemoryKind::kHost},
      FieldSpec{"mask", DType::kBool, {7}, MemoryKind::kHost},
      FieldSpec{"gpu_a", DType::kFloat32, {5, 3}, MemoryKind::kCuda},
      FieldSpec{"gpu_b", DType::kBFloat16, {1}, MemoryKind::kCuda},
      FieldSpec{"weight", DType::kFloat64, {2, 2}, MemoryKind::kHost},
      FieldSpec{"gpu_c", DType::kInt16, {3, 1, 3}, MemoryKind::kCuda},
  };
}

// Checks the invariants of a layout: every (field, slot) range is aligned,
// inside its allocation, large enough for batch_size samples, and disjoint from
// every other range of the same memory kind.
void CheckLayout(const RingLayout& layout) {
  struct Range {
    size_t begin, end;
    size_t field;
    uint32_t slot;
  };
  std::vector<Range> ranges[2];
  size_t expected_bytes[2] = {0, 0};
  for (size_t f = 0; f < layout.fields().size(); ++f) {
    const FieldSpec& spec = layout.fields()[f];
    const size_t kind = static_cast<size_t>(spec.memory);
    const size_t per_slot = spec.bytes_per_sample() * layout.batch_size();
    EXPECT_EQ(layout.field_slot_stride(f), AlignUp(per_slot)) << spec.name;
    EXPECT_EQ(layout.field_slot_stride(f) % kRingAlignment, 0u);
    expected_bytes[kind] += AlignUp(per_slot) * layout.slots();
    for (uint32_t k = 0; k < layout.slots(); ++k) {
      const size_t begin = layout.SampleOffset(f, k, 0);
      EXPECT_EQ(begin % kRingAlignment, 0u) << spec.name << " slot " << k;
      // Samples are contiguous inside a slot.
      for (uint32_t i = 0; i <= layout.batch_size(); ++i) {
        ASSERT_EQ(layout.SampleOffset(f, k, i), begin + i * spec.bytes_per_sample());
      }
      const size_t end = layout.SampleOffset(f, k, layout.batch_size());
      EXPECT_EQ(end - begin, per_slot);
      EXPECT_LE(end, layout.allocation_bytes(spec.memory)) << spec.name << " slot " << k;
      // Slots of one field are one stride apart (the window's, and the extra
      // ones after every field's window slots).
      if (k > 0 && k != layout.window()) {
        EXPECT_EQ(begin - layout.SampleOffset(f, k - 1, 0), layout.field_slot_stride(f));
      }
      ranges[kind].push_back({begin, end, f, k});
    }
  }
  for (const auto& list : ranges) {
    for (size_t a = 0; a < list.size(); ++a) {
      for (size_t b = a + 1; b < list.size(); ++b) {
        const bool disjoint = list[a].end <= list[b].begin || list[b].end <= list[a].begin;
        ASSERT_TRUE(disjoint) << "field " << list[a].field << " slot " << list[a].slot << " ["
                              << list[a].begin << "," << list[a].end << ") overlaps field "
                              << list[b].field << " slot " << list[b].slot << " [" << list[b].begin
                              << "," << list[b].end << ")";
      }
    }
  }
  EXPECT_EQ(layout.allocation_bytes(MemoryKind::kHost), expected_bytes[0]);
  EXPECT_EQ(layout.allocation_bytes(MemoryKind::kCuda), expected_bytes[1]);
}

TEST(RingLayoutTest, ImageLabel) {
  Result<RingLayout> r = RingLayout::Make(ImageLabel(), 8, 256);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const RingLayout& layout = *r;
  EXPECT_EQ(layout.window(), 8u);
  EXPECT_EQ(layout.batch_size(), 256u);
  EXPECT_EQ(layout.fields(), ImageLabel());
  // image: 3*224*224*2 = 301056 bytes per sample, a multiple of 256.
  EXPECT_EQ(layout.field_slot_stride(0), 301056u * 256);
  EXPECT_EQ(layout.allocation_bytes(MemoryKind::kCuda), 301056u * 256 * 8);
  // label: 8 bytes * 256 = 2048.
  EXPECT_EQ(layout.field_slot_stride(1), 2048u);
  EXPECT_EQ(layout.allocation_bytes(MemoryKind::kHost), 2048u * 8);
  EXPECT_EQ(layout.SampleOffset(0, 0, 0), 0u);
  EXPECT_EQ(layout.SampleOffset(1, 0, 0), 0u);  // each kind has its own allocation
  EXPECT_EQ(layout.SampleOffset(1, 3, 5), 3u * 2048 + 5 * 8);
  CheckLayout(layout);
}

TEST(RingLayoutTest, ManyShapesNeverOverlap) {
  const uint32_t windows[] = {1, 2, 3, 7, 16};
  const uint32_t batches[] = {1, 2, 3, 5, 31, 64, 100};
  for (uint32_t w : windows) {
    for (uint32_t b : batches) {
      SCOPED_TRACE("window " + std::to_string(w) + " batch " + std::to_string(b));
      Result<RingLayout> r = RingLayout::Make(Mixed(), w, b);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      CheckLayout(*r);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(RingLayoutTest, PaddingIsAppliedPerSlot) {
  // 1 byte per sample, batch 3: a slot needs 3 bytes but occupies 256.
  Result<RingLayout> r = RingLayout::Make({FieldSpec{"b", DType::kUInt8, {1}, MemoryKind::kHost},
                                           FieldSpec{"c", DType::kUInt8, {}, MemoryKind::kHost}},
                                          4, 3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->field_slot_stride(0), 256u);
  EXPECT_EQ(r->SampleOffset(0, 1, 0), 256u);
  EXPECT_EQ(r->SampleOffset(1, 0, 0), 4u * 256);
  EXPECT_EQ(r->allocation_bytes(MemoryKind::kHost), 8u * 256);
  EXPECT_EQ(r->allocation_bytes(MemoryKind::kCuda), 0u);
  CheckLayout(*r);
}

TEST(RingLayoutTest, UnusedKindHasNoAllocation) {
  Result<RingLayout> host_only =
      RingLayout::Make({FieldSpec{"label", DType::kInt64, {}, MemoryKind::kHost}}, 2, 2);
  ASSERT_TRUE(host_only.ok());
  EXPECT_EQ(host_only->allocation_bytes(MemoryKind::kCuda), 0u);
  EXPECT_EQ(host_only->allocation_bytes(MemoryKind::kHost), 512u);
  Result<RingLayout> cuda_only =
      RingLayout::Make({FieldSpec{"x", DType::kFloat32, {4}, MemoryKind::kCuda}}, 2, 2);
  ASSERT_TRUE(cuda_only.ok());
  EXPECT_EQ(cuda_only->allocation_bytes(MemoryKind::kHost), 0u);
  EXPECT_EQ(cuda_only->allocation_bytes(MemoryKind::kCuda), 512u);
}

TEST(RingLayoutTest, IsAPureFunctionOfItsInputs) {
  Result<RingLayout> a = RingLayout::Make(Mixed(), 5, 33);
  Result<RingLayout> b = RingLayout::Make(Mixed(), 5, 33);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t f = 0; f < Mixed().size(); ++f) {
    EXPECT_EQ(a->field_slot_stride(f), b->field_slot_stride(f));
    for (uint32_t k = 0; k < 5; ++k) EXPECT_EQ(a->SampleOffset(f, k, 7), b->SampleOffset(f, k, 7));
  }
  EXPECT_EQ(a->allocation_bytes(MemoryKind::kHost), b->allocation_bytes(MemoryKind::kHost));
}

TEST(RingLayoutTest, FindField) {
  Result<RingLayout> r = RingLayout::Make(Mixed(), 2, 4);
  ASSERT_TRUE(r.ok());
  const std::vector<FieldSpec> fields = Mixed();
  for (size_t i = 0; i < fields.size(); ++i) EXPECT_EQ(r->FindField(fields[i].name), int(i));
  EXPECT_EQ(r->FindField("nope"), -1);
  EXPECT_EQ(r->FindField(""), -1);
  EXPECT_EQ(r->FindField("imag"), -1);
  EXPECT_EQ(r->FindField("image "), -1);
  EXPECT_EQ(r->FindField("Image"), -1);
}

TEST(RingLayoutTest, LargeButValidRing) {
  // 3*224*224 float32 * 1024 * 64: about 37 GiB, well under 1 TiB; Make only computes.
  Result<RingLayout> r = RingLayout::Make(
      {FieldSpec{"image", DType::kFloat32, {3, 224, 224}, MemoryKind::kCuda}}, 64, 1024);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->allocation_bytes(MemoryKind::kCuda), size_t{3} * 224 * 224 * 4 * 1024 * 64);
  EXPECT_EQ(r->SampleOffset(0, 63, 1024), size_t{3} * 224 * 224 * 4 * 1024 * 64);
}

void ExpectInvalid(std::vector<FieldSpec> fields, uint32_t window, uint32_t batch,
                   const std::string& what) {
  Result<RingLayout> r = RingLayout::Make(std::move(fields), window, batch);
  ASSERT_FALSE(r.ok()) << what << " was accepted, with a field slot stride of "
                       << r->field_slot_stride(0) << " bytes and allocations of "
                       << r->allocation_bytes(MemoryKind::kHost) << " (host) and "
                       << r->allocation_bytes(MemoryKind::kCuda) << " (cuda) bytes";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << what;
  EXPECT_FALSE(r.status().message().empty()) << what;
}

TEST(RingLayoutTest, Errors) {
  ExpectInvalid({}, 4, 4, "no fields");
  ExpectInvalid(ImageLabel(), 0, 4, "window 0");
  ExpectInvalid(ImageLabel(), 4, 0, "batch 0");
  ExpectInvalid({FieldSpec{"", DType::kUInt8, {1}, MemoryKind::kHost}}, 4, 4, "empty name");
  ExpectInvalid({FieldSpec{"a", DType::kUInt8, {1}, MemoryKind::kHost},
                 FieldSpec{"a", DType::kInt64, {}, MemoryKind::kCuda}},
                4, 4, "duplicate name across kinds");
  ExpectInvalid({FieldSpec{"a", DType::kUInt8, {1}, MemoryKind::kHost},
                 FieldSpec{"b", DType::kUInt8, {1}, MemoryKind::kHost},
                 FieldSpec{"a", DType::kUInt8, {1}, MemoryKind::kHost}},
                4, 4, "duplicate name");
  ExpectInvalid({FieldSpec{"a", DType::kUInt8, {3, 0, 4}, MemoryKind::kHost}}, 4, 4, "dim 0");
  ExpectInvalid({FieldSpec{"a", DType::kUInt8, {-3}, MemoryKind::kHost}}, 4, 4, "negative dim");
  ExpectInvalid({FieldSpec{"a", DType::kUInt8, {(int64_t{1} << 31) + 1}, MemoryKind::kHost}}, 1, 1,
                "dim over 2^31");
  ExpectInvalid({FieldSpec{"a", DType::kUInt8, {INT64_MAX}, MemoryKind::kHost}}, 1, 1,
                "dim INT64_MAX");
}

TEST(RingLayoutTest, DuplicateNameMessageNamesTheField) {
  Result<RingLayout> r =
      RingLayout::Make({FieldSpec{"label", DType::kInt64, {}, MemoryKind::kHost},
                        FieldSpec{"label", DType::kInt64, {}, MemoryKind::kHost}},
                       4, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("label"), std::string::npos) << r.status().ToString();
}

TEST(RingLayoutTest, RingsOverOneTebibyteAreRefused) {
  const uint32_t kMaxU32 = 0xFFFFFFFFu;
  // One field alone over 1 TiB.
  ExpectInvalid({FieldSpec{"image", DType::kFloat32, {3, 224, 224}, MemoryKind::kCuda}}, 65536,
                1 << 20, "image ring of 2^36 samples");
  ExpectInvalid({FieldSpec{"x", DType::kUInt8, {1}, MemoryKind::kHost}}, kMaxU32, kMaxU32,
                "2^64 one-byte samples");
  ExpectInvalid({FieldSpec{"x", DType::kFloat64, {int64_t{1} << 31}, MemoryKind::kHost}}, 1024, 1,
                "16 GiB samples, 1024 slots");
  // Just over 1 TiB: 2^40 bytes of data plus one more slot.
  ExpectInvalid({FieldSpec{"x", DType::kUInt8, {1 << 20}, MemoryKind::kHost}}, (1 << 20) + 1, 1,
                "1 TiB + 1 MiB");
  // Several fields of one kind that are each under 1 TiB but together over.
  ExpectInvalid({FieldSpec{"a", DType::kUInt8, {1 << 20}, MemoryKind::kHost},
                 FieldSpec{"b", DType::kUInt8, {1 << 20}, MemoryKind::kHost}},
                (1 << 19) - 1, 2, "two fields just under 1 TiB each");
  // Exactly 1 TiB is allowed.
  Result<RingLayout> r =
      RingLayout::Make({FieldSpec{"x", DType::kUInt8, {1 << 20}, MemoryKind::kHost}}, 1 << 20, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->allocation_bytes(MemoryKind::kHost), size_t{1} << 40);
}

// A sample whose byte size overflows 64 bits must be refused, not wrapped
// around to a small (here: zero) size. Each dimension is within the per-dimension
// limit of 2^31, but the product is not representable.
TEST(RingLayoutTest, SampleSizeOverflowIsRefused) {
  // 2^31 * 2^31 = 2^62 elements of 8 bytes = 2^65 bytes: wraps to 0 in size_t.
  ExpectInvalid(
      {FieldSpec{"x", DType::kFloat64, {int64_t{1} << 31, int64_t{1} << 31}, MemoryKind::kHost}}, 1,
      1, "2^65-byte sample");
  // 2^31 * 2^31 * 4 = 2^64 elements: wraps to 0 in int64.
  ExpectInvalid(
      {FieldSpec{"x", DType::kUInt8, {int64_t{1} << 31, int64_t{1} << 31, 4}, MemoryKind::kHost}},
      1, 1, "2^64-element sample");
  // 8 dimensions of 2^31 (what the protocol decoder lets through).
  ExpectInvalid(
      {FieldSpec{"x", DType::kUInt8, std::vector<int64_t>(8, int64_t{1} << 31), MemoryKind::kHost}},
      1, 1, "2^248-element sample");
}

// The resume lane's slots (Note [Resume]) follow every field's window slots:
// the window's offsets are those of a layout without them.
TEST(RingLayoutTest, ExtraSlotsLieAfterTheWindowsWithoutMovingThem) {
  for (uint32_t extra : {1u, 4u}) {
    Result<RingLayout> plain = RingLayout::Make(Mixed(), 5, 33);
    Result<RingLayout> more = RingLayout::Make(Mixed(), 5, 33, extra);
    ASSERT_TRUE(plain.ok() && more.ok());
    EXPECT_EQ(more->window(), 5u);
    EXPECT_EQ(more->slots(), 5u + extra);
    CheckLayout(*more);
    for (size_t f = 0; f < Mixed().size(); ++f) {
      for (uint32_t k = 0; k < 5; ++k) {
        EXPECT_EQ(more->SampleOffset(f, k, 0), plain->SampleOffset(f, k, 0)) << f << " " << k;
      }
      EXPECT_GE(more->SampleOffset(f, 5, 0),
                plain->allocation_bytes(Mixed()[f].memory));  // after every window slot
    }
  }
}

using RingLayoutDeathTest = ::testing::Test;

TEST_F(RingLayoutDeathTest, SampleOffsetChecksItsArguments) {
  Result<RingLayout> r = RingLayout::Make(ImageLabel(), 4, 8);
  ASSERT_TRUE(r.ok());
  const RingLayout& layout = *r;
  EXPECT_DEATH((void)layout.SampleOffset(2, 0, 0), "check failed");
  EXPECT_DEATH((void)layout.SampleOffset(0, 4, 0), "check failed");
  EXPECT_DEATH((void)layout.SampleOffset(0, 0, 9), "check failed");
}

}  // namespace
}  // namespace batchcast
