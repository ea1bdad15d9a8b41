// The CPU image source (sources/src/image_source.h) behind the Source
// interface: it fills a host SlotView exactly as the CPU pipeline transforms
// each (epoch, index), with the labels of the listing; a bad file's sample is
// replaced by its stand-in (Note [Bad file stand-in]) and the slot's index
// list says so; on_error=fail stops with the path. Also MakeSource's choices.
#include "sources/src/image_source.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "batchcast/image/pipeline.h"
#include "batchcast/sources/make_source.h"
#include "log_capture.h"
#include "temp_dataset.h"

namespace batchcast {
namespace {

using testing::LogCapture;
using testing::TempDataset;

SourceOptions Options(const std::string& data) {
  SourceOptions o;
  o.data = data;
  o.size = 32;
  o.seed = 5;
  o.workers = 2;
  return o;
}

// A host slot for `indices`.
struct HostSlot {
  HostSlot(const Source& source, std::vector<int64_t> idx, uint32_t epoch)
      : indices(std::move(idx)) {
    const std::vector<FieldSpec> fields = source.fields();
    image_bytes = fields[0].bytes_per_sample();
    images.assign(image_bytes * indices.size(), 0xEE);
    labels.assign(indices.size(), -1);
    view.epoch = epoch;
    view.indices = indices;
    view.field_data = {images.data(), reinterpret_cast<uint8_t*>(labels.data())};
    view.field_bytes = {image_bytes, sizeof(int64_t)};
    view.device = Device::Cpu();
  }
  std::vector<uint8_t> image(size_t i) const {
    return std::vector<uint8_t>(images.begin() + i * image_bytes,
                                images.begin() + (i + 1) * image_bytes);
  }
  std::vector<int64_t> indices;
  size_t image_bytes = 0;
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  SlotView view;
};

// What the CPU pipeline makes of `path` as sample (epoch, index).
std::vector<uint8_t> Reference(const SourceOptions& o, const std::string& path, uint32_t epoch,
                               int64_t index) {
  auto t = MakeTransformOptions(o);
  EXPECT_TRUE(t.ok());
  image::CpuImagePipeline pipeline(*t);
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(ReadFileBytes(path, bytes).ok());
  std::vector<uint8_t> out(pipeline.output_bytes());
  const Status s = pipeline.Process(bytes, epoch, index, out.data());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(ImageSource, FillsASlotViewAsThePipelineDoes) {
  TempDataset d;
  const char* files[] = {"cat/0.jpg", "cat/1.jpg", "cat/2.jpg", "dog/3.jpg", "dog/4.jpg"};
  const int sizes[][2] = {{120, 90}, {64, 200}, {33, 33}, {300, 100}, {50, 70}};
  for (uint32_t i = 0; i < 5; ++i) {
    d.Write(files[i], TempDataset::Jpeg(sizes[i][0], sizes[i][1], i + 1));
  }
  for (TransformKind kind : {TransformKind::kTrain, TransformKind::kEval}) {
    SourceOptions o = Options(d.root());
    o.transform = kind;
    o.dtype = DType::kFloat16;
    auto source = MakeSource(o);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    const Source& s = **source;
    EXPECT_EQ(s.size(), 5u);
    EXPECT_EQ(s.output_memory(), MemoryKind::kHost);
    EXPECT_EQ(s.fields()[0].shape, (std::vector<int64_t>{3, 32, 32}));
    EXPECT_EQ(s.fields()[0].memory, MemoryKind::kHost);
    EXPECT_EQ(s.description(), "image dataset " + d.root() + " (5 files, " +
                                   std::string(TransformKindName(kind)) + " 32 float16)");
    HostSlot slot(s, {4, 0, 2, 3, 1}, 3);
    ASSERT_TRUE((*source)->FillBatch(slot.view, ReadAhead{}).ok());
    EXPECT_EQ(slot.indices, (std::vector<int64_t>{4, 0, 2, 3, 1}));
    EXPECT_EQ(slot.labels, (std::vector<int64_t>{1, 0, 0, 1, 0}));
    for (size_t i = 0; i < slot.indices.size(); ++i) {
      const int64_t index = slot.indices[i];
      EXPECT_EQ(slot.image(i), Reference(o, d.path(files[index]), 3, index)) << "sample " << i;
    }
  }
}

// Note [Bad file stand-in]: the record of today's rule (issue 10 changes it).
TEST(ImageSource, ABadFileIsReplacedByTheNextIndexThatDecodes) {
  TempDataset d;
  d.Write("c/0.jpg", TempDataset::Jpeg(40, 40, 1));
  d.Write("c/1_bad.jpg", TempDataset::Truncated(80, 80, 2));
  d.Write("c/2_bad.jpg", TempDataset::Truncated(80, 80, 3));
  d.Write("c/3.jpg", TempDataset::Jpeg(50, 30, 4));
  d.Write("c/4_bad.jpg", TempDataset::Truncated(80, 80, 5));
  const SourceOptions o = Options(d.root());
  auto source = MakeSource(o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->size(), 5u);  // truncated files pass the scan
  LogCapture log;
  HostSlot slot(**source, {1, 0, 4, 2, 1}, 2);
  ASSERT_TRUE((*source)->FillBatch(slot.view, ReadAhead{}).ok());
  // 1 -> 2 (bad) -> 3; 4 -> 0 (wraps around); 2 -> 3.
  EXPECT_EQ(slot.indices, (std::vector<int64_t>{3, 0, 0, 3, 3}));
  const std::vector<uint8_t> three = Reference(o, d.path("c/3.jpg"), 2, 3);
  const std::vector<uint8_t> zero = Reference(o, d.path("c/0.jpg"), 2, 0);
  EXPECT_EQ(slot.image(0), three);
  EXPECT_EQ(slot.image(1), zero);
  EXPECT_EQ(slot.image(2), zero);
  EXPECT_EQ(slot.image(3), three);
  EXPECT_EQ(slot.image(4), three);
  // Every failure counts; each file is named once.
  int64_t decode_errors = -1;
  for (const auto& [k, v] : (*source)->counters()) {
    if (k == "decode_errors") decode_errors = v;
  }
  EXPECT_EQ(decode_errors, 6);  // 1, 2 | 4 | 2 | 1, 2
  EXPECT_EQ(log.Count("(a neighbouring sample stands in)"), 3) << log.text();
  EXPECT_EQ(log.Count("skipping " + d.path("c/1_bad.jpg")), 1);
}

TEST(ImageSource, OnErrorFailStopsWithThePath) {
  TempDataset d;
  d.Write("c/0.jpg", TempDataset::Jpeg(40, 40, 1));
  d.Write("c/1_bad.jpg", TempDataset::Truncated(80, 80, 2));
  SourceOptions o = Options(d.root());
  o.on_error = ErrorPolicy::kFail;
  auto source = MakeSource(o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  HostSlot ok_slot(**source, {0}, 0);
  EXPECT_TRUE((*source)->FillBatch(ok_slot.view, ReadAhead{}).ok());
  HostSlot slot(**source, {0, 1}, 0);
  const Status s = (*source)->FillBatch(slot.view, ReadAhead{});
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_EQ(s.message().rfind(d.path("c/1_bad.jpg") + ": ", 0), 0u) << s.ToString();
  EXPECT_NE(s.message().find("(--on-error fail)"), std::string::npos);
}

TEST(MakeSource, PicksTheSourceTheOptionsDescribe) {
  SourceOptions synthetic;
  synthetic.synthetic = 10;
  synthetic.size = 8;
  auto s = MakeSource(synthetic);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->description(), "synthetic 10 x uint8[3,8,8]");

  SourceOptions gpu_on_host = Options("/nowhere");
  gpu_on_host.decode = DecodeMode::kGpu;
  auto g = MakeSource(gpu_on_host);
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("decode (--decode) gpu needs a CUDA ring"), std::string::npos)
      << g.status().ToString();

  auto missing = MakeSource(Options("/nowhere/at/all"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
}

}  // namespace
}  // namespace batchcast
