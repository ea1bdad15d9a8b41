// The GPU path (nvJPEG + the fused kernel, CudaImageSource)
// and the CPU path (libjpeg-turbo + OpenCV, ImageSource) agree: same dataset,
// seed, epoch and samples, eval and train, float32 output. Also: the kernel's
// dtype and layout variants are exact conversions of its float32 NCHW output.
//
// The dataset comes from tools/make_dataset.py (with --hazards: progressive,
// grayscale, CMYK, truncated and invalid files), generated into a temporary
// folder; BC_GPU_TEST_DATA names an existing one instead. Skipped without a
// GPU or without nvJPEG in this build.
//
// Also: Note [Dropped files] on the GPU path, end to end: files that
// fail only when decoded are dropped, never replaced, from every later epoch,
// with consumers of several batch sizes reading a device ring; and a folder of
// mixed formats (Note [Other formats on the GPU path]): every sample once,
// the other formats' pixels those of the CPU path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include "../e2e/device_util.h"
#include "../e2e/dropped_files.h"
#include "../e2e/process.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/image/half.h"
#include "batchcast/image/image_format.h"
#include "batchcast/image/jpeg.h"
#include "batchcast/image/pipeline.h"
#include "batchcast/server/server.h"
#include "batchcast/sources/make_source.h"
#include "core/src/sampler.h"
#include "sources/src/image_source.h"
#include "sources/src/tar_archive.h"

