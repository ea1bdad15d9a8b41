// Tests of the deterministic synthetic dataset: FillImage and FirstMismatch
// agree with the per-byte formula ImageByte.
#include "core/src/synthetic.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace batchcast::synthetic {
namespace {

const int64_t kIndices[] = {0,   1,    2,    250,    251,     252,
                            999, 1000, 4096, 123457, 1281166, int64_t{1} << 32};
// Sizes around the internal 4096-byte chunk and the 251-byte period, and real
// image sizes (3*S*S).
const size_t kSizes[] = {0,    1,    2,    250,  251,   252,         4095,        4096,
                         4097, 8191, 8192, 8193, 12345, 3 * 32 * 32, 3 * 64 * 64, 3 * 224 * 224};

TEST(SyntheticTest, ImageByteFormula) {
  // (i * 2654435761 + p) mod 251, computed with exact arithmetic for small i.
  for (int64_t i : {0, 1, 2, 7, 1000, 99999}) {
    for (uint64_t p : {0u, 1u, 250u, 251u, 1000u, 150527u}) {
      const unsigned __int128 exact = (static_cast<unsigned __int128>(i) * 2654435761u + p) % 251;
      EXPECT_EQ(ImageByte(i, p), static_cast<uint8_t>(exact)) << "i " << i << " p " << p;
    }
  }
  EXPECT_EQ(ImageByte(0, 0), 0);
  EXPECT_EQ(ImageByte(0, 5), 5);
  EXPECT_EQ(ImageByte(0, 251), 0);
  // Every byte is below 251.
  for (uint64_t p = 0; p < 1000; ++p) EXPECT_LT(ImageByte(12345, p), 251);
}

TEST(SyntheticTest, Label) {
  EXPECT_EQ(Label(0), 0);
  EXPECT_EQ(Label(999), 999);
  EXPECT_EQ(Label(1000), 0);
  EXPECT_EQ(Label(1281166), 166);
}

TEST(SyntheticTest, FillImageMatchesImageByte) {
  for (int64_t index : kIndices) {
    for (size_t size : kSizes) {
      // Guard bytes on both sides catch writes outside the span.
      std::vector<uint8_t> buf(size + 2, 0xEE);
      FillImage(index, std::span<uint8_t>(buf.data() + 1, size));
      ASSERT_EQ(buf.front(), 0xEE) << "index " << index << " size " << size;
      ASSERT_EQ(buf.back(), 0xEE) << "index " << index << " size " << size;
      for (size_t p = 0; p < size; ++p) {
        ASSERT_EQ(buf[p + 1], ImageByte(index, p))
            << "index " << index << " size " << size << " byte " << p;
      }
    }
  }
}

TEST(SyntheticTest, DifferentIndicesDiffer) {
  std::vector<uint8_t> a(3 * 8 * 8), b(3 * 8 * 8);
  FillImage(10, a);
  FillImage(11, b);
  EXPECT_NE(a, b);
}

TEST(SyntheticTest, FirstMismatchAcceptsCorrectData) {
  for (int64_t index : kIndices) {
    for (size_t size : kSizes) {
      std::vector<uint8_t> img(size);
      FillImage(index, img);
      EXPECT_EQ(FirstMismatch(index, img), -1) << "index " << index << " size " << size;
    }
  }
}

TEST(SyntheticTest, FirstMismatchFindsAFlippedByte) {
  for (int64_t index : {int64_t{0}, int64_t{3}, int64_t{777}}) {
    for (size_t size :
         {size_t{1}, size_t{251}, size_t{4096}, size_t{4097}, size_t{3 * 224 * 224}}) {
      std::vector<uint8_t> img(size);
      FillImage(index, img);
      std::vector<size_t> positions = {0, size / 2, size - 1};
      for (size_t p :
           {size_t{250}, size_t{251}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{8192}}) {
        if (p < size) positions.push_back(p);
      }
      for (size_t p : positions) {
        for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
          std::vector<uint8_t> bad = img;
          bad[p] ^= flip;
          EXPECT_EQ(FirstMismatch(index, bad), static_cast<int64_t>(p))
              << "index " << index << " size " << size << " flipped byte " << p;
        }
      }
    }
  }
}

TEST(SyntheticTest, FirstMismatchReportsTheFirstOfSeveral) {
  std::vector<uint8_t> img(3 * 100 * 100);
  FillImage(42, img);
  img[20000] ^= 1;
  img[9000] ^= 1;
  img[5000] ^= 1;
  EXPECT_EQ(FirstMismatch(42, img), 5000);
  img[4099] ^= 1;  // in the second 4096-byte chunk, before the others
  EXPECT_EQ(FirstMismatch(42, img), 4099);
  img[3] ^= 1;
  EXPECT_EQ(FirstMismatch(42, img), 3);
}

TEST(SyntheticTest, FirstMismatchDetectsTheWrongIndex) {
  std::vector<uint8_t> img(3 * 16 * 16);
  FillImage(5, img);
  EXPECT_EQ(FirstMismatch(5, img), -1);
  EXPECT_EQ(FirstMismatch(6, img), 0);
  // Two indices give the same image exactly when their phases ImageByte(i, 0)
  // agree (the image is a 251-periodic ramp shifted by the phase).
  for (int64_t other = 0; other < 300; ++other) {
    if (ImageByte(other, 0) == ImageByte(5, 0)) {
      EXPECT_EQ(FirstMismatch(other, img), -1) << other;  // same phase: same bytes
    } else {
      EXPECT_EQ(FirstMismatch(other, img), 0) << other;
    }
  }
}

}  // namespace
}  // namespace batchcast::synthetic
