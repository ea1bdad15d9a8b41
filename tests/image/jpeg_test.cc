#include "batchcast/image/jpeg.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "test_jpegs.h"

// In the namespace of the test images and encoders (test_jpegs.h).
namespace batchcast::image::testing {
namespace {

struct Diff {
  double mean = 0;
  int max = 0;
};

// Compares a decoded rectangle with `ref` pixels starting at (x0, y0).
Diff Compare(const DecodedImage& got, const Image& ref, int x0 = 0, int y0 = 0) {
  Diff d;
  double sum = 0;
  for (int y = 0; y < got.height; ++y) {
    for (int x = 0; x < got.width; ++x) {
      for (int c = 0; c < got.channels; ++c) {
        const int g = got.data[got.stride * y + x * got.channels + c];
        const int r = ref.at(x0 + x, y0 + y, ref.channels == 1 ? 0 : c);
        sum += std::abs(g - r);
        d.max = std::max(d.max, std::abs(g - r));
      }
    }
  }
  d.mean = sum / (static_cast<double>(got.width) * got.height * got.channels);
  return d;
}

// Copies a decoded rectangle into an Image.
Image ToImage(const DecodedImage& d) {
  Image img{d.width, d.height, d.channels,
            std::vector<uint8_t>(static_cast<size_t>(d.width) * d.height * d.channels)};
  for (int y = 0; y < d.height; ++y) {
    std::copy_n(d.data + d.stride * y, static_cast<size_t>(d.width) * d.channels,
                img.pixels.data() + static_cast<size_t>(y) * d.width * d.channels);
  }
  return img;
}

TEST(ReadJpegInfo, Fields) {
  const auto rgb = EncodeJpeg(SmoothRgb(123, 45), 90, TJSAMP_420);
  auto info = ReadJpegInfo(rgb);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->width, 123);
  EXPECT_EQ(info->height, 45);
  EXPECT_EQ(info->components, 3);
  EXPECT_FALSE(info->progressive);
  EXPECT_EQ(info->color, JpegInfo::ColorSpace::kYCbCr);
  EXPECT_TRUE(info->yuv420);
  for (int samp : {TJSAMP_444, TJSAMP_422, TJSAMP_440}) {
    info = ReadJpegInfo(EncodeJpeg(SmoothRgb(32, 32), 90, samp));
    ASSERT_TRUE(info.ok());
    EXPECT_FALSE(info->yuv420) << "subsampling " << samp;
  }

  const auto gray = EncodeJpeg(SmoothGray(64, 80), 90);
  info = ReadJpegInfo(gray);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->width, 64);
  EXPECT_EQ(info->height, 80);
  EXPECT_EQ(info->components, 1);
  EXPECT_EQ(info->color, JpegInfo::ColorSpace::kGray);
  EXPECT_FALSE(info->yuv420);

  const auto progressive = EncodeJpeg(SmoothRgb(40, 30), 90, TJSAMP_444, true);
  info = ReadJpegInfo(progressive);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->progressive);

  Image cmyk{8, 8, 4, std::vector<uint8_t>(8 * 8 * 4, 200)};
  info = ReadJpegInfo(EncodeCmykJpeg(cmyk, false));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->components, 4);
  EXPECT_EQ(info->color, JpegInfo::ColorSpace::kCMYK);
  info = ReadJpegInfo(EncodeCmykJpeg(cmyk, true));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->color, JpegInfo::ColorSpace::kYCCK);
  EXPECT_EQ(ColorSpaceName(info->color), "ycck");
}

TEST(ReadJpegInfo, BadInputIsDataLoss) {
  auto info = ReadJpegInfo({});
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find("empty"), std::string::npos) << info.status().message();

  info = ReadJpegInfo(PngStart());
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find("PNG"), std::string::npos) << info.status().message();

  std::vector<uint8_t> random = RandomBytes(10240, 7);
  info = ReadJpegInfo(random);
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find("not a JPEG"), std::string::npos);

  // A JPEG signature followed by garbage.
  random[0] = 0xFF;
  random[1] = 0xD8;
  info = ReadJpegInfo(random);
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss) << info.status().ToString();

  // A colour space that has no RGB meaning.
  info = ReadJpegInfo(EncodeUnknownJpeg(16, 16, 2));
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss) << info.status().ToString();
  EXPECT_NE(info.status().message().find("colour space"), std::string::npos);

  // The header cut short.
  const auto jpeg = EncodeJpeg(SmoothRgb(64, 64));
  info = ReadJpegInfo(std::span(jpeg).first(100));
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss) << info.status().ToString();
  info = ReadJpegInfo(std::span(jpeg).first(1));
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss) << info.status().ToString();
}