namespace batchcast {
namespace {

// Bounds (normalized units; one 8-bit level is 1/255/std, about 0.017).
// nvJPEG and libjpeg-turbo decode the same file to pixels that differ by a
// level or two (IDCT and chroma upsampling rounding), and the GPU emulates
// libjpeg's DCT scaling by block averaging: the mean absolute difference over
// all pixels stays well below one level.
constexpr double kMeanAbsBound = 0.02;
// Files decoded on the CPU by both paths (progressive, CMYK) differ only by
// the resize's rounding: below a tenth of a level on average.
constexpr double kFallbackMeanAbsBound = 0.004;

const std::string& Dataset() {
  static const std::string dir = [] {
    if (const char* d = std::getenv("BC_GPU_TEST_DATA")) return std::string(d);
    const std::string out = testing::TempDir() + "/data";
    const std::string cmd = "python3 " BC_SOURCE_DIR "/tools/make_dataset.py " + out +
                            " --classes 4 --per-class 24 --hazards --seed 3 --quiet";
    if (std::system(cmd.c_str()) != 0) return std::string();
    return out;
  }();
  return dir;
}

struct Output {
  std::vector<int64_t> indices;
  std::vector<uint8_t> image;  // all samples, host copy
  std::vector<int64_t> labels;
  size_t per_sample = 0;
  nlohmann::json counters;
};

// The read-ahead hint RunSource gives FillBatch: none, the batch that comes
// next (as the server does), or that one except for every third batch, whose
// hint names other samples (Note [Fallback ahead]: a wrong hint is decoded
// in its own batch).
enum class Hints { kNone, kRight, kSomeWrong };

// Runs `source` over dataset indices [0, count) in batches, epoch `epoch`.
Output RunSource(Source& source, uint32_t epoch, int64_t count, int batch,
                 Hints hints = Hints::kNone) {
  Output out;
  const std::vector<FieldSpec> fields = source.fields();
  out.per_sample = fields[0].bytes_per_sample();
  out.image.resize(out.per_sample * count);
  out.labels.resize(count);
  out.indices.resize(count);
  const bool device = source.output_memory() == MemoryKind::kCuda;
  std::optional<cuda::Stream> stream;
  cuda::DeviceBuffer dev;
  if (device) {
    auto s = cuda::Stream::Create(0);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    stream.emplace(std::move(*s));
    auto d = cuda::DeviceBuffer::Create(0, (out.per_sample + 8) * batch);
    EXPECT_TRUE(d.ok());
    dev = std::move(*d);
  }
  std::vector<uint8_t> host_img(out.per_sample * batch);
  std::vector<int64_t> host_lab(batch);
  for (int64_t off = 0; off < count; off += batch) {
    const int64_t n = std::min<int64_t>(batch, count - off);
    for (int64_t i = 0; i < n; ++i) out.indices[off + i] = off + i;
    SlotView t;
    t.epoch = epoch;
    t.indices = std::span<int64_t>(out.indices.data() + off, n);
    t.field_bytes = {out.per_sample, 8};
    if (device) {
      t.field_data = {dev.data(), dev.data() + out.per_sample * batch};
      t.device = Device{MemoryKind::kCuda, 0};
      t.stream = stream->ref();
    } else {
      t.field_data = {host_img.data(), reinterpret_cast<uint8_t*>(host_lab.data())};
    }
    std::vector<int64_t> ahead;
    const int64_t next_n = std::min<int64_t>(batch, std::max<int64_t>(0, count - off - n));
    for (int64_t i = 0; i < next_n && hints != Hints::kNone; ++i) ahead.push_back(off + n + i);
    if (hints == Hints::kSomeWrong && (off / batch) % 3 == 2 && !ahead.empty()) {
      for (int64_t& i : ahead) i = (i + 1) % count;
    }
    Result<uint32_t> kept = source.FillBatch(t, ReadAhead{ahead, epoch});
    EXPECT_TRUE(kept.ok()) << kept.status().ToString();
    // Dropped files (Note [Dropped files]): the kept samples come first and
    // t.indices names them; the rest of this batch's places are marked -1.
    const int64_t k = kept.ok() ? static_cast<int64_t>(*kept) : 0;
    for (int64_t i = k; i < n; ++i) out.indices[off + i] = -1;
    if (device) {
      EXPECT_TRUE(
          cuda::CopyAsync(host_img.data(), dev.data(), out.per_sample * n, stream->ref()).ok());
      EXPECT_TRUE(cuda::CopyAsync(host_lab.data(), dev.data() + out.per_sample * batch, 8 * n,
                                  stream->ref())
                      .ok());
      EXPECT_TRUE(stream->Synchronize().ok());
    }
    std::copy_n(host_img.data(), out.per_sample * n, out.image.data() + out.per_sample * off);
    std::copy_n(host_lab.data(), n, out.labels.data() + off);
  }
  for (const auto& [k, v] : source.counters()) out.counters[k] = v;
  return out;
}

SourceOptions Options(const std::string& transform, const std::string& device,
                      const std::string& dtype = "float32", const std::string& layout = "nchw") {
  SourceOptions o;
  o.data = Dataset();
  o.transform = *ParseTransformKind(transform);
  o.size = 224;
  o.dtype = *ParseDType(dtype);
  o.layout = *ParseImageLayout(layout);
  o.seed = 11;
  o.device = *ParseDevice(device);
  o.decode = device == "cpu" ? DecodeMode::kCpu : DecodeMode::kGpu;
  o.workers = 2;
  return o;
}

// Files the GPU path sends to the CPU decoder too (by their header): with
// `transcode` (Note [Transcoded progressive files]) the progressive YCbCr and
// gray files go to the hardware engine as baseline bytes instead.
std::vector<bool> CpuDecodedFilesOf(const std::string& dir, int64_t count, bool transcode = false) {
  auto entries = ListImageDataset(dir);
  EXPECT_TRUE(entries.ok());
  std::vector<bool> out;
  for (const ImageEntry& e : *entries) {
    std::vector<uint8_t> bytes;
    std::FILE* f = std::fopen(e.path.c_str(), "rb");
    if (f == nullptr) continue;
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
    std::fclose(f);
    if (image::SniffImageFormat(bytes) != image::ImageFormat::kJpeg) {
      // Another format (Note [Image formats]): the CPU decoder, when usable.
      if (image::ReadImageHeader(bytes).ok()) out.push_back(true);
      continue;
    }
    auto info = image::ReadJpegInfo(bytes);
    if (!info.ok()) continue;  // dropped at scan by both paths
    using CS = image::JpegInfo::ColorSpace;
    const bool odd_color = info->color != CS::kYCbCr && info->color != CS::kGray;
    out.push_back(odd_color || (info->progressive && !transcode));
  }
  EXPECT_EQ(static_cast<int64_t>(out.size()), count);
  return out;
}

std::vector<bool> CpuDecodedFiles(int64_t count, bool transcode) {
  return CpuDecodedFilesOf(Dataset(), count, transcode);
}

class GpuImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BC_REQUIRE_GPU();
    if (!cuda::BuiltWithNvJpeg()) GTEST_SKIP() << "this build has no nvJPEG";
    if (Dataset().empty()) GTEST_SKIP() << "could not generate a dataset (python3 + PIL)";
  }
};

