// The CPU-side parts of the GPU image source, which run without a GPU: the
// SampleRouter's choice of DecodeRoute and its CPU decodes (decode_route.h),
// the places of Note [CPU-decoded file cache] (cpu_file_cache.h), the
// read-ahead thread (file_prefetcher.h), and the scan's EOI probe
// (eoi_probe.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/image/crop_planner.h"
#include "batchcast/image/jpeg.h"
#include "flagged_dataset.h"
#include "sources/src/cpu_file_cache.h"
#include "sources/src/decode_route.h"
#include "sources/src/eoi_probe.h"
#include "sources/src/file_prefetcher.h"
#include "sources/src/image_dataset.h"
#include "temp_dataset.h"

namespace batchcast {
namespace {

using testing::TempDataset;

// Files, in index order; the scan's flag ("nvJPEG takes it") is set for the
// names with "gpu".
//   0 gpu 64x48 | 1 cpu 40x30 | 2 cpu 400x300 | 3 cpu 80x80 truncated | 4 gpu 50x50
struct Fixture {
  Fixture() {
    d.Write("c/0_gpu.jpg", TempDataset::Jpeg(64, 48, 1));
    d.Write("c/1_cpu.jpg", TempDataset::Jpeg(40, 30, 2));
    d.Write("c/2_cpu.jpg", TempDataset::Jpeg(400, 300, 3));
    d.Write("c/3_cpu_bad.jpg", TempDataset::Truncated(80, 80, 4));
    d.Write("c/4_gpu.jpg", TempDataset::Jpeg(50, 50, 5));
    dataset = testing::OpenFlaggedDataset(d, 5);
  }
  std::vector<uint8_t> Bytes(int64_t index) const { return testing::FileBytes(*dataset, index); }
  TempDataset d;
  std::unique_ptr<ImageDataset> dataset;
};

// Places for 1 (3,600 bytes, aligned to 3,840) and 3 (19,200): 2 (360,000)
// is beyond the budget; 0 and 4 go to nvJPEG.
constexpr size_t kBudget = 32768;

std::vector<uint8_t> Packed(const image::DecodedImage& img) {
  std::vector<uint8_t> out;
  for (int y = 0; y < img.height; ++y) {
    const uint8_t* row = img.data + img.stride * y;
    out.insert(out.end(), row, row + size_t(img.width) * 3);
  }
  return out;
}

void ExpectPlan(const image::CropPlan& got, const image::CropPlan& want) {
  EXPECT_EQ(got.crop, want.crop);
  EXPECT_EQ(got.decode.scale_denom, want.decode.scale_denom);
  EXPECT_EQ(got.decode.rect.x, want.decode.rect.x);
  EXPECT_EQ(got.decode.rect.y, want.decode.rect.y);
  EXPECT_EQ(got.decode.rect.w, want.decode.rect.w);
  EXPECT_EQ(got.decode.rect.h, want.decode.rect.h);
}

TEST(CpuFileCache, PlacesInIndexOrderWhileTheBudgetLasts) {
  Fixture f;
  CpuFileCache cache(*f.dataset, kBudget);
  EXPECT_EQ(cache.bytes(), 3840u + 19200u);
  EXPECT_FALSE(cache.has_place(0));
  EXPECT_TRUE(cache.has_place(1));
  EXPECT_FALSE(cache.has_place(2));
  EXPECT_TRUE(cache.has_place(3));
  EXPECT_FALSE(cache.has_place(4));
  for (int64_t i = 0; i < 5; ++i) EXPECT_FALSE(cache.holds(i));
  EXPECT_EQ(cache.hits(), 0);
}

TEST(SampleRouter, RoutesByScanAndCachePlace) {
  Fixture f;
  CpuFileCache cache(*f.dataset, kBudget);
  SampleRouter router(*f.dataset, cache, 1);
  const image::TransformOptions& t = f.dataset->transform();
  const uint32_t epoch = 7;
  image::JpegDecoder reference;

  // nvJPEG takes it: the file is read, the plan is the scan's.
  FileBuffer file;
  GpuSample s;
  int64_t index = 0;
  ASSERT_TRUE(router.Route(0, epoch, index, file, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kNvJpeg);
  EXPECT_EQ(file.index, 0);
  EXPECT_EQ(file.bytes, f.Bytes(0));
  ExpectPlan(s.plan, image::PlanCrop(t, epoch, 0, 64, 48));

  // A cache place, not filled yet: decoded whole, for the cache.
  index = 1;
  ASSERT_TRUE(router.Route(0, epoch, index, file, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kCpuFullForCache);
  EXPECT_EQ(file.index, 1);
  auto full = reference.DecodeRgb(f.Bytes(1), 0);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(s.decoded, Packed(*full));
  ExpectPlan(s.plan, image::PlanCrop(t, epoch, 1, 40, 30));

  // The same file when nvJPEG rejected its batch: its crop, on the CPU.
  ASSERT_TRUE(router.Route(0, epoch, index, file, s, RouteFor::kForceCpu).ok());
  EXPECT_EQ(s.route, DecodeRoute::kCpuCropped);

  // No place: the DCT-scaled crop, as the CPU path decodes it.
  index = 2;
  ASSERT_TRUE(router.Route(0, epoch, index, file, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kCpuCropped);
  const image::CropPlan plan = image::PlanCrop(t, epoch, 2, 400, 300);
  ExpectPlan(s.plan, plan);
  EXPECT_GT(plan.decode.scale_denom, 1);
  const std::vector<uint8_t> bytes2 = f.Bytes(2);
  ASSERT_TRUE(reference.ReadHeader(bytes2, 0).ok());
  auto crop = reference.Decode(plan.decode.scale_denom, plan.decode.rect, true);
  ASSERT_TRUE(crop.ok());
  EXPECT_EQ(s.decoded, Packed(*crop));
  EXPECT_EQ(s.decoded_w, plan.decode.rect.w);
  EXPECT_EQ(s.decoded_h, plan.decode.rect.h);
  EXPECT_EQ(f.dataset->files_dropped_at_decode(), 0);

  // A bad file: Note [Dropped files], no sample (and no other index instead).
  index = 3;
  auto fill = router.Route(0, epoch, index, file, s, RouteFor::kHardware);
  ASSERT_TRUE(fill.ok()) << fill.status().ToString();
  EXPECT_EQ(*fill, SampleFill::kDropped);
  EXPECT_EQ(s.route, DecodeRoute::kDropped);
  EXPECT_EQ(f.dataset->files_dropped_at_decode(), 1);
  EXPECT_EQ(f.dataset->samples_dropped(), 1);
  // In a later epoch it is dropped without being read.
  FileBuffer untouched;
  GpuSample later;
  fill = router.Route(0, epoch + 1, index, untouched, later, RouteFor::kHardware);
  ASSERT_TRUE(fill.ok());
  EXPECT_EQ(*fill, SampleFill::kDropped);
  EXPECT_EQ(later.route, DecodeRoute::kDropped);
  EXPECT_EQ(untouched.index, -1) << "not read again";
  EXPECT_EQ(f.dataset->files_dropped_at_decode(), 1);
  EXPECT_EQ(f.dataset->samples_dropped(), 2);
}

TEST(SampleRouter, AFileReadAheadIsNotReadAgain) {
  Fixture f;
  CpuFileCache cache(*f.dataset, kBudget);
  SampleRouter router(*f.dataset, cache, 1);
  FileBuffer file;
  file.bytes = {1, 2, 3};
  file.index = 0;  // as if the prefetcher had read index 0
  GpuSample s;
  int64_t index = 0;
  ASSERT_TRUE(router.Route(0, 0, index, file, s, RouteFor::kHardware).ok());
  EXPECT_EQ(s.route, DecodeRoute::kNvJpeg);
  EXPECT_EQ(file.bytes, (std::vector<uint8_t>{1, 2, 3}));
}

TEST(FilePrefetcher, ReadsTheHintedFiles) {
  Fixture f;
  FilePrefetcher prefetcher(*f.dataset, true);
  prefetcher.Wait();  // nothing started: returns at once
  std::vector<FileBuffer> files;
  const std::vector<int64_t> hint = {2, 0, 99, -1};
  prefetcher.Start(&files, hint);
  prefetcher.Wait();
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].index, 2);
  EXPECT_EQ(files[0].bytes, f.Bytes(2));
  EXPECT_EQ(files[1].index, 0);
  EXPECT_EQ(files[1].bytes, f.Bytes(0));
  EXPECT_EQ(files[2].index, -1);  // out of range: skipped
  EXPECT_EQ(files[3].index, -1);

  prefetcher.Stop();
  std::vector<FileBuffer> after_stop;
  prefetcher.Start(&after_stop, hint);
  prefetcher.Wait();
  EXPECT_TRUE(after_stop.empty());
}

// A ReadEnv that, once armed, holds each file read until `want` reads are
// in flight at once (or 500 ms passed), and records the most in flight.
class ConcurrentReads : public ReadEnv {
 public:
  explicit ConcurrentReads(int want) : want_(want) {}
  Status ReadFile(const std::string& path, std::vector<uint8_t>& out, size_t limit) override {
    if (armed.load()) {
      std::unique_lock<std::mutex> lock(mu_);
      most_ = std::max(most_, ++in_flight_);
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return most_ >= want_; });
      --in_flight_;
    }
    return ReadEnv::ReadFile(path, out, limit);
  }
  int most() {
    std::lock_guard<std::mutex> lock(mu_);
    return most_;
  }
  std::atomic<bool> armed{false};