long MaxRssKb() {  // NOLINT(runtime/int)
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(ReadJpegInfo, HugeHeaderIsResourceExhaustedWithoutAllocating) {
  auto jpeg = EncodeJpeg(SmoothRgb(32, 32));
  ASSERT_TRUE(PatchSofDimensions(jpeg, 60000, 60000));
  const long rss_before = MaxRssKb();  // NOLINT(runtime/int)
  auto info = ReadJpegInfo(jpeg);
  EXPECT_EQ(info.status().code(), StatusCode::kResourceExhausted) << info.status().ToString();
  EXPECT_NE(info.status().message().find("60000x60000"), std::string::npos);

  JpegDecoder decoder;
  auto decoded = decoder.DecodeRgb(jpeg, 0);
  EXPECT_EQ(decoded.status().code(), StatusCode::kResourceExhausted);
  EXPECT_LT(MaxRssKb() - rss_before, 64 * 1024) << "decoding a 60000x60000 header allocated";

  // Under an explicit bound that allows it, the header parses.
  info = ReadJpegInfo(jpeg, 60000ull * 60000ull);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->width, 60000);
  // And a small image over a small bound fails.
  const auto small = EncodeJpeg(SmoothRgb(100, 100));
  EXPECT_EQ(ReadJpegInfo(small, 9999).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(ReadJpegInfo(small, 10000).ok());
}

TEST(JpegDecoder, SmoothRgbCloseToSource) {
  JpegDecoder decoder;
  for (int subsamp : {TJSAMP_420, TJSAMP_444, TJSAMP_422}) {
    const Image src = SmoothRgb(97, 61);
    const auto jpeg = EncodeJpeg(src, 95, subsamp);
    auto decoded = decoder.DecodeRgb(jpeg, 0);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->width, 97);
    EXPECT_EQ(decoded->height, 61);
    EXPECT_EQ(decoded->channels, 3);
    const Diff d = Compare(*decoded, src);
    EXPECT_LT(d.mean, 1.5) << "subsamp " << subsamp;
    EXPECT_LE(d.max, 12) << "subsamp " << subsamp;
  }
}

TEST(JpegDecoder, GrayscaleOneChannelOrReplicated) {
  const Image src = SmoothGray(50, 70);
  const auto jpeg = EncodeJpeg(src, 95);
  JpegDecoder decoder;
  ASSERT_TRUE(decoder.ReadHeader(jpeg, 0).ok());
  auto gray = decoder.Decode(1, PixelRect{0, 0, 50, 70}, false);
  ASSERT_TRUE(gray.ok()) << gray.status().ToString();
  EXPECT_EQ(gray->channels, 1);
  const Diff d = Compare(*gray, src);
  EXPECT_LT(d.mean, 1.0);
  EXPECT_LE(d.max, 4);
  const Image gray_copy = ToImage(*gray);

  auto rgb = decoder.DecodeRgb(jpeg, 0);
  ASSERT_TRUE(rgb.ok());
  EXPECT_EQ(rgb->channels, 3);
  for (int y = 0; y < rgb->height; ++y) {
    for (int x = 0; x < rgb->width; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(rgb->data[rgb->stride * y + 3 * x + c], gray_copy.at(x, y, 0));
      }
    }
  }
}

// Expected RGB of inverted-CMYK stored values, as Pillow computes it.
int PillowChannel(int stored_c, int stored_k) {
  const int nk = stored_k;
  const int tmp = (255 - stored_c) * nk + 128;
  return nk - (((tmp >> 8) + tmp) >> 8);
}

