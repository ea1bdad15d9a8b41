// Datasets of several image formats (Note [Image formats],
// batchcast/image/image_format.h) through ImageDataset and the CPU image
// source: the format is told from the bytes (a PNG named .JPEG is a PNG),
// every usable file is counted by format, every sample of a mixed folder is
// served exactly once per epoch with the pipeline's pixels, and a file no
// decoder takes follows the bad-file policy (at the scan, or when a
// truncated PNG fails at decode: Note [Dropped files]). Tar shards take
// KEY.png, KEY.webp, ... members alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "../image/test_images.h"
#include "batchcast/image/pipeline.h"
#include "batchcast/sources/make_source.h"
#include "host_slot.h"
#include "log_capture.h"
#include "sources/src/image_dataset.h"
#include "sources/src/tar_archive.h"
#include "tar_writer.h"
#include "temp_dataset.h"

namespace batchcast {
namespace {

using image::ImageFormat;
using testing::TempDataset;
namespace img = image::testing;

// 32x32 samples of seed 11 on 2 workers; max_pixels 0: the default bound.
SourceOptions Options(const std::string& data, uint64_t max_pixels = 0) {
  SourceOptions o;
  o.data = data;
  if (max_pixels > 0) o.max_pixels = max_pixels;
  o.size = 32;
  o.seed = 11;
  o.workers = 2;
  return o;
}

img::Image Rgba(const img::Image& rgb) {
  img::Image out{rgb.width, rgb.height, 4, {}};
  for (size_t i = 0; i < rgb.pixels.size(); i += 3) {
    out.pixels.insert(out.pixels.end(),
                      {rgb.pixels[i], rgb.pixels[i + 1], rgb.pixels[i + 2], uint8_t(i % 200 + 9)});
  }
  return out;
}

// A folder of every variant in two classes; returns name -> format.
std::map<std::string, ImageFormat> WriteMixed(const TempDataset& d) {
  const img::Image a = img::TexturedRgb(90, 70, 1), b = img::TexturedRgb(64, 120, 2);
  const img::Image gray = img::SmoothGray(80, 60);
  std::map<std::string, std::pair<std::vector<uint8_t>, ImageFormat>> files = {
      {"cat/00.jpg", {img::EncodeJpeg(a), ImageFormat::kJpeg}},
      {"cat/01.png", {img::EncodePng(a), ImageFormat::kPng}},
      {"cat/02.png", {img::EncodePng(gray), ImageFormat::kPng}},
      {"cat/03.png", {img::EncodePng(Rgba(b), true), ImageFormat::kPng}},
      {"cat/04.webp", {img::EncodeWebp(a, false), ImageFormat::kWebp}},
      {"cat/05.webp", {img::EncodeWebp(Rgba(b), true), ImageFormat::kWebp}},
      {"cat/06.bmp", {img::EncodeBmp(b, 24), ImageFormat::kBmp}},
      {"dog/07.tif", {img::EncodeTiff(a, COMPRESSION_LZW), ImageFormat::kTiff}},
      {"dog/08.tiff", {img::EncodeTiff(gray), ImageFormat::kTiff}},
      {"dog/09.ppm", {img::EncodePnm(b), ImageFormat::kPnm}},
      {"dog/10.pgm", {img::EncodePnm(gray), ImageFormat::kPnm}},
      {"dog/11.JPEG", {img::EncodePng(b), ImageFormat::kPng}},  // a PNG named .JPEG
      {"dog/12.jpg", {img::EncodeJpeg(b, 90, TJSAMP_444, true), ImageFormat::kJpeg}},
  };
  std::map<std::string, ImageFormat> out;
  for (const auto& [name, file] : files) {
    d.Write(name, file.first);
    out[name] = file.second;
  }
  return out;
}

int64_t Counter(const std::vector<std::pair<std::string, int64_t>>& counters,
                const std::string& name) {
  for (const auto& [k, v] : counters) {
    if (k == name) return v;
  }
  return -1;
}

TEST(ImageDatasetFormats, TheFormatComesFromTheBytesAndIsCounted) {
  TempDataset d;
  const std::map<std::string, ImageFormat> formats = WriteMixed(d);
  const std::string gif = "GIF89a\x10\x00\x10\x00\x00\x00\x00";
  d.WriteText("dog/13_gif.png", gif);  // no decoder takes it: dropped at the scan
  testing::LogCapture log;
  auto ds = ImageDataset::Open(Options(d.root()), 2);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ((*ds)->size(), formats.size());
  size_t i = 0;
  for (const auto& [name, format] : formats) {
    SCOPED_TRACE(name);
    EXPECT_EQ((*ds)->path(int64_t(i)), d.path(name));
    EXPECT_EQ((*ds)->file(int64_t(i)).format, format);
    EXPECT_GT((*ds)->file(int64_t(i)).info.width, 0);
    ++i;
  }
  EXPECT_EQ((*ds)->file(11).info.width, 64);  // the PNG named .JPEG
  EXPECT_EQ((*ds)->file(11).info.height, 120);
  EXPECT_EQ(log.Count("dropping " + d.path("dog/13_gif.png") + ": a GIF image"), 1) << log.text();
  const auto counters = (*ds)->counters();
  EXPECT_EQ(Counter(counters, "files_dropped_at_scan"), 1);
  EXPECT_EQ(Counter(counters, "files_jpeg"), 2);
  EXPECT_EQ(Counter(counters, "files_png"), 4);
  EXPECT_EQ(Counter(counters, "files_webp"), 2);
  EXPECT_EQ(Counter(counters, "files_bmp"), 1);
  EXPECT_EQ(Counter(counters, "files_tiff"), 2);
  EXPECT_EQ(Counter(counters, "files_pnm"), 2);
}

// --max-pixels applies to every format at the scan, before any decode.
TEST(ImageDatasetFormats, MaxPixelsBeforeAnyDecode) {
  TempDataset d;
  d.Write("a/big.png", img::EncodePng(img::SmoothRgb(200, 100)));
  d.Write("a/big.webp", img::EncodeWebp(img::SmoothRgb(200, 100), true));
  d.Write("a/small.bmp", img::EncodeBmp(img::SmoothRgb(20, 10), 24));
  const SourceOptions o = Options(d.root(), 10000);
  testing::LogCapture log;
  auto ds = ImageDataset::Open(o, 2);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ((*ds)->size(), 1u);
  EXPECT_EQ(log.Count("more than max_pixels"), 2) << log.text();
}

// Every sample of a mixed folder once per epoch, each with the pipeline's
// pixels of its own file and its label, over epochs and batch orders; a
// truncated PNG (its header intact) is dropped at decode, never replaced,
// and left out of later epochs.
TEST(ImageSourceFormats, MixedFolderEverySampleOncePerEpoch) {
  TempDataset d;
  const std::map<std::string, ImageFormat> formats = WriteMixed(d);
  std::vector<uint8_t> truncated = img::EncodePng(img::TexturedRgb(70, 50, 9));
  truncated.resize(truncated.size() / 2);
  d.Write("dog/99_truncated.png", truncated);
  const SourceOptions o = Options(d.root());
  auto source = MakeSource(o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Source& s = **source;
  const int64_t n = int64_t(s.size());
  ASSERT_EQ(n, int64_t(formats.size()) + 1);
  const int64_t bad = n - 1;
  std::vector<std::string> paths;  // by index: the listing order
  for (const auto& [name, format] : formats) paths.push_back(d.path(name));
  paths.push_back(d.path("dog/99_truncated.png"));
  auto t = MakeTransformOptions(o);
  ASSERT_TRUE(t.ok());
  image::CpuImagePipeline pipeline(*t);
  const size_t per = pipeline.output_bytes();
  std::mt19937 rng(3);
  for (uint32_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::map<int64_t, int> seen;
    for (size_t off = 0; off < order.size(); off += 5) {
      testing::HostSlot slot(s,
                             std::vector<int64_t>(order.begin() + off,
                                                  order.begin() + std::min(order.size(), off + 5)),
                             epoch);
      auto kept = s.FillBatch(slot.view, ReadAhead{});
      ASSERT_TRUE(kept.ok()) << kept.status().ToString();
      for (uint32_t k = 0; k < *kept; ++k) {
        const int64_t index = slot.indices[k];
        ++seen[index];
        std::vector<uint8_t> bytes;
        ASSERT_TRUE(ReadFileBytes(paths[size_t(index)], bytes).ok());
        std::vector<uint8_t> want(per);
        ASSERT_TRUE(pipeline.Process(bytes, epoch, index, want.data()).ok());
        EXPECT_EQ(slot.image(k), want) << "epoch " << epoch << " index " << index;
        EXPECT_EQ(slot.labels[k], index < 7 ? 0 : 1);
      }
    }
    EXPECT_EQ(int64_t(seen.size()), n - 1) << "epoch " << epoch;
    EXPECT_EQ(seen.count(bad), 0u);
    for (const auto& [index, count] : seen) EXPECT_EQ(count, 1) << index;
  }
  EXPECT_EQ(Counter(s.counters(), "files_dropped_at_decode"), 1);
  EXPECT_EQ(Counter(s.counters(), "samples_dropped"), 3);
  EXPECT_EQ(Counter(s.counters(), "files_png"), 5);
}

TEST(ShardFormats, PngAndWebpMembersAreImages) {
  if (!BuiltWithTar()) GTEST_SKIP() << "built without libarchive";
  TempDataset d;
  const img::Image a = img::TexturedRgb(40, 30, 1);
  testing::WriteTar(d.path("s-0.tar"), {{"k0.png", img::EncodePng(a)},
                                        {"k0.cls", testing::Text("1")},
                                        {"k1.webp", img::EncodeWebp(a, true)},
                                        {"k1.cls", testing::Text("2")},
                                        {"k2.jpg", img::EncodePng(a)},  // a PNG in a .jpg member
                                        {"k2.cls", testing::Text("3")},
                                        {"k3.bmp", img::EncodeBmp(a, 24)},
                                        {"k3.cls", testing::Text("4")}});
  auto ds = ImageDataset::Open(Options(d.path("s-0.tar")), 1);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ((*ds)->size(), 4u);
  const ImageFormat want[] = {ImageFormat::kPng, ImageFormat::kWebp, ImageFormat::kPng,
                              ImageFormat::kBmp};
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*ds)->file(i).format, want[i]) << i;
    EXPECT_EQ((*ds)->file(i).entry.label, i + 1);
    EXPECT_EQ((*ds)->file(i).info.width, 40);
  }
  EXPECT_EQ(Counter((*ds)->counters(), "files_png"), 2);
}

}  // namespace
}  // namespace batchcast
