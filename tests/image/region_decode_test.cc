// JpegDecoder's region decode (jpeg_crop_scanline + jpeg_skip_scanlines, with
// a margin for chroma upsampling) gives exactly the pixels of the whole image
// decoded at the same DCT scale, for every chroma subsampling, progressive
// files and grayscale: the pipeline's speed may never change its output.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "batchcast/image/jpeg.h"
#include "test_jpegs.h"

namespace batchcast::image::testing {
namespace {

// Copy of a decoded image (the decoder's view is valid until its next call).
std::vector<uint8_t> Pixels(const DecodedImage& d) {
  std::vector<uint8_t> out;
  for (int y = 0; y < d.height; ++y) {
    const uint8_t* row = d.data + d.stride * y;
    out.insert(out.end(), row, row + static_cast<size_t>(d.width) * d.channels);
  }
  return out;
}

// The first (x, y) of `rect` whose pixel differs from `full`, or "".
std::string FirstDifference(const DecodedImage& part, const PixelRect& rect,
                            const std::vector<uint8_t>& full, int full_width) {
  const int ch = part.channels;
  for (int y = 0; y < rect.h; ++y) {
    for (int x = 0; x < rect.w * ch; ++x) {
      const uint8_t want = full[(static_cast<size_t>(rect.y + y) * full_width + rect.x) * ch + x];
      if (part.data[part.stride * y + x] != want) {
        return "pixel (" + std::to_string(rect.x + x / ch) + ", " + std::to_string(rect.y + y) +
               ")";
      }
    }
  }
  return "";
}

TEST(RegionDecode, ExactlyTheFullDecodeAtEveryScale) {
  struct Case {
    const char* name;
    int subsamp;  // TJSAMP_*
    bool gray;
    bool progressive;
  };
  const Case cases[] = {
      {"4:2:0", TJSAMP_420, false, false},
      {"4:2:2", TJSAMP_422, false, false},
      {"4:4:4", TJSAMP_444, false, false},
      {"4:4:0", TJSAMP_440, false, false},
      {"4:1:1", TJSAMP_411, false, false},
      {"gray", TJSAMP_GRAY, true, false},
      {"4:2:0 progressive", TJSAMP_420, false, true},
  };
  std::mt19937 rng(7);
  JpegDecoder decoder;
  int checked = 0;
  for (const Case& c : cases) {
    // Odd sizes: partial MCUs at the right and bottom edges.
    const Image rgb = TexturedRgb(333, 251, 11);
    Image src = rgb;
    if (c.gray) {
      src = Image{rgb.width, rgb.height, 1, std::vector<uint8_t>(rgb.pixels.size() / 3)};
      for (size_t i = 0; i < src.pixels.size(); ++i) src.pixels[i] = rgb.pixels[3 * i + 1];
    }
    const auto jpeg = EncodeJpeg(src, 90, c.subsamp, c.progressive);
    for (int d : {1, 2, 4, 8}) {
      SCOPED_TRACE(std::string(c.name) + " scale 1/" + std::to_string(d));
      const int w = ScaledDimension(src.width, d);
      const int h = ScaledDimension(src.height, d);
      ASSERT_TRUE(decoder.ReadHeader(jpeg, 0).ok());
      auto whole = decoder.Decode(d, PixelRect{0, 0, w, h}, false);
      ASSERT_TRUE(whole.ok()) << whole.status().ToString();
      const std::vector<uint8_t> full = Pixels(*whole);
      // Edges, corners, single pixels, then random rectangles.
      std::vector<PixelRect> rects = {{0, 0, 1, 1},      {w - 1, h - 1, 1, 1}, {0, h - 1, w, 1},
                                      {w - 1, 0, 1, h},  {1, 1, w - 2, h - 2}, {w / 2, 0, 1, h},
                                      {17, 9, w - 40, 3}};
      for (int i = 0; i < 40; ++i) {
        const int x = static_cast<int>(rng() % w);
        const int y = static_cast<int>(rng() % h);
        rects.push_back(
            {x, y, 1 + static_cast<int>(rng() % (w - x)), 1 + static_cast<int>(rng() % (h - y))});
      }
      for (const PixelRect& r : rects) {
        if (r.w < 1 || r.h < 1 || r.x < 0 || r.y < 0) continue;  // tiny scaled images
        ASSERT_TRUE(decoder.ReadHeader(jpeg, 0).ok());
        auto part = decoder.Decode(d, r, false);
        ASSERT_TRUE(part.ok()) << part.status().ToString();
        ASSERT_EQ(part->width, r.w);
        ASSERT_EQ(part->height, r.h);
        ASSERT_EQ(part->channels, c.gray ? 1 : 3);
        ASSERT_EQ(FirstDifference(*part, r, full, w), "")
            << "rect " << r.x << "," << r.y << " " << r.w << "x" << r.h;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 7 * 4 * 40);
}

}  // namespace
}  // namespace batchcast::image::testing