TEST(JpegDecoder, CmykAndYcckToRgb) {
  // Four flat quadrants of known (true) CMYK, stored inverted (Adobe convention).
  const int cmyk_colors[4][4] = {{0, 0, 0, 0},        // white
                                 {255, 0, 0, 0},      // cyan
                                 {0, 200, 255, 40},   // dark orange-ish
                                 {30, 60, 90, 200}};  // near black
  Image stored{32, 32, 4, std::vector<uint8_t>(32 * 32 * 4)};
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 32; ++x) {
      const int* cmyk = cmyk_colors[(y / 16) * 2 + x / 16];
      for (int c = 0; c < 4; ++c) stored.at(x, y, c) = static_cast<uint8_t>(255 - cmyk[c]);
    }
  }
  JpegDecoder decoder;
  for (bool ycck : {false, true}) {
    const auto jpeg = EncodeCmykJpeg(stored, ycck);
    auto rgb = decoder.DecodeRgb(jpeg, 0);
    ASSERT_TRUE(rgb.ok()) << rgb.status().ToString();
    ASSERT_EQ(rgb->channels, 3);
    for (int q = 0; q < 4; ++q) {
      const int* cmyk = cmyk_colors[q];
      const int x = (q % 2) * 16 + 8;
      const int y = (q / 2) * 16 + 8;
      for (int c = 0; c < 3; ++c) {
        const int want = PillowChannel(255 - cmyk[c], 255 - cmyk[3]);
        const int got = rgb->data[rgb->stride * y + 3 * x + c];
        EXPECT_NEAR(got, want, 3) << "ycck " << ycck << " quadrant " << q << " channel " << c;
      }
    }
    // White stays white, cyan is (0, 255, 255).
    EXPECT_NEAR(rgb->data[rgb->stride * 8 + 3 * 8 + 0], 255, 2);
    EXPECT_NEAR(rgb->data[rgb->stride * 8 + 3 * 24 + 0], 0, 2);
    EXPECT_NEAR(rgb->data[rgb->stride * 8 + 3 * 24 + 1], 255, 2);
  }
}

TEST(JpegDecoder, ProgressiveDecodes) {
  const Image src = SmoothRgb(77, 55);
  const auto jpeg = EncodeJpeg(src, 95, TJSAMP_420, true);
  JpegDecoder decoder;
  auto rgb = decoder.DecodeRgb(jpeg, 0);
  ASSERT_TRUE(rgb.ok()) << rgb.status().ToString();
  EXPECT_LT(Compare(*rgb, src).mean, 1.5);
  // A rectangle of a progressive file.
  ASSERT_TRUE(decoder.ReadHeader(jpeg, 0).ok());
  auto part = decoder.Decode(1, PixelRect{20, 10, 30, 20}, true);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_LT(Compare(*part, src, 20, 10).mean, 1.5);
}

TEST(JpegDecoder, CroppedDecodeMatchesFullDecode) {
  const Image src = TexturedRgb(300, 200, 3);
  JpegDecoder decoder;
  for (int subsamp : {TJSAMP_420, TJSAMP_444}) {
    const auto jpeg = EncodeJpeg(src, 90, subsamp);
    auto full_result = decoder.DecodeRgb(jpeg, 0);
    ASSERT_TRUE(full_result.ok());
    const Image full = ToImage(*full_result);
    for (const PixelRect r :
         {PixelRect{0, 0, 300, 200}, PixelRect{37, 51, 100, 80}, PixelRect{150, 0, 150, 10},
          PixelRect{0, 190, 1, 10}, PixelRect{299, 199, 1, 1}, PixelRect{64, 32, 32, 16}}) {
      ASSERT_TRUE(decoder.ReadHeader(jpeg, 0).ok());
      auto part = decoder.Decode(1, r, false);
      ASSERT_TRUE(part.ok()) << part.status().ToString();
      ASSERT_EQ(part->width, r.w);
      ASSERT_EQ(part->height, r.h);
      const Diff d = Compare(*part, full, r.x, r.y);
      // Identical except chroma upsampling at the left edge of a cropped row.
      EXPECT_LT(d.mean, 0.5) << r.x << "," << r.y << " " << r.w << "x" << r.h;
      EXPECT_LE(d.max, 16) << r.x << "," << r.y << " " << r.w << "x" << r.h;
    }
  }
}

TEST(JpegDecoder, DctScaledDecodeIsADownscale) {
  const Image src = SmoothRgb(400, 240);
  const auto jpeg = EncodeJpeg(src, 95);
  JpegDecoder decoder;
  for (int d : {2, 4, 8}) {
    ASSERT_TRUE(decoder.ReadHeader(jpeg, 0).ok());
    const int w = ScaledDimension(400, d);
    const int h = ScaledDimension(240, d);
    auto scaled = decoder.Decode(d, PixelRect{0, 0, w, h}, false);
    ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
    // Pixel (x, y) of the scaled image ~ the mean of the d x d source block.
    double err = 0;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        for (int c = 0; c < 3; ++c) {
          double mean = 0;
          int n = 0;
          for (int yy = y * d; yy < std::min(240, (y + 1) * d); ++yy) {
            for (int xx = x * d; xx < std::min(400, (x + 1) * d); ++xx, ++n) {
              mean += src.at(xx, yy, c);
            }
          }
          err += std::abs(scaled->data[scaled->stride * y + 3 * x + c] - mean / n);
        }
      }
    }
    EXPECT_LT(err / (w * h * 3), 2.0) << "1/" << d;
  }
  EXPECT_EQ(ScaledDimension(401, 8), 51);
  EXPECT_EQ(ScaledDimension(400, 8), 50);
}