TEST_F(GpuImageTest, CpuAndGpuPathsAgree) {
  for (const char* transform : {"eval", "train"}) {
    SCOPED_TRACE(transform);
    // eval: progressive files transcoded for the engine (the default); train:
    // decoded on the CPU pool (--transcode-cache-mb 0).
    const bool transcode = std::string(transform) == "eval";
    SourceOptions gpu_options = Options(transform, "cuda:0");
    if (!transcode) gpu_options.transcode_cache_mb = 0;
    auto cpu = MakeSource(Options(transform, "cpu"));
    auto gpu = MakeSource(gpu_options);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    ASSERT_EQ((*gpu)->output_memory(), MemoryKind::kCuda) << (*gpu)->description();
    ASSERT_EQ((*cpu)->size(), (*gpu)->size());
    const int64_t count = static_cast<int64_t>((*cpu)->size());
    const std::vector<bool> fallback = CpuDecodedFiles(count, transcode);
    const Output a = RunSource(**cpu, 3, count, 32);
    // The GPU source as the server drives it (read-ahead hints, the next
    // batch's fallback decodes ahead), and with some wrong hints.
    const Output b = RunSource(
        **gpu, 3, count, 32, std::string(transform) == "train" ? Hints::kSomeWrong : Hints::kRight);
    ASSERT_EQ(a.indices, b.indices) << "both paths drop the same files";
    const size_t elems = a.per_sample / 4;
    double sum = 0, sum_fb = 0, max_abs = 0, worst_sample = 0;
    int64_t n_fb = 0, kept = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (a.indices[i] < 0) continue;  // a place left by a dropped file
      ++kept;
      EXPECT_EQ(a.labels[i], b.labels[i]) << "sample " << i;
      const auto* x = reinterpret_cast<const float*>(a.image.data() + a.per_sample * i);
      const auto* y = reinterpret_cast<const float*>(b.image.data() + b.per_sample * i);
      double s = 0;
      for (size_t k = 0; k < elems; ++k) {
        ASSERT_TRUE(std::isfinite(y[k]));
        const double d = std::fabs(static_cast<double>(x[k]) - y[k]);
        s += d;
        max_abs = std::max(max_abs, d);
      }
      s /= elems;
      worst_sample = std::max(worst_sample, s);
      sum += s;
      const int64_t file = a.indices[i];
      if (fallback[file]) {
        sum_fb += s;
        ++n_fb;
      }
    }
    const double mean = sum / kept;
    std::cout << "[ " << transform << " ] " << kept << " samples, mean |cpu - gpu| = " << mean
              << ", worst sample mean = " << worst_sample << ", max = " << max_abs << "; " << n_fb
              << " CPU-decoded files: mean " << (n_fb ? sum_fb / n_fb : 0.0) << "; gpu counters "
              << b.counters.dump() << std::endl;
    RecordProperty(std::string(transform) + "_mean_abs_diff", std::to_string(mean));
    EXPECT_LT(mean, kMeanAbsBound);
    EXPECT_GT(b.counters.value("gpu_decoded", 0), count / 2) << "nvJPEG decoded too few files";
    const int64_t cpu_files = std::count(fallback.begin(), fallback.end(), true);
    if (transcode) {
      EXPECT_GT(b.counters.value("transcoded", 0), 0) << "the dataset's progressive files";
      EXPECT_EQ(b.counters.value("transcode_cache_files", 0), b.counters.value("transcoded", 0));
    } else {
      EXPECT_EQ(b.counters.value("transcoded", 0), 0);
      EXPECT_GT(cpu_files, 0) << "the dataset's progressive files, on the CPU pool";
    }
    if (n_fb > 0) {
      EXPECT_LT(sum_fb / n_fb, kFallbackMeanAbsBound);
    }
  }
}

