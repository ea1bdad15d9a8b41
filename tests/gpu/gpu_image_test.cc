// Issue 4, check 2: the GPU path (nvJPEG + the fused kernel, CudaImageSource)
// and the CPU path (libjpeg-turbo + OpenCV, ImageSource) agree: same dataset,
// seed, epoch and samples, eval and train, float32 output. Also: the kernel's
// dtype and layout variants are exact conversions of its float32 NCHW output.
//
// The dataset comes from tools/make_dataset.py (with --hazards: progressive,
// grayscale, CMYK, truncated and invalid files), generated into a temporary
// folder; BC_GPU_TEST_DATA names an existing one instead. Skipped without a
// GPU or without nvJPEG in this build.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "../e2e/device_util.h"
#include "../e2e/process.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/image/half.h"
#include "batchcast/image/jpeg.h"
#include "batchcast/sources/make_source.h"
#include "sources/src/image_source.h"

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

// Runs `source` over dataset indices [0, count) in batches, epoch `epoch`.
Output RunSource(Source& source, uint32_t epoch, int64_t count, int batch) {
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
    Status s = source.FillBatch(t, ReadAhead{});
    EXPECT_TRUE(s.ok()) << s.ToString();
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

// Files the GPU path sends to the CPU decoder too (by their header).
std::vector<bool> CpuDecodedFiles(int64_t count) {
  auto entries = ListImageDataset(Dataset());
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
    auto info = image::ReadJpegInfo(bytes);
    if (!info.ok()) continue;  // dropped at scan by both paths
    using CS = image::JpegInfo::ColorSpace;
    out.push_back(info->progressive || (info->color != CS::kYCbCr && info->color != CS::kGray));
  }
  EXPECT_EQ(static_cast<int64_t>(out.size()), count);
  return out;
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
    auto cpu = MakeSource(Options(transform, "cpu"));
    auto gpu = MakeSource(Options(transform, "cuda:0"));
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    ASSERT_EQ((*gpu)->output_memory(), MemoryKind::kCuda) << (*gpu)->description();
    ASSERT_EQ((*cpu)->size(), (*gpu)->size());
    const int64_t count = static_cast<int64_t>((*cpu)->size());
    const std::vector<bool> fallback = CpuDecodedFiles(count);
    const Output a = RunSource(**cpu, 3, count, 32);
    const Output b = RunSource(**gpu, 3, count, 32);
    ASSERT_EQ(a.indices, b.indices) << "both paths replace bad files alike";
    EXPECT_EQ(a.labels, b.labels);
    const size_t elems = a.per_sample / 4;
    double sum = 0, sum_fb = 0, max_abs = 0, worst_sample = 0;
    int64_t n_fb = 0;
    for (int64_t i = 0; i < count; ++i) {
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
    const double mean = sum / count;
    std::cout << "[ " << transform << " ] " << count << " samples, mean |cpu - gpu| = " << mean
              << ", worst sample mean = " << worst_sample << ", max = " << max_abs << "; " << n_fb
              << " CPU-decoded files: mean " << (n_fb ? sum_fb / n_fb : 0.0) << "; gpu counters "
              << b.counters.dump() << std::endl;
    RecordProperty(std::string(transform) + "_mean_abs_diff", std::to_string(mean));
    EXPECT_LT(mean, kMeanAbsBound);
    EXPECT_GT(b.counters.value("gpu_decoded", 0), count / 2) << "nvJPEG decoded too few files";
    if (n_fb > 0) EXPECT_LT(sum_fb / n_fb, kFallbackMeanAbsBound);
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
  for (int64_t i = 0; i < count; ++i) {
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

}  // namespace
}  // namespace batchcast