TEST(JpegDecoder, TruncatedIsDataLossWhateverTheRectangle) {
  const Image src = TexturedRgb(256, 256, 5);
  const auto jpeg = EncodeJpeg(src, 90);
  JpegDecoder decoder;
  const std::vector<std::span<const uint8_t>> cuts = {
      std::span(jpeg).first(jpeg.size() / 2),  // cut in the scan data
      std::span(jpeg).first(jpeg.size() - 2),  // only EOI missing
      std::span(jpeg).first(jpeg.size() - 1)};
  for (const auto& cut : cuts) {
    auto full = decoder.DecodeRgb(cut, 0);
    EXPECT_EQ(full.status().code(), StatusCode::kDataLoss) << cut.size();
    EXPECT_NE(full.status().message().find("Premature end"), std::string::npos)
        << full.status().message();
    // Only the top rows: the decoder stops early but must still notice.
    ASSERT_TRUE(decoder.ReadHeader(cut, 0).ok());
    auto top = decoder.Decode(1, PixelRect{10, 0, 50, 16}, false);
    EXPECT_EQ(top.status().code(), StatusCode::kDataLoss) << cut.size();
    // At 1/8 scale.
    ASSERT_TRUE(decoder.ReadHeader(cut, 0).ok());
    auto scaled = decoder.Decode(8, PixelRect{0, 0, 32, 4}, false);
    EXPECT_EQ(scaled.status().code(), StatusCode::kDataLoss) << cut.size();
  }
  // Progressive: libjpeg reads the whole file up front.
  const auto progressive = EncodeJpeg(src, 90, TJSAMP_420, true);
  auto p = decoder.DecodeRgb(std::span(progressive).first(progressive.size() * 2 / 3), 0);
  EXPECT_EQ(p.status().code(), StatusCode::kDataLoss);
  // The intact file still decodes with the same decoder, and trailing bytes
  // after EOI are fine.
  std::vector<uint8_t> trailing = jpeg;
  trailing.insert(trailing.end(), {0, 0, 0, 1, 2, 3});
  EXPECT_TRUE(decoder.DecodeRgb(jpeg, 0).ok());
  EXPECT_TRUE(decoder.DecodeRgb(trailing, 0).ok());
  ASSERT_TRUE(decoder.ReadHeader(trailing, 0).ok());
  EXPECT_TRUE(decoder.Decode(1, PixelRect{0, 0, 20, 20}, false).ok());
}

TEST(JpegDecoder, CorruptedBytesNeverCrash) {
  const Image src = TexturedRgb(120, 90, 9);
  JpegDecoder decoder;
  std::mt19937 rng(11);
  int failures = 0;
  for (bool progressive : {false, true}) {
    const auto jpeg = EncodeJpeg(src, 85, TJSAMP_420, progressive);
    for (int iter = 0; iter < 300; ++iter) {
      const std::vector<uint8_t> bad = Corrupt(jpeg, rng, iter % 3 == 0);
      auto info = decoder.ReadHeader(bad, 1u << 22);
      if (!info.ok()) {
        ++failures;
        continue;
      }
      const int x = static_cast<int>(rng() % info->width);
      const int y = static_cast<int>(rng() % info->height);
      const PixelRect r{x, y, 1 + static_cast<int>(rng() % (info->width - x)),
                        1 + static_cast<int>(rng() % (info->height - y))};
      auto decoded = decoder.Decode(1, r, iter % 2 == 0);
      if (!decoded.ok()) {
        ++failures;
        EXPECT_TRUE(decoded.status().code() == StatusCode::kDataLoss)
            << decoded.status().ToString();
      }
    }
  }
  EXPECT_GT(failures, 50);
  // Still healthy.
  EXPECT_TRUE(decoder.DecodeRgb(EncodeJpeg(src), 0).ok());
}

TEST(JpegDecoder, ReusedAcrossSizes) {
  JpegDecoder decoder;
  for (int i = 0; i < 6; ++i) {
    const int w = (i % 2 == 0) ? 31 + i * 50 : 300 - i * 40;
    const int h = 17 + i * 23;
    const Image src = SmoothRgb(w, h);
    auto rgb = decoder.DecodeRgb(EncodeJpeg(src, 95), 0);
    ASSERT_TRUE(rgb.ok()) << rgb.status().ToString();
    EXPECT_EQ(rgb->width, w);
    EXPECT_EQ(rgb->height, h);
    EXPECT_LT(Compare(*rgb, src).mean, 1.5);
  }
}

}  // namespace
}  // namespace batchcast::image::testing