// Note [Split hardware batch]: with 2 or 3 nvJPEG calls per batch (odd
// batch sizes: runs of unequal length) the same files decode into the same
// places as with one, bit for bit, in both buffer sets, with the read-ahead
// hints as the server gives them; with 2 calls also on high-priority side
// streams (Note [Server stream priority]).
TEST_F(GpuImageTest, SplitHardwareBatchGivesTheSamePixels) {
  SourceOptions o = Options("train", "cuda:0", "uint8");
  auto one = MakeSource(o);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const int64_t count = static_cast<int64_t>((*one)->size());
  const Output a = RunSource(**one, 5, count, 27, Hints::kRight);
  EXPECT_GT(a.counters.value("gpu_decoded", 0), count / 2);
  for (int calls : {2, 3, -2}) {
    SCOPED_TRACE(calls);
    o.nvjpeg_calls = std::abs(calls);
    o.gpu_priority = calls < 0 ? StreamPriority::kHigh : StreamPriority::kNormal;
    auto split = MakeSource(o);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    EXPECT_NE((*split)->description().find(std::to_string(o.nvjpeg_calls) + " calls per batch"),
              std::string::npos)
        << (*split)->description();
    EXPECT_EQ((*split)->description().find("high-priority streams") != std::string::npos, calls < 0)
        << (*split)->description();
    const Output b = RunSource(**split, 5, count, 27, Hints::kRight);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_TRUE(a.image == b.image) << "the pixels differ from one call's";
    EXPECT_EQ(a.counters.value("gpu_decoded", 0), b.counters.value("gpu_decoded", 0));
    EXPECT_EQ(a.counters.value("cpu_decoded", 0), b.counters.value("cpu_decoded", 0));
  }
}

// Note [Region decode]: the hardware engine decoding only each crop's region
// gives the same pixels, bit for bit, as whole images, for both transforms
// (train: random crops with DCT-scaling boxes; eval: the centre square), and
// the description says which it does.
TEST_F(GpuImageTest, RegionDecodeGivesTheWholeImagesPixels) {
  for (const char* transform : {"train", "eval"}) {
    SCOPED_TRACE(transform);
    SourceOptions o = Options(transform, "cuda:0", "uint8");
    o.nvjpeg_region = false;
    auto whole = MakeSource(o);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    EXPECT_NE((*whole)->description().find("whole images"), std::string::npos);
    o.nvjpeg_region = true;
    auto region = MakeSource(o);
    ASSERT_TRUE(region.ok()) << region.status().ToString();
    EXPECT_NE((*region)->description().find("crop regions"), std::string::npos)
        << (*region)->description();
    const int64_t count = static_cast<int64_t>((*whole)->size());
    const Output a = RunSource(**whole, 5, count, 32, Hints::kRight);
    const Output b = RunSource(**region, 5, count, 32, Hints::kRight);
    EXPECT_GT(b.counters.value("gpu_decoded", 0), count / 2);
    EXPECT_EQ(b.counters.value("gpu_batch_failures", -1), 0);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.labels, b.labels);
    ASSERT_EQ(a.image.size(), b.image.size());
    size_t differ = 0;
    int worst = 0;
    for (size_t i = 0; i < a.image.size(); ++i) {
      const int d = std::abs(static_cast<int>(a.image[i]) - static_cast<int>(b.image[i]));
      differ += d != 0;
      worst = std::max(worst, d);
    }
    EXPECT_EQ(differ, 0u) << "of " << a.image.size() << " bytes differ, by at most " << worst;
  }
}

