// Note [Transcoded progressive files] without a GPU: TranscodeCache's budget
// and states, and SampleRouter sending progressive files to the hardware
// batch as baseline bytes (decode_route.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../image/test_jpegs.h"
#include "batchcast/image/jpeg.h"
#include "flagged_dataset.h"
#include "sources/src/cpu_file_cache.h"
#include "sources/src/decode_route.h"
#include "sources/src/image_dataset.h"
#include "sources/src/transcode_cache.h"
#include "temp_dataset.h"

namespace batchcast {
namespace {

using testing::TempDataset;

TEST(TranscodeCache, KeepsWhileTheBudgetLasts) {
  TranscodeCache cache(4, 10);
  EXPECT_TRUE(cache.enabled());
  EXPECT_TRUE(cache.HasRoom(10));
  EXPECT_TRUE(cache.Put(0, std::vector<uint8_t>(6, 1)));
  EXPECT_TRUE(cache.holds(0));
  EXPECT_FALSE(cache.HasRoom(5));
  EXPECT_FALSE(cache.Put(1, std::vector<uint8_t>(5, 2))) << "over the budget";
  EXPECT_FALSE(cache.holds(1));
  EXPECT_FALSE(cache.Put(0, std::vector<uint8_t>(1, 3))) << "kept once";
  std::vector<uint8_t> out;
  EXPECT_TRUE(cache.Get(0, &out));
  EXPECT_EQ(out, std::vector<uint8_t>(6, 1));
  EXPECT_FALSE(cache.Get(1, &out));
  EXPECT_EQ(cache.hits(), 1);
  cache.MarkRefused(2);
  cache.MarkRefused(2);
  EXPECT_TRUE(cache.refused(2));
  EXPECT_EQ(cache.refused_files(), 1);
  EXPECT_FALSE(cache.Put(2, std::vector<uint8_t>(1, 4))) << "refused files are not kept";
  EXPECT_FALSE(cache.Put(9, std::vector<uint8_t>(1, 4))) << "out of range";
  cache.MarkRefused(-1);  // out of range: ignored
  EXPECT_EQ(cache.files(), 1);
  EXPECT_EQ(cache.bytes(), 6u);

  TranscodeCache off(4, 0);
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.HasRoom(0));
  EXPECT_FALSE(off.Put(0, {1}));
  off.MarkRefused(0);
  EXPECT_FALSE(off.refused(0));
}

std::vector<uint8_t> Progressive(int w, int h, uint32_t seed) {
  return image::testing::EncodeJpeg(image::testing::TexturedRgb(w, h, seed), 90, TJSAMP_420,
                                    /*progressive=*/true);
}

// 0 prog 64x48 | 1 prog 300x200 | 2 prog truncated | 3 gpu (baseline) | 4 prog 40x40
struct Fixture {
  Fixture() {
    d.Write("c/0_prog.jpg", Progressive(64, 48, 1));
    d.Write("c/1_prog.jpg", Progressive(300, 200, 2));
    std::vector<uint8_t> cut = Progressive(80, 80, 3);
    cut.resize(cut.size() * 2 / 3);
    d.Write("c/2_prog_bad.jpg", cut);
    d.Write("c/3_gpu.jpg", TempDataset::Jpeg(50, 50, 4));
    d.Write("c/4_prog.jpg", Progressive(40, 40, 5));
    dataset = testing::OpenFlaggedDataset(d, 5);
  }
  std::vector<uint8_t> Bytes(int64_t index) const { return testing::FileBytes(*dataset, index); }
  TempDataset d;
  std::unique_ptr<ImageDataset> dataset;
};

std::vector<uint8_t> Pixels(std::span<const uint8_t> jpeg) {
  image::JpegDecoder decoder;
  auto img = decoder.DecodeRgb(jpeg, 0);
  EXPECT_TRUE(img.ok()) << img.status().ToString();
  std::vector<uint8_t> out;
  if (!img.ok()) return out;
  for (int y = 0; y < img->height; ++y) {
    out.insert(out.end(), img->data + img->stride * y,
               img->data + img->stride * y + img->width * 3);
  }
  return out;
}

TEST(TranscodeRoute, ProgressiveFilesJoinTheHardwareBatchAsBaseline) {
  Fixture f;
  ASSERT_TRUE(f.dataset->file(0).info.progressive);
  CpuFileCache device_cache(*f.dataset, 0);
  // Room for file 0's baseline bytes, not for file 1's as well.
  TranscodeCache transcode(f.dataset->size(), f.Bytes(0).size() + 2000);
  int asked = 0;
  SampleRouter router(*f.dataset, device_cache, 1, &transcode, [&](std::span<const uint8_t> j) {
    ++asked;
    return !image::ReadJpegInfo(j)->progressive;
  });
  const uint32_t epoch = 2;

  FileBuffer file;
  GpuSample s;
  ASSERT_TRUE(router.Route(0, epoch, 0, file, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kNvJpeg);
  EXPECT_EQ(file.index, 0);
  auto info = image::ReadJpegInfo(file.bytes);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->progressive) << "the hardware batch gets baseline bytes";
  EXPECT_EQ(Pixels(file.bytes), Pixels(f.Bytes(0))) << "lossless";
  EXPECT_TRUE(transcode.holds(0));
  EXPECT_EQ(router.transcoded(), 1);
  EXPECT_EQ(asked, 1);
  const image::JpegInfo& scan = f.dataset->file(0).info;
  EXPECT_EQ(s.plan.crop,
            image::PlanCrop(f.dataset->transform(), epoch, 0, scan.width, scan.height).crop);

  // A later epoch: the kept bytes, no transcode.
  FileBuffer fresh;
  GpuSample later;
  ASSERT_TRUE(router.Route(0, epoch + 1, 0, fresh, later, RouteFor::kHardware).ok());
  EXPECT_EQ(later.route, DecodeRoute::kNvJpeg);
  EXPECT_EQ(fresh.bytes, file.bytes);
  EXPECT_EQ(router.transcoded(), 1);
  EXPECT_EQ(transcode.hits(), 1);

  // Beside the hardware call, or in a refused batch: the CPU decodes it.
  ASSERT_TRUE(router.Route(0, epoch, 0, fresh, later, RouteFor::kCpu).ok());
  EXPECT_EQ(later.route, DecodeRoute::kCpuCropped);
  ASSERT_TRUE(router.Route(0, epoch, 0, fresh, later, RouteFor::kForceCpu).ok());
  EXPECT_EQ(later.route, DecodeRoute::kCpuCropped);

  // Beyond the budget: the CPU, every epoch (not transcoded).
  FileBuffer big;
  ASSERT_TRUE(router.Route(0, epoch, 1, big, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kCpuCropped);
  EXPECT_FALSE(transcode.holds(1));
  EXPECT_EQ(router.transcoded(), 1);

  // A corrupt file: refused for good; the CPU decoder reports it (dropped).
  FileBuffer bad;
  auto fill = router.Route(0, epoch, 2, bad, s, RouteFor::kHardware);
  ASSERT_TRUE(fill.ok()) << fill.status().ToString();
  EXPECT_EQ(*fill, SampleFill::kDropped);
  EXPECT_TRUE(transcode.refused(2));
  EXPECT_EQ(f.dataset->files_dropped_at_decode(), 1);

  // A baseline file the engine takes: read, not transcoded.
  FileBuffer gpu;
  ASSERT_TRUE(router.Route(0, epoch, 3, gpu, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kNvJpeg);
  EXPECT_EQ(gpu.bytes, f.Bytes(3));
}

TEST(TranscodeRoute, ResultsTheEngineRefusesAreDecodedOnTheCpuFromThenOn) {
  Fixture f;
  CpuFileCache device_cache(*f.dataset, 0);
  TranscodeCache transcode(f.dataset->size(), 1 << 20);
  int asked = 0;
  SampleRouter router(*f.dataset, device_cache, 1, &transcode, [&](std::span<const uint8_t>) {
    ++asked;
    return false;
  });
  FileBuffer file;
  GpuSample s;
  ASSERT_TRUE(router.Route(0, 0, 4, file, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kCpuCropped);
  EXPECT_TRUE(transcode.refused(4));
  ASSERT_TRUE(router.Route(0, 1, 4, file, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kCpuCropped);
  EXPECT_EQ(asked, 1) << "not tried again";
  EXPECT_EQ(router.transcoded(), 0);
}

TEST(TranscodeRoute, OffMeansTheCpu) {
  Fixture f;
  CpuFileCache device_cache(*f.dataset, 0);
  TranscodeCache off(f.dataset->size(), 0);
  SampleRouter router(*f.dataset, device_cache, 1, &off, {});
  FileBuffer file;
  GpuSample s;
  ASSERT_TRUE(router.Route(0, 0, 0, file, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kCpuCropped);
  EXPECT_EQ(file.bytes, f.Bytes(0));
}

}  // namespace
}  // namespace batchcast
