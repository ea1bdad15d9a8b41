// The formats other than JPEG (Note [Image formats]): sniffing, header
// parsing, decoding each variant to 8-bit RGB as PIL's convert("RGB") does,
// bad input, and the CPU pipeline's crops and pixels for them.
#include "batchcast/image/image_format.h"

#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "batchcast/image/crop_planner.h"
#include "batchcast/image/image_decoder.h"
#include "batchcast/image/pipeline.h"
#include "test_images.h"

namespace batchcast::image::testing {
namespace {

Image WithAlpha(const Image& rgb) {
  Image out{rgb.width, rgb.height, 4, {}};
  for (size_t i = 0; i < rgb.pixels.size(); i += 3) {
    out.pixels.insert(out.pixels.end(),
                      {rgb.pixels[i], rgb.pixels[i + 1], rgb.pixels[i + 2],
                       uint8_t(1 + i % 250)});  // (alpha 0 lets encoders drop the colour)
  }
  return out;
}

// The decoded image as packed rows.
std::vector<uint8_t> Packed(const DecodedImage& d) {
  std::vector<uint8_t> out;
  for (int y = 0; y < d.height; ++y) {
    const uint8_t* row = d.data + d.stride * y;
    out.insert(out.end(), row, row + size_t(d.width) * d.channels);
  }
  return out;
}

std::vector<uint8_t> DecodeOk(const std::vector<uint8_t>& bytes, int channels,
                              bool gray_as_rgb = false) {
  ImageDecoder d;
  Result<DecodedImage> img = d.Decode(bytes, 0, gray_as_rgb);
  EXPECT_TRUE(img.ok()) << img.status().ToString();
  if (!img.ok()) return {};
  EXPECT_EQ(img->channels, channels);
  return Packed(*img);
}

Image Gray3(const Image& gray) {
  Image out{gray.width, gray.height, 3, {}};
  for (uint8_t v : gray.pixels) out.pixels.insert(out.pixels.end(), {v, v, v});
  return out;
}

TEST(ImageFormat, SniffsTheBytesNotTheName) {
  const Image rgb = SmoothRgb(20, 10);
  EXPECT_EQ(SniffImageFormat(EncodeJpeg(rgb)), ImageFormat::kJpeg);
  EXPECT_EQ(SniffImageFormat(EncodePng(rgb)), ImageFormat::kPng);
  EXPECT_EQ(SniffImageFormat(EncodeWebp(rgb, true)), ImageFormat::kWebp);
  EXPECT_EQ(SniffImageFormat(EncodeBmp(rgb, 24)), ImageFormat::kBmp);
  EXPECT_EQ(SniffImageFormat(EncodeTiff(rgb)), ImageFormat::kTiff);
  EXPECT_EQ(SniffImageFormat(EncodePnm(rgb)), ImageFormat::kPnm);
  const std::string gif = "GIF89a\x01\x00\x01\x00";
  EXPECT_EQ(SniffImageFormat({reinterpret_cast<const uint8_t*>(gif.data()), gif.size()}),
            ImageFormat::kGif);
  EXPECT_EQ(SniffImageFormat({}), ImageFormat::kUnknown);
  const std::vector<uint8_t> random = {0x12, 0x34, 0x56, 0x78, 0x9a};
  EXPECT_EQ(SniffImageFormat(random), ImageFormat::kUnknown);
  EXPECT_EQ(ImageFormatName(ImageFormat::kWebp), "webp");
  EXPECT_EQ(ImageFormatTitle(ImageFormat::kWebp), "WebP");
}

TEST(ImageFormat, HeadersGiveTheSizeOfEveryVariant) {
  const Image rgb = SmoothRgb(37, 23);
  const Image gray = SmoothGray(37, 23);
  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    ImageFormat format;
  };
  const std::vector<Case> cases = {
      {"png rgb", EncodePng(rgb), ImageFormat::kPng},
      {"png gray", EncodePng(gray), ImageFormat::kPng},
      {"png rgba", EncodePng(WithAlpha(rgb)), ImageFormat::kPng},
      {"png interlaced", EncodePng(rgb, true), ImageFormat::kPng},
      {"webp lossy", EncodeWebp(rgb, false), ImageFormat::kWebp},
      {"webp lossless", EncodeWebp(rgb, true), ImageFormat::kWebp},
      {"webp lossy alpha", EncodeWebp(WithAlpha(rgb), false), ImageFormat::kWebp},
      {"bmp 24", EncodeBmp(rgb, 24), ImageFormat::kBmp},
      {"bmp 8 top-down", EncodeBmp(gray, 8, true), ImageFormat::kBmp},
      {"tiff rgb", EncodeTiff(rgb), ImageFormat::kTiff},
      {"tiff gray lzw", EncodeTiff(gray, COMPRESSION_LZW), ImageFormat::kTiff},
      {"pgm", EncodePnm(gray), ImageFormat::kPnm},
      {"ppm", EncodePnm(rgb), ImageFormat::kPnm},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<ImageHeader> h = ReadImageHeader(c.bytes);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(h->format, c.format);
    EXPECT_EQ(h->width, 37);
    EXPECT_EQ(h->height, 23);
    // The first bytes suffice (TIFF: libtiff writes its directory at the end).
    if (c.format != ImageFormat::kTiff) {
      EXPECT_TRUE(ReadImageHeader({c.bytes.data(), 64}).ok());
    }
    // --max-pixels before any decode.
    Result<ImageHeader> big = ReadImageHeader(c.bytes, 37 * 23 - 1);
    EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(big.status().message().find("max_pixels"), std::string::npos);
    EXPECT_TRUE(ReadImageHeader(c.bytes, 37 * 23).ok());
  }
  // A TIFF directory beyond the bytes read: read more.
  const std::vector<uint8_t> tiff = EncodeTiff(rgb);
  EXPECT_EQ(ReadImageHeader({tiff.data(), 16}).status().code(), StatusCode::kOutOfRange);
}

TEST(ImageFormat, HeadersRefuseWhatIsNotDecoded) {
  auto refused = [](const std::vector<uint8_t>& bytes, const std::string& words) {
    Result<ImageHeader> h = ReadImageHeader(bytes);
    EXPECT_EQ(h.status().code(), StatusCode::kDataLoss) << h.status().ToString();
    EXPECT_NE(h.status().message().find(words), std::string::npos) << h.status().ToString();
  };
  const std::string gif = "GIF89a\x10\x00\x10\x00\x00\x00\x00";
  refused({gif.begin(), gif.end()}, "GIF");
  refused({}, "empty");
  refused({1, 2, 3, 4, 5, 6, 7, 8}, "not an image");
  refused(EncodeJpeg(SmoothRgb(8, 8)), "ReadJpegInfo");
  const std::string ascii = "P3\n2 2\n255\n0 0 0 0 0 0 0 0 0 0 0 0\n";
  refused({ascii.begin(), ascii.end()}, "not a variant");
  std::vector<uint8_t> png = EncodePng(SmoothRgb(8, 8));
  refused({png.begin(), png.begin() + 20}, "corrupt PNG header");
  png[25] = 5;  // colour type 5 does not exist
  refused(png, "colour type");
  // An animated WebP (VP8X with the animation flag).
  std::vector<uint8_t> anim = {'R', 'I', 'F', 'F', 30, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8',
                               'X', 10,  0,   0,   0,  2, 0, 0, 0,   9,   0,   0,   9,   0,   0};
  refused(anim, "animation");
  std::vector<uint8_t> bmp = EncodeBmp(SmoothRgb(8, 8), 24);
  bmp[30] = 1;  // BI_RLE8
  refused(bmp, "not a variant");
}

TEST(ImageDecoder, PngVariantsDecodeAsPilConvertsToRgb) {
  const Image rgb = TexturedRgb(33, 21, 1);
  const Image gray = SmoothGray(33, 21);
  EXPECT_EQ(DecodeOk(EncodePng(rgb), 3), rgb.pixels);
  EXPECT_EQ(DecodeOk(EncodePng(rgb, /*interlaced=*/true), 3), rgb.pixels);
  EXPECT_EQ(DecodeOk(EncodePng(WithAlpha(rgb)), 3), rgb.pixels);  // alpha dropped
  EXPECT_EQ(DecodeOk(EncodePng(gray), 1), gray.pixels);
  EXPECT_EQ(DecodeOk(EncodePng(gray), 3, /*gray_as_rgb=*/true), Gray3(gray).pixels);
  Image gray_alpha{gray.width, gray.height, 2, {}};
  for (uint8_t v : gray.pixels) gray_alpha.pixels.insert(gray_alpha.pixels.end(), {v, 17});
  EXPECT_EQ(DecodeOk(EncodePng(gray_alpha), 1), gray.pixels);
  // 16 bit: the high byte of every sample.
  PngSpec s16{33, 21, PNG_COLOR_TYPE_RGB, 16, {}, {}, {}, false};
  for (uint8_t v : rgb.pixels) s16.samples.push_back(uint16_t(v << 8 | (255 - v)));
  EXPECT_EQ(DecodeOk(EncodePng(s16), 3), rgb.pixels);
  PngSpec g16{33, 21, PNG_COLOR_TYPE_GRAY, 16, {}, {}, {}, false};
  for (uint8_t v : gray.pixels) g16.samples.push_back(uint16_t(v << 8 | 0x80));
  EXPECT_EQ(DecodeOk(EncodePng(g16), 1), gray.pixels);
  // Palette (4 bits, with transparency, which is ignored) and 1-bit gray.
  PngSpec pal{33, 21, PNG_COLOR_TYPE_PALETTE, 4, {}, {}, {0, 128}, false};
  for (int k = 0; k < 16; ++k) pal.palette.push_back({uint8_t(k * 16), uint8_t(255 - k), 7});
  std::vector<uint8_t> want;
  for (int i = 0; i < 33 * 21; ++i) {
    pal.samples.push_back(uint16_t(i % 16));
    want.insert(want.end(), {uint8_t(i % 16 * 16), uint8_t(255 - i % 16), 7});
  }
  EXPECT_EQ(DecodeOk(EncodePng(pal), 3), want);
  PngSpec bits{33, 21, PNG_COLOR_TYPE_GRAY, 1, {}, {}, {}, false};
  want.clear();
  for (int i = 0; i < 33 * 21; ++i) {
    bits.samples.push_back(uint16_t((i / 3) % 2));
    want.push_back((i / 3) % 2 ? 255 : 0);
  }
  EXPECT_EQ(DecodeOk(EncodePng(bits), 1), want);
}

TEST(ImageDecoder, WebpTiffBmpPnmDecodeToRgb) {
  const Image rgb = TexturedRgb(29, 17, 2);
  const Image gray = SmoothGray(29, 17);
  EXPECT_EQ(DecodeOk(EncodeWebp(rgb, true), 3), rgb.pixels);
  EXPECT_EQ(DecodeOk(EncodeWebp(WithAlpha(rgb), true), 3), rgb.pixels);
  // Lossy: close to the source.
  const std::vector<uint8_t> lossy = DecodeOk(EncodeWebp(rgb, false, 95), 3);
  ASSERT_EQ(lossy.size(), rgb.pixels.size());
  double diff = 0;
  for (size_t i = 0; i < lossy.size(); ++i) diff += std::abs(lossy[i] - rgb.pixels[i]);
  EXPECT_LT(diff / lossy.size(), 8.0);
  EXPECT_EQ(DecodeOk(EncodeTiff(rgb), 3), rgb.pixels);
  EXPECT_EQ(DecodeOk(EncodeTiff(rgb, COMPRESSION_ADOBE_DEFLATE), 3), rgb.pixels);
  EXPECT_EQ(DecodeOk(EncodeTiff(gray, COMPRESSION_LZW), 3), Gray3(gray).pixels);
  EXPECT_EQ(DecodeOk(EncodeBmp(rgb, 24), 3), rgb.pixels);
  EXPECT_EQ(DecodeOk(EncodeBmp(rgb, 32, /*top_down=*/true), 3), rgb.pixels);
  EXPECT_EQ(DecodeOk(EncodeBmp(gray, 8), 3), Gray3(gray).pixels);
  EXPECT_EQ(DecodeOk(EncodePnm(gray), 1), gray.pixels);
  EXPECT_EQ(DecodeOk(EncodePnm(rgb), 3), rgb.pixels);
}

TEST(ImageDecoder, BadDataIsDataLossNeverACrash) {
  const Image rgb = TexturedRgb(64, 48, 3);
  const std::vector<std::vector<uint8_t>> files = {
      EncodePng(rgb),        EncodePng(rgb, true), EncodeWebp(rgb, false),
      EncodeWebp(rgb, true), EncodeTiff(rgb),      EncodeTiff(rgb, COMPRESSION_LZW),
      EncodeBmp(rgb, 24),    EncodePnm(rgb)};
  ImageDecoder d;
  std::mt19937 rng(5);
  for (const std::vector<uint8_t>& f : files) {
    SCOPED_TRACE(std::string(ImageFormatTitle(SniffImageFormat(f))));
    ASSERT_TRUE(d.Decode(f, 0, false).ok());
    // Truncated anywhere after the header: DataLoss (the header parse may
    // fail first for the TIFF, whose directory is at the end).
    for (size_t cut : {f.size() / 2, f.size() - 5, size_t(60)}) {
      Result<DecodedImage> r = d.Decode({f.data(), cut}, 0, false);
      EXPECT_FALSE(r.ok()) << cut;
      if (!r.ok()) {
        EXPECT_NE(r.status().code(), StatusCode::kInternal) << r.status().ToString();
      }
    }
    // Random bytes over the data: an error or some pixels, never a crash.
    for (int k = 0; k < 50; ++k) {
      std::vector<uint8_t> bad = f;
      for (int j = 0; j < 8; ++j) bad[40 + rng() % (bad.size() - 40)] = uint8_t(rng());
      (void)d.Decode(bad, 0, false);
    }
  }
  std::vector<uint8_t> png = EncodePng(rgb);
  png[png.size() / 2] ^= 0x55;  // the IDAT chunk's CRC no longer holds
  Result<DecodedImage> r = d.Decode(png, 0, false);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("PNG"), std::string::npos) << r.status().ToString();
}