// Note [Pinned bitstreams]: with read-ahead hints the read-ahead thread
// copies the hardware candidates into page-locked memory (StageFiles) and
// nvJPEG reads them there; without hints, or with a wrong hint, the pipeline
// thread copies them itself. Every way gives the same pixels, bit for bit,
// over several batches in both buffer sets. (Transcoding is off: without
// hints the progressive files would go to the CPU decoder, with them to the
// engine, Note [Transcoded progressive files].)
TEST_F(GpuImageTest, StagedBitstreamsGiveTheSamePixels) {
  SourceOptions o = Options("train", "cuda:0", "uint8");
  o.transcode_cache_mb = 0;
  auto source = [&] {
    auto s = MakeSource(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(*s);
  };
  auto plain = source();
  const int64_t count = static_cast<int64_t>(plain->size());
  const Output a = RunSource(*plain, 2, count, 16, Hints::kNone);
  EXPECT_GT(a.counters.value("gpu_decoded", 0), count / 2);
  for (Hints hints : {Hints::kRight, Hints::kSomeWrong}) {
    SCOPED_TRACE(hints == Hints::kRight ? "right hints" : "some wrong hints");
    auto staged = source();
    const Output b = RunSource(*staged, 2, count, 16, hints);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_TRUE(a.image == b.image) << "the pixels differ from those of unstaged files";
    EXPECT_EQ(a.counters.value("gpu_decoded", 0), b.counters.value("gpu_decoded", 0));
  }
}
TEST_F(GpuImageTest, DtypesAndLayoutsAreExactConversions) {
  auto f32 = MakeSource(Options("train", "cuda:0"));
  auto f16 = MakeSource(Options("train", "cuda:0", "float16", "nhwc"));
  auto u8 = MakeSource(Options("train", "cuda:0", "uint8", "nchw"));
  ASSERT_TRUE(f32.ok() && f16.ok() && u8.ok());
  const int64_t count = std::min<int64_t>(64, static_cast<int64_t>((*f32)->size()));
  const Output a = RunSource(**f32, 1, count, 32);
  const Output h = RunSource(**f16, 1, count, 32);
  const Output u = RunSource(**u8, 1, count, 32);
  const int s = 224, plane = s * s;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
  int64_t bad16 = 0, bad8 = 0;
  ASSERT_EQ(a.indices, h.indices);
  ASSERT_EQ(a.indices, u.indices);
  for (int64_t i = 0; i < count; ++i) {
    if (a.indices[i] < 0) continue;  // a place left by a dropped file
    const auto* x = reinterpret_cast<const float*>(a.image.data() + a.per_sample * i);
    const auto* y = reinterpret_cast<const uint16_t*>(h.image.data() + h.per_sample * i);
    const uint8_t* v = u.image.data() + u.per_sample * i;
    for (int c = 0; c < 3; ++c) {
      for (int p = 0; p < plane; ++p) {
        const float f = x[c * plane + p];
        if (y[p * 3 + c] != image::FloatToHalf(f)) ++bad16;
        const float from_u8 = (static_cast<float>(v[c * plane + p]) / 255.0f - mean[c]) / stdv[c];
        if (from_u8 != f) ++bad8;
      }
    }
  }
  EXPECT_EQ(bad16, 0) << "float16 NHWC is not the rounded float32 NCHW";
  EXPECT_EQ(bad8, 0) << "uint8 is not the byte the float32 output normalizes";
}

// Note [Dropped files] with a device ring, end to end: a server on
// cuda:0 over a dataset with files that fail only when decoded, and two
// consumers (batch 5 without drop_last, 12 with) reading two epochs. In
// every consumer epoch each index arrives at most once, the dropped ones
// never, the others exactly once in the sampler's order; a file dropped once
// stays dropped; every sample of a good file is its own image: close to the
// CPU path's decode of its index (`decode` gpu: nvJPEG + the fused kernel,
// the GPU source assigning output positions) or equal to it (`decode` cpu:
// the CPU pipeline compacting in pinned staging, copied to the slot).
// Truncated files are always dropped (they go to the CPU decoder); with
// nvJPEG a corrupt file it decodes without complaint is a sample of its own
// (garbage pixels under its own index).
void CheckDroppedFilesOnDeviceRing(DecodeMode decode) {
  static const std::string data = [] {
    const char* python = std::getenv("BATCHCAST_PYTHON");
    const std::string out = testing::TempDir() + "/decode_failures";
    const std::string cmd = std::string(python != nullptr ? python : "python3") +
                            " " BC_SOURCE_DIR "/tools/make_dataset.py " + out +
                            " --classes 3 --per-class 12 --decode-failures 6 --seed 4 --quiet";
    return std::system(cmd.c_str()) == 0 ? out : std::string();
  }();
  ASSERT_FALSE(data.empty()) << "could not generate the dataset";
  auto entries = ListImageDataset(data);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 42u);
  const testing::MarkedListing listing = testing::Mark(*entries, "hazard_decode_");
  const std::set<int64_t>& bad = listing.marked;
  const std::set<int64_t> truncated = testing::Mark(*entries, "_truncated").marked;
  ASSERT_EQ(bad.size(), 6u);
  ServerOptions o;
  o.name = testing::UniqueName("gpudrop");
  o.source = Options("train", "cuda:0");
  o.source.data = data;
  o.source.decode = decode;
  std::vector<testing::ConsumerShape> shape = {{5, false, 0}, {12, true, 0}};
  const testing::ServedEpochs served = testing::ServeEpochsToShapes(o, 2, shape);
  const auto& reads = served.reads;
  ASSERT_EQ(reads.size(), shape.size());
  ASSERT_EQ(reads[0].size(), 2u);

  // What was dropped in each epoch: the bad files the batch-5 consumer (no
  // drop_last: every sample) did not get.
  std::vector<std::set<int64_t>> dropped(2);
  for (uint32_t e = 0; e < 2; ++e) {
    const std::set<int64_t> got(reads[0][e].indices.begin(), reads[0][e].indices.end());
    for (int64_t i : bad) {
      if (got.count(i) == 0) dropped[e].insert(i);
    }
    for (int64_t i : truncated) EXPECT_EQ(dropped[e].count(i), 1u) << "truncated index " << i;
    if (decode == DecodeMode::kCpu) {
      EXPECT_EQ(dropped[e], bad) << "libjpeg-turbo fails them all";
    }
  }
  for (int64_t i : dropped[0]) EXPECT_EQ(dropped[1].count(i), 1u) << "dropped again: " << i;
  auto sampler = Sampler::Make(entries->size(), SamplerOptions{o.source.seed, true, 0, 1});
  ASSERT_TRUE(sampler.ok());
  auto transform = MakeTransformOptions(o.source);
  ASSERT_TRUE(transform.ok());
  image::CpuImagePipeline pipeline(*transform);
  // Mean |difference| of one sample to the CPU decode of its own index: a
  // level or two with nvJPEG (another image would be far above 0.2), none
  // with the CPU pipeline.
  const double per_sample_bound = decode == DecodeMode::kGpu ? 0.2 : 1e-9;
  double sum = 0;
  int64_t compared = 0;
  for (size_t k = 0; k < shape.size(); ++k) {
    SCOPED_TRACE("consumer of batch " + std::to_string(shape[k].batch));
    for (uint32_t e = 0; e < 2; ++e) {
      SCOPED_TRACE("epoch " + std::to_string(e));
      const testing::EpochRead& read = reads[k][e];
      testing::ExpectEpochMinusDropped(read, sampler->EpochOrder(e), dropped[e], shape[k],
                                       listing.label_of);
      for (size_t i = 0; i < read.indices.size(); ++i) {
        const int64_t index = read.indices[i];
        if (bad.count(index)) continue;  // nvJPEG's pixels of a corrupt file: nothing to match
        std::vector<uint8_t> bytes, want(pipeline.output_bytes());
        ASSERT_TRUE(ReadFileBytes((*entries)[size_t(index)].path, bytes).ok());
        ASSERT_TRUE(pipeline.Process(bytes, e, index, want.data()).ok());
        ASSERT_EQ(read.images[i].size(), want.size());
        const auto* x = reinterpret_cast<const float*>(want.data());
        const auto* y = reinterpret_cast<const float*>(read.images[i].data());
        const size_t elems = want.size() / 4;
        double d = 0;
        for (size_t j = 0; j < elems; ++j) d += std::fabs(double(x[j]) - double(y[j]));
        d /= double(elems);
        EXPECT_LE(d, per_sample_bound)
            << "sample " << i << " (index " << index << ") is not its own image";
        sum += d;
        ++compared;
      }
    }
  }
  ASSERT_GT(compared, 0);
  EXPECT_LT(sum / double(compared), kMeanAbsBound);
  const nlohmann::json st = nlohmann::json::parse(served.server->StatsJson());
  EXPECT_EQ(st["source_counters"]["files_dropped_at_decode"].get<int64_t>(),
            static_cast<int64_t>(dropped[1].size()))
      << st.dump();
  EXPECT_EQ(st["source_counters"]["samples_dropped"].get<int64_t>(),
            static_cast<int64_t>(dropped[0].size() + dropped[1].size()));
  EXPECT_EQ(st["holes"].get<int64_t>(),
            static_cast<int64_t>(dropped[0].size() + dropped[1].size()));
  // docs/stats.md: the stages of the source in use, the device
  // cache off by default, and the MPS probe of a CUDA ring.
  const std::vector<std::string> stages =
      decode == DecodeMode::kGpu
          ? std::vector<std::string>{"read",    "hw_decode", "fallback_decode", "fallback_wait",
                                     "augment", "gpu_wait",  "slot_wait"}
          : std::vector<std::string>{"read", "decode_augment", "slot_wait"};
  for (const std::string& stage : stages) {
    EXPECT_TRUE(st["producer_stage_s"].contains(stage)) << stage << " in " << st.dump();
  }
  if (decode == DecodeMode::kGpu) {
    EXPECT_GT(st["producer_stage_s"]["hw_decode"].get<double>(), 0);
    // The pipeline thread and the read-ahead thread (Note [Pinned bitstreams]).
    EXPECT_EQ(st["producer_stage_threads"]["gpu_wait"].get<int>(), 2) << st.dump();
    EXPECT_GT(st["producer_stage_s"]["fallback_decode"].get<double>(), 0)
        << "the truncated files decode on the fallback pool";
    EXPECT_EQ(st["source_counters"]["device_cache_on"].get<int64_t>(), 0);
    EXPECT_EQ(st["source_counters"]["cpu_file_cache_hits"].get<int64_t>(), 0);
  }
  EXPECT_TRUE(st.contains("mps")) << st.dump();
  std::cout << "decode " << DecodeModeName(decode) << ": dropped per epoch " << dropped[0].size()
            << ", " << dropped[1].size() << " of " << bad.size() << " bad files; counters "
            << st["source_counters"].dump() << std::endl;
}