 private:
  const int want_;
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
  int most_ = 0;
};

// A dataset of files is read on read_threads threads at once (3 reads are in
// flight together): every file lands in its own buffer, known-bad and
// out-of-range ones are skipped, and a batch larger than the pool (and a
// second batch) reads the same.
TEST(FilePrefetcher, ReadsAFoldersFilesOnSeveralThreadsAtOnce) {
  Fixture f;
  ConcurrentReads env(3);
  std::unique_ptr<ImageDataset> dataset = testing::OpenFlaggedDataset(f.d, 5, &env);
  ASSERT_TRUE(dataset);
  env.armed = true;
  ASSERT_TRUE(dataset->OnDecodeError(3, DataLossError("truncated")).ok());
  FilePrefetcher prefetcher(*dataset, true, nullptr, 0, /*read_threads=*/3);
  EXPECT_EQ(prefetcher.read_threads(), 3);
  std::vector<int64_t> hint;
  for (int round = 0; round < 4; ++round) {
    for (int64_t i = 4; i >= -1; --i) hint.push_back(i);
  }
  std::vector<FileBuffer> files;
  for (int batch = 0; batch < 2; ++batch) {
    prefetcher.Start(&files, hint);
    prefetcher.Wait();
    ASSERT_EQ(files.size(), hint.size());
    for (size_t i = 0; i < hint.size(); ++i) {
      const int64_t want = hint[i];
      if (want < 0 || want == 3) {
        EXPECT_EQ(files[i].index, -1) << i;
        continue;
      }
      EXPECT_EQ(files[i].index, want) << i;
      EXPECT_EQ(files[i].bytes, f.Bytes(want)) << i;
    }
    std::reverse(hint.begin(), hint.end());
    files.clear();
  }
  EXPECT_EQ(env.most(), 3) << "the reads did not run at once";
  FilePrefetcher one(*dataset, true);
  EXPECT_EQ(one.read_threads(), 1);
}

// Note [Dropped files]: a file known bad is not read ahead either.
TEST(FilePrefetcher, SkipsFilesKnownBad) {
  Fixture f;
  ASSERT_TRUE(f.dataset->OnDecodeError(3, DataLossError("truncated")).ok());
  FilePrefetcher prefetcher(*f.dataset, true);
  std::vector<FileBuffer> files;
  const std::vector<int64_t> hint = {3, 4};
  prefetcher.Start(&files, hint);
  prefetcher.Wait();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].index, -1);
  EXPECT_EQ(files[1].index, 4);
}