TransformOptions Options(TransformOptions::Kind kind, int size = 32) {
  TransformOptions o;
  o.kind = kind;
  o.size = size;
  o.dtype = DType::kUInt8;
  o.nchw = false;
  o.seed = 99;
  return o;
}

// The crop of (seed, epoch, index) is a function of the image's size only:
// a PNG gets the crop a JPEG of the same size gets.
TEST(CpuImagePipelineFormats, SameCropAsAJpegOfTheSameSize) {
  const Image rgb = TexturedRgb(120, 90, 4);
  const std::vector<uint8_t> jpeg = EncodeJpeg(rgb);
  const std::vector<std::vector<uint8_t>> others = {EncodePng(rgb), EncodeWebp(rgb, true),
                                                    EncodeBmp(rgb, 24), EncodeTiff(rgb)};
  for (auto kind : {TransformOptions::Kind::kTrain, TransformOptions::Kind::kEval}) {
    CpuImagePipeline p(Options(kind));
    std::vector<uint8_t> out(p.output_bytes());
    for (int64_t index = 0; index < 20; ++index) {
      CropParams want, got;
      ASSERT_TRUE(p.Process(jpeg, 3, index, out.data(), &want).ok());
      EXPECT_EQ(want, SampleCrop(p.options(), 3, index, 120, 90));
      for (const std::vector<uint8_t>& f : others) {
        ASSERT_TRUE(p.Process(f, 3, index, out.data(), &got).ok());
        EXPECT_EQ(got, want);
      }
    }
  }
}