// Tar shards packed from the dataset folder (tools/make_dataset.py --shards)
// give, on the GPU path, exactly the folder's pixels and labels for every
// index: same bytes, same (seed, epoch, index).
TEST_F(GpuImageTest, ShardsGiveTheFolderPixels) {
  if (!BuiltWithTar()) GTEST_SKIP() << "built without libarchive (BATCHCAST_WITH_TAR)";
  const std::string shards = testing::TempDir() + "/shards";
  const std::string cmd = "python3 " BC_SOURCE_DIR "/tools/make_dataset.py " + shards +
                          " --shards 10 --from-folder " + Dataset() + " --quiet";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  SourceOptions o = Options("train", "cuda:0");
  auto folder = MakeSource(o);
  ASSERT_TRUE(folder.ok()) << folder.status().ToString();
  o.data = shards;  // the directory of .tar files
  auto tars = MakeSource(o);
  ASSERT_TRUE(tars.ok()) << tars.status().ToString();
  const int64_t n = static_cast<int64_t>((*folder)->size());
  ASSERT_EQ((*tars)->size(), static_cast<uint64_t>(n));
  for (uint32_t epoch = 0; epoch < 2; ++epoch) {
    // Both as the server drives them: the progressive files transcoded for
    // the engine in both (Note [Transcoded progressive files]).
    Output a = RunSource(**folder, epoch, n, 16, Hints::kRight);
    Output b = RunSource(**tars, epoch, n, 16, Hints::kRight);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_TRUE(a.image == b.image) << "epoch " << epoch;
  }
}

