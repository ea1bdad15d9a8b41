// TranscodeToBaseline: progressive (and other) JPEGs come out baseline with
// exactly the pixels of the input; bad input gives errors, never a crash.
#include "batchcast/image/transcode.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "batchcast/image/jpeg.h"
#include "test_jpegs.h"

// In the namespace of the test images and encoders (test_jpegs.h).
namespace batchcast::image::testing {
namespace {

// The markers of a JPEG up to its first SOS (0xDA included).
std::vector<uint8_t> HeaderMarkers(const std::vector<uint8_t>& jpeg) {
  std::vector<uint8_t> markers;
  for (size_t i = 2; i + 3 < jpeg.size() && jpeg[i] == 0xFF;) {
    markers.push_back(jpeg[i + 1]);
    if (jpeg[i + 1] == 0xDA) break;
    i += 2 + ((static_cast<size_t>(jpeg[i + 2]) << 8) | jpeg[i + 3]);
  }
  return markers;
}

bool Has(const std::vector<uint8_t>& markers, uint8_t m) {
  return std::find(markers.begin(), markers.end(), m) != markers.end();
}

std::vector<uint8_t> DecodePixels(std::span<const uint8_t> jpeg) {
  JpegDecoder decoder;
  auto d = decoder.DecodeRgb(jpeg, 0);
  if (!d.ok()) {
    ADD_FAILURE() << d.status().ToString();
    return {};
  }
  std::vector<uint8_t> pixels;
  for (int y = 0; y < d->height; ++y) {
    const uint8_t* row = d->data + d->stride * y;
    pixels.insert(pixels.end(), row, row + static_cast<size_t>(d->width) * d->channels);
  }
  return pixels;
}

// Transcodes `jpeg` and checks: baseline (SOF0, one SOS before the data,
// JFIF), same header fields but progressive, identical decoded pixels.
void ExpectLosslessBaseline(const std::vector<uint8_t>& jpeg, const std::string& what) {
  SCOPED_TRACE(what);
  auto out = TranscodeToBaseline(jpeg, 0);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto in_info = ReadJpegInfo(jpeg);
  auto out_info = ReadJpegInfo(*out);
  ASSERT_TRUE(in_info.ok() && out_info.ok()) << out_info.status().ToString();
  EXPECT_FALSE(out_info->progressive);
  EXPECT_EQ(out_info->width, in_info->width);
  EXPECT_EQ(out_info->height, in_info->height);
  EXPECT_EQ(out_info->components, in_info->components);
  EXPECT_EQ(out_info->color, in_info->color);
  const std::vector<uint8_t> markers = HeaderMarkers(*out);
  EXPECT_TRUE(Has(markers, 0xC0)) << "no SOF0 (baseline) marker";
  EXPECT_TRUE(Has(markers, 0xE0)) << "no JFIF APP0 marker";
  EXPECT_FALSE(Has(markers, 0xE1) || Has(markers, 0xFE)) << "a marker was copied";
  const std::vector<uint8_t> want = DecodePixels(jpeg);
  EXPECT_FALSE(want.empty());
  EXPECT_TRUE(DecodePixels(*out) == want) << "pixels differ";
}

TEST(TranscodeToBaseline, ProgressiveBecomesBaselineWithIdenticalPixels) {
  const Image rgb = TexturedRgb(203, 141, 5);  // not a multiple of any MCU size
  for (int subsamp : {TJSAMP_420, TJSAMP_444, TJSAMP_422}) {
    const auto jpeg = EncodeJpeg(rgb, 90, subsamp, /*progressive=*/true);
    ASSERT_TRUE(ReadJpegInfo(jpeg)->progressive);
    ExpectLosslessBaseline(jpeg, "subsampling " + std::to_string(subsamp));
  }
  const auto gray = EncodeJpeg(SmoothGray(97, 130), 85, TJSAMP_GRAY, true);
  ASSERT_TRUE(ReadJpegInfo(gray)->progressive);
  ExpectLosslessBaseline(gray, "gray");
}

TEST(TranscodeToBaseline, BaselineAndArithmeticInputsKeepTheirPixels) {
  const Image rgb = TexturedRgb(64, 48, 6);
  ExpectLosslessBaseline(EncodeJpeg(rgb, 75, TJSAMP_420), "baseline");
  const auto arithmetic = EncodeWithLibjpeg(
      rgb.width, rgb.height, 3, JCS_RGB, [](jpeg_compress_struct& c) { c.arith_code = TRUE; },
      [&](JDIMENSION y) { return rgb.pixels.data() + static_cast<size_t>(y) * rgb.width * 3; });
  ExpectLosslessBaseline(arithmetic, "arithmetic");
}

TEST(TranscodeToBaseline, DropsMarkers) {
  auto jpeg = EncodeJpeg(TexturedRgb(40, 40, 7), 90, TJSAMP_420, true);
  // An APP1 (EXIF-like) and a COM segment after SOI.
  const std::vector<uint8_t> extra = {0xFF, 0xE1, 0x00, 0x08, 'E',  'x', 'i', 'f', 0,
                                      0,    0xFF, 0xFE, 0x00, 0x05, 'h', 'i', '!'};
  jpeg.insert(jpeg.begin() + 2, extra.begin(), extra.end());
  ASSERT_TRUE(Has(HeaderMarkers(jpeg), 0xE1));
  ExpectLosslessBaseline(jpeg, "with APP1 and COM");
}

TEST(TranscodeToBaseline, RefusesWhatItDoesNotTranscode) {
  const Image cmyk{16, 16, 4, std::vector<uint8_t>(16 * 16 * 4, 90)};
  for (bool ycck : {false, true}) {
    auto out = TranscodeToBaseline(EncodeCmykJpeg(cmyk, ycck));
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
    EXPECT_NE(out.status().message().find("not transcoded: 4 components"), std::string::npos)
        << out.status().message();
  }
  // RGB colour space (Adobe transform 0).
  const Image rgb = SmoothRgb(16, 16);
  auto out = TranscodeToBaseline(EncodeWithLibjpeg(
      16, 16, 3, JCS_RGB, [](jpeg_compress_struct& c) { jpeg_set_colorspace(&c, JCS_RGB); },
      [&](JDIMENSION y) { return rgb.pixels.data() + static_cast<size_t>(y) * 16 * 3; }));
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
  EXPECT_NE(out.status().message().find("colour space rgb"), std::string::npos);
  // Quantization values over 255 (quality 1 without force_baseline).
  out = TranscodeToBaseline(EncodeWithLibjpeg(
      16, 16, 3, JCS_RGB,
      [](jpeg_compress_struct& c) {
        c.err->output_message = [](j_common_ptr) {};  // quiet the "too coarse" warning
        jpeg_set_quality(&c, 1, FALSE);
      },
      [&](JDIMENSION y) { return rgb.pixels.data() + static_cast<size_t>(y) * 16 * 3; }));
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
  EXPECT_NE(out.status().message().find("255"), std::string::npos);
  // Two components.
  out = TranscodeToBaseline(EncodeUnknownJpeg(16, 16, 2));
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << out.status().ToString();
}

TEST(TranscodeToBaseline, BadInputIsAnError) {
  EXPECT_EQ(TranscodeToBaseline({}).status().code(), StatusCode::kInvalidArgument);
  auto out = TranscodeToBaseline(PngStart());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("PNG"), std::string::npos) << out.status().message();