// Note [Pinned bitstreams]: Start's `then` runs on the read-ahead thread
// after the reads (it sees the files read), before Wait() returns; an
// exception it throws is only logged; it does not run when nothing starts.
TEST(FilePrefetcher, ThenRunsAfterTheReadsOnTheThread) {
  Fixture f;
  FilePrefetcher prefetcher(*f.dataset, true);
  std::vector<FileBuffer> files;
  const std::vector<int64_t> hint = {1, 2};
  std::vector<int64_t> seen, given;
  std::thread::id ran_on;
  prefetcher.Start(&files, hint, [&](std::span<const int64_t> read) {
    for (const FileBuffer& file : files) seen.push_back(file.index);
    given.assign(read.begin(), read.end());
    ran_on = std::this_thread::get_id();
  });
  prefetcher.Wait();
  EXPECT_EQ(seen, hint);
  EXPECT_EQ(given, hint);
  EXPECT_NE(ran_on, std::thread::id());
  EXPECT_NE(ran_on, std::this_thread::get_id());

  prefetcher.Start(&files, hint,
                   [](std::span<const int64_t>) { throw std::runtime_error("staging failed"); });
  prefetcher.Wait();  // logged; the thread goes on
  int runs = 0;
  prefetcher.Start(&files, hint, [&](std::span<const int64_t>) { ++runs; });
  prefetcher.Wait();
  EXPECT_EQ(runs, 1);
  prefetcher.Start(&files, {},
                   [&](std::span<const int64_t>) { ++runs; });  // nothing to read: nothing starts
  prefetcher.Wait();
  prefetcher.Stop();
  prefetcher.Start(&files, hint, [&](std::span<const int64_t>) { ++runs; });
  prefetcher.Wait();
  EXPECT_EQ(runs, 1);
}

TEST(FilePrefetcher, DisabledReadsNothing) {
  Fixture f;
  FilePrefetcher prefetcher(*f.dataset, false);
  std::vector<FileBuffer> files;
  const std::vector<int64_t> hint = {1};
  prefetcher.Start(&files, hint);
  prefetcher.Wait();
  EXPECT_TRUE(files.empty());
}