TEST_F(GpuImageTest, FilesThatFailToDecodeAreDroppedFromEveryEpoch) {
  CheckDroppedFilesOnDeviceRing(DecodeMode::kGpu);
}

TEST_F(GpuImageTest, FilesThatFailToDecodeAreDroppedWithCpuDecodeOnADeviceRing) {
  CheckDroppedFilesOnDeviceRing(DecodeMode::kCpu);
}

// Note [Other formats on the GPU path]: a folder of every format
// tools/make_dataset.py --formats mixed writes (PNG 8/16-bit, palette, gray,
// alpha; WebP; BMP; TIFF; PPM; a PNG named .JPEG) on a device ring: every
// sample once with its label, none dropped, the JPEGs decoded by nvJPEG, the
// others by the CPU fallback decoders and the same kernel, within the
// fallback bound of the CPU path's pixels (the same decode and crop; only
// the resize's rounding differs); with the device cache on too
// (kCpuFullForCache: whole images uploaded once, then read from the device).
TEST_F(GpuImageTest, MixedFormatsEverySampleOnceWithTheCpuPathsPixels) {
  const std::string dir = testing::TempDir() + "/mixed";
  const std::string cmd = "python3 " BC_SOURCE_DIR "/tools/make_dataset.py " + dir +
                          " --classes 2 --per-class 15 --seed 4 --formats mixed --quiet";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const char* transform : {"eval", "train"}) {
    for (const uint64_t cache_mb : {uint64_t{0}, uint64_t{256}}) {
      SCOPED_TRACE(std::string(transform) + " device cache " + std::to_string(cache_mb));
      SourceOptions co = Options(transform, "cpu");
      SourceOptions go = Options(transform, "cuda:0");
      co.data = go.data = dir;
      go.device_cache_mb = cache_mb;
      auto cpu = MakeSource(co);
      auto gpu = MakeSource(go);
      ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
      ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
      const int64_t count = static_cast<int64_t>((*gpu)->size());
      ASSERT_EQ(count, 30);
      for (uint32_t epoch = 0; epoch < 2; ++epoch) {
        const Output a = RunSource(**cpu, epoch, count, 8);
        const Output b = RunSource(**gpu, epoch, count, 8, Hints::kRight);
        EXPECT_EQ(std::set<int64_t>(b.indices.begin(), b.indices.end()).size(), size_t(count));
        EXPECT_EQ(*std::min_element(b.indices.begin(), b.indices.end()), 0) << "none dropped";
        EXPECT_EQ(a.indices, b.indices);
        EXPECT_EQ(a.labels, b.labels);
        const std::vector<bool> other = CpuDecodedFilesOf(dir, count);
        const size_t elems = a.per_sample / 4;
        double sum_other = 0, sum_all = 0;
        int64_t n_other = 0;
        for (int64_t i = 0; i < count; ++i) {
          const auto* x = reinterpret_cast<const float*>(a.image.data() + a.per_sample * i);
          const auto* y = reinterpret_cast<const float*>(b.image.data() + b.per_sample * i);
          double d = 0;
          for (size_t k = 0; k < elems; ++k) d += std::fabs(double(x[k]) - y[k]);
          d /= elems;
          sum_all += d;
          if (other[b.indices[i]]) {
            sum_other += d;
            ++n_other;
          }
        }
        std::cout << "[ " << transform << " ] mean |cpu - gpu| " << sum_all / count << ", "
                  << n_other << " files of other formats: " << sum_other / n_other << std::endl;
        EXPECT_GE(n_other, 28);
        EXPECT_LT(sum_other / n_other, kFallbackMeanAbsBound);
        EXPECT_LT(sum_all / count, kMeanAbsBound);
        EXPECT_EQ(b.counters.value("files_png", 0), 16) << b.counters.dump();
        EXPECT_EQ(b.counters.value("samples_dropped", -1), 0) << b.counters.dump();
      }
    }
  }
}

}  // namespace
}  // namespace batchcast