  std::vector<uint8_t> random = RandomBytes(10240, 3);
  EXPECT_EQ(TranscodeToBaseline(random).status().code(), StatusCode::kInvalidArgument);
  random[0] = 0xFF;
  random[1] = 0xD8;
  EXPECT_EQ(TranscodeToBaseline(random).status().code(), StatusCode::kDataLoss);

  const auto jpeg = EncodeJpeg(TexturedRgb(120, 90, 8), 90, TJSAMP_420, true);
  for (size_t size : {size_t{1}, size_t{100}, jpeg.size() / 2, jpeg.size() - 2}) {
    out = TranscodeToBaseline(std::span(jpeg).first(size));
    EXPECT_NE(out.status().code(), StatusCode::kOk) << "truncated to " << size;
    if (size > 1) {
      EXPECT_EQ(out.status().code(), StatusCode::kDataLoss) << out.status().ToString();
    }
  }

  auto huge = EncodeJpeg(SmoothRgb(32, 32), 90, TJSAMP_420, true);
  ASSERT_TRUE(PatchSofDimensions(huge, 60000, 60000));
  out = TranscodeToBaseline(huge, 0);
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().ToString();
  EXPECT_EQ(TranscodeToBaseline(jpeg, 120 * 90 - 1).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(TranscodeToBaseline(jpeg, 120 * 90).ok());
}

// Corrupt input gives an error or a valid baseline file; never a crash, nor a
// broken file (corrupt progressive data can decode to coefficients that have no
// code in the standard Huffman tables: without the range check, 3 of these
// outputs did not decode).
TEST(TranscodeToBaseline, CorruptedBytesNeverCrashNorMakeBrokenFiles) {
  const Image src = TexturedRgb(96, 72, 9);
  std::mt19937 rng(12);
  int failures = 0, transcoded = 0;
  for (bool progressive : {false, true}) {
    const auto jpeg = EncodeJpeg(src, 85, TJSAMP_420, progressive);
    for (int iter = 0; iter < 500; ++iter) {
      const std::vector<uint8_t> bad = Corrupt(jpeg, rng, iter % 3 == 0);
      auto out = TranscodeToBaseline(bad, 1u << 22);
      if (!out.ok()) {
        ++failures;
        continue;
      }
      // What it transcodes decodes, to the pixels of the input where that decodes.
      ++transcoded;
      JpegDecoder decoder;
      auto in_pixels = decoder.DecodeRgb(bad, 1u << 22);
      auto out_pixels = decoder.DecodeRgb(*out, 1u << 22);
      EXPECT_TRUE(out_pixels.ok()) << out_pixels.status().ToString();
      if (in_pixels.ok()) {
        EXPECT_TRUE(DecodePixels(*out) == DecodePixels(bad));
      }
    }
  }
  EXPECT_GT(failures, 100);
  EXPECT_GT(transcoded, 100);
}

// The hazard files of tools/make_dataset.py, and its ordinary files.
TEST(TranscodeToBaseline, MakeDatasetFiles) {
  const std::string dir = ::testing::TempDir() + "/transcode_ds";
  std::filesystem::remove_all(dir);
  const char* python = std::getenv("BATCHCAST_PYTHON");
  const std::string cmd = std::string(python != nullptr ? python : "/usr/bin/python3") +
                          " '" BC_SOURCE_DIR "/tools/make_dataset.py' '" + dir +
                          "' --classes 1 --per-class 20 --hazards --decode-failures 2 --quiet";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  int transcoded = 0, progressive = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    std::ifstream f(e.path(), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f), {}};
    auto out = TranscodeToBaseline(bytes, 0);
    if (name.rfind("hazard_", 0) != 0) {
      ExpectLosslessBaseline(bytes, name);
      ++transcoded;
      progressive += ReadJpegInfo(bytes)->progressive ? 1 : 0;
      continue;
    }
    StatusCode want = StatusCode::kDataLoss;  // truncated, decode failures
    if (name == "hazard_empty.JPEG" || name == "hazard_png.JPEG" || name == "hazard_random.JPEG" ||
        name == "hazard_cmyk.JPEG") {
      want = StatusCode::kInvalidArgument;
    } else if (name == "hazard_huge.JPEG") {
      want = StatusCode::kResourceExhausted;
    }
    EXPECT_EQ(out.status().code(), want) << out.status().ToString();
  }
  EXPECT_EQ(transcoded, 20);
  EXPECT_GE(progressive, 1);  // 1 with this seed (5% of the files)
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace batchcast::image::testing