// Note [Region decode]: the region holds every full-size pixel the kernel
// reads for the plan (its rect times the box, clipped to the image), starts
// on 16-pixel multiples (so on box multiples), ends on one or at the image's
// edge, and stays inside the image; the kernel's shifted rect then lies in
// the region scaled by the box. Over many sizes, epochs and both transforms.
TEST(DecodeRegionTest, CoversTheKernelsReadsOnMcuEdges) {
  int widened = 0, samples = 0;
  for (auto kind : {image::TransformOptions::Kind::kTrain, image::TransformOptions::Kind::kEval}) {
    image::TransformOptions t;
    t.kind = kind;
    for (int width : {1, 15, 16, 17, 224, 225, 333, 500, 640, 1023, 4000}) {
      for (int height : {1, 16, 31, 240, 375, 481, 3000}) {
        for (int64_t index = 0; index < 12; ++index) {
          SCOPED_TRACE(std::to_string(width) + "x" + std::to_string(height) + " #" +
                       std::to_string(index));
          const image::DecodePlan plan = image::PlanCrop(t, 3, index, width, height).decode;
          const image::PixelRect r = DecodeRegion(plan, width, height);
          const int box = plan.scale_denom;
          ++samples;
          ASSERT_EQ(r.x % 16, 0);
          ASSERT_EQ(r.y % 16, 0);
          ASSERT_GE(r.x, 0);
          ASSERT_GE(r.y, 0);
          ASSERT_GT(r.w, 0);
          ASSERT_GT(r.h, 0);
          ASSERT_LE(r.x + r.w, width);
          ASSERT_LE(r.y + r.h, height);
          ASSERT_TRUE((r.x + r.w) % 16 == 0 || r.x + r.w == width);
          ASSERT_TRUE((r.y + r.h) % 16 == 0 || r.y + r.h == height);
          // The full-size pixels the kernel reads (ScaledPixel's box blocks).
          ASSERT_LE(r.x, plan.rect.x * box);
          ASSERT_LE(r.y, plan.rect.y * box);
          ASSERT_GE(r.x + r.w, std::min((plan.rect.x + plan.rect.w) * box, width));
          ASSERT_GE(r.y + r.h, std::min((plan.rect.y + plan.rect.h) * box, height));
          // The rect, shifted into the region, inside its box-scaled size.
          const int rx = plan.rect.x - r.x / box, ry = plan.rect.y - r.y / box;
          ASSERT_GE(rx, 0);
          ASSERT_GE(ry, 0);
          ASSERT_LE(rx + plan.rect.w, (r.w + box - 1) / box);
          ASSERT_LE(ry + plan.rect.h, (r.h + box - 1) / box);
          widened += r.w * r.h < width * height;
        }
      }
    }
  }
  // Most crops leave part of the image undecoded.
  EXPECT_GT(widened, samples / 2);
}

// A truncated file has no EOI marker and goes to the CPU decoder; one padded
// after its EOI (up to 32 bytes in all) still has it. A file's last bytes are
// read unless the bytes given are all of it.
TEST(EoiProbe, FindsTheMarkerAmongTheLastBytes) {
  const std::vector<uint8_t> jpeg = TempDataset::Jpeg(64, 48, 7);
  EXPECT_TRUE(EndsWithEoi(jpeg));
  std::vector<uint8_t> padded = jpeg;
  padded.insert(padded.end(), 30, 0);
  EXPECT_TRUE(EndsWithEoi(padded));
  padded.push_back(0);  // FF D9 now starts 32 bytes from the end: out of reach
  EXPECT_FALSE(EndsWithEoi(padded));
  EXPECT_FALSE(EndsWithEoi(TempDataset::Truncated(64, 48, 7)));
  EXPECT_FALSE(EndsWithEoi(std::vector<uint8_t>{0xFF, 0xD9}));  // under 4 bytes

  TempDataset d;
  const std::string whole = d.Write("whole.jpg", jpeg);
  const std::string cut = d.Write("cut.jpg", TempDataset::Truncated(64, 48, 7));
  const std::span<const uint8_t> header(jpeg.data(), 64);
  EXPECT_TRUE(EndsWithEoi(whole, header, /*whole=*/false));
  EXPECT_FALSE(EndsWithEoi(cut, header, /*whole=*/false));
  EXPECT_FALSE(EndsWithEoi(whole, header, /*whole=*/true));  // only the header given
  EXPECT_TRUE(EndsWithEoi(cut, jpeg, /*whole=*/true));       // the bytes given count
  EXPECT_FALSE(EndsWithEoi(d.path("missing.jpg"), header, /*whole=*/false));
}

}  // namespace
}  // namespace batchcast