// A lossless image's sample is its crop resized as the JPEG path does at DCT
// scale 1 (cv::resize INTER_LINEAR; INTER_AREA beyond 2x), flipped as planned.
TEST(CpuImagePipelineFormats, PixelsAreTheCropResized) {
  const Image rgb = TexturedRgb(150, 100, 5);
  const Image gray = SmoothGray(150, 100);
  for (const Image* img : {&rgb, &gray}) {
    const std::vector<uint8_t> png = EncodePng(*img);
    for (auto kind : {TransformOptions::Kind::kTrain, TransformOptions::Kind::kEval}) {
      CpuImagePipeline p(Options(kind));
      std::vector<uint8_t> out(p.output_bytes());
      for (int64_t index = 0; index < 8; ++index) {
        CropParams crop;
        ASSERT_TRUE(p.Process(png, 1, index, out.data(), &crop).ok());
        const cv::Mat src(img->height, img->width, CV_8UC(img->channels),
                          const_cast<uint8_t*>(img->pixels.data()));
        cv::Mat resized;
        const bool area = crop.w >= 32 && crop.h >= 32 && (crop.w > 64 || crop.h > 64);
        cv::resize(src(cv::Rect(crop.x, crop.y, crop.w, crop.h)), resized, cv::Size(32, 32), 0, 0,
                   area ? cv::INTER_AREA : cv::INTER_LINEAR);
        if (crop.w == 32 && crop.h == 32) resized = src(cv::Rect(crop.x, crop.y, 32, 32)).clone();
        if (crop.flip) cv::flip(resized, resized, 1);
        if (img->channels == 1) cv::cvtColor(resized, resized, cv::COLOR_GRAY2RGB);
        ASSERT_TRUE(resized.isContinuous());
        EXPECT_EQ(std::vector<uint8_t>(resized.data, resized.data + out.size()), out) << index;
      }
    }
  }
}

TEST(CpuImagePipelineFormats, BadFilesFailWithTheReason) {
  CpuImagePipeline p(Options(TransformOptions::Kind::kTrain));
  std::vector<uint8_t> out(p.output_bytes());
  const std::vector<uint8_t> png = EncodePng(TexturedRgb(64, 48, 6));
  Status s = p.Process({png.data(), png.size() / 2}, 0, 0, out.data());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("PNG"), std::string::npos) << s.ToString();
  TransformOptions small = Options(TransformOptions::Kind::kTrain);
  small.max_pixels = 64 * 48 - 1;
  CpuImagePipeline q(small);
  s = q.Process(png, 0, 0, out.data());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  const std::string gif = "GIF89a\x10\x00\x10\x00\x00\x00\x00";
  s = p.Process({reinterpret_cast<const uint8_t*>(gif.data()), gif.size()}, 0, 0, out.data());
  EXPECT_NE(s.message().find("GIF"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace batchcast::image::testing
