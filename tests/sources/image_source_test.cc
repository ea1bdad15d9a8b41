// The CPU image source (sources/src/image_source.h) behind the Source
// interface: it fills a host SlotView exactly as the CPU pipeline transforms
// each (epoch, index), with the labels of the listing; a file that fails to
// decode is dropped (Note [Dropped files]): the kept samples are compacted
// and the slot's index list names exactly them; on_error=fail stops with the
// path. Also MakeSource's choices.
#include "sources/src/image_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "batchcast/image/pipeline.h"
#include "batchcast/sources/make_source.h"
#include "host_slot.h"
#include "log_capture.h"
#include "temp_dataset.h"

namespace batchcast {
namespace {

using testing::HostSlot;
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
    auto valid = (*source)->FillBatch(slot.view, ReadAhead{});
    ASSERT_TRUE(valid.ok()) << valid.status().ToString();
    EXPECT_EQ(*valid, 5u);
    EXPECT_EQ(slot.indices, (std::vector<int64_t>{4, 0, 2, 3, 1}));
    EXPECT_EQ(slot.labels, (std::vector<int64_t>{1, 0, 0, 1, 0}));
    for (size_t i = 0; i < slot.indices.size(); ++i) {
      const int64_t index = slot.indices[i];
      EXPECT_EQ(slot.image(i), Reference(o, d.path(files[index]), 3, index)) << "sample " << i;
    }
  }
}

int64_t Counter(const Source& source, const std::string& name) {
  for (const auto& [k, v] : source.counters()) {
    if (k == name) return v;
  }
  return -1;
}

// Note [Dropped files]: a file that fails to decode is dropped, never
// replaced: the samples kept are compacted to the front of the slot, in
// order, each with its own pixels and label, and the slot's indices name
// exactly them. In a later epoch the bad files are dropped without a decode
// attempt (here they were repaired meanwhile, and still are dropped).
TEST(ImageSource, ABadFileIsDroppedNeverReplaced) {
  TempDataset d;
  d.Write("a/0.jpg", TempDataset::Jpeg(40, 40, 1));
  d.Write("a/1_bad.jpg", TempDataset::Truncated(80, 80, 2));
  d.Write("b/2_bad.jpg", TempDataset::Truncated(80, 80, 3));
  d.Write("b/3.jpg", TempDataset::Jpeg(50, 30, 4));
  d.Write("b/4_bad.jpg", TempDataset::Truncated(80, 80, 5));
  const SourceOptions o = Options(d.root());
  auto source = MakeSource(o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->size(), 5u);  // truncated files pass the scan
  // Fills a slot of `indices` in `epoch`: the samples kept are `kept`, at the
  // front in order, each with its own file's pixels and label.
  const std::map<int64_t, std::pair<std::string, int64_t>> good = {{0, {"a/0.jpg", 0}},
                                                                   {3, {"b/3.jpg", 1}}};
  auto expect_kept = [&](std::vector<int64_t> indices, uint32_t epoch,
                         const std::vector<int64_t>& kept) {
    HostSlot slot(**source, std::move(indices), epoch);
    auto valid = (*source)->FillBatch(slot.view, ReadAhead{});
    ASSERT_TRUE(valid.ok()) << valid.status().ToString();
    ASSERT_EQ(*valid, kept.size());
    for (size_t i = 0; i < kept.size(); ++i) {
      const auto& [path, label] = good.at(kept[i]);
      EXPECT_EQ(slot.indices[i], kept[i]) << "position " << i;
      EXPECT_EQ(slot.image(i), Reference(o, d.path(path), epoch, kept[i])) << "position " << i;
      EXPECT_EQ(slot.labels[i], label) << "position " << i;
    }
  };
  LogCapture log;
  expect_kept({1, 3, 4, 2, 0}, 2, {3, 0});
  EXPECT_EQ(Counter(**source, "files_dropped_at_decode"), 3);
  EXPECT_EQ(Counter(**source, "samples_dropped"), 3);
  for (const char* bad : {"a/1_bad.jpg", "b/2_bad.jpg", "b/4_bad.jpg"}) {
    EXPECT_EQ(log.Count("dropping " + d.path(bad) + ": "), 1) << log.text();
  }

  // A later epoch: the bad files now decode, but are known bad.
  for (const char* bad : {"a/1_bad.jpg", "b/2_bad.jpg", "b/4_bad.jpg"}) {
    d.Write(bad, TempDataset::Jpeg(60, 60, 9));
  }
  expect_kept({0, 1, 2, 3, 4}, 3, {0, 3});
  EXPECT_EQ(Counter(**source, "files_dropped_at_decode"), 3) << "each file counts once";
  EXPECT_EQ(Counter(**source, "samples_dropped"), 6) << "each dropped sample counts";
  EXPECT_EQ(log.Count("dropping "), 3) << "warned once per file";

  // A slot of bad files only: nothing written.
  expect_kept({4, 1}, 4, {});
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
  const Status s = (*source)->FillBatch(slot.view, ReadAhead{}).status();
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

// A server's rings (host rings here) get one source each over one dataset:
// they agree on what index k means (size, fields, shards, listing), and a
// file that failed on one ring is known bad to the others, which drop it
// without reading it (its warning and count come once).
TEST(MakeSources, EveryRingReadsOneDataset) {
  TempDataset d;
  d.Write("a/0.jpg", TempDataset::Jpeg(40, 40, 1));
  d.Write("a/1_bad.jpg", TempDataset::Truncated(80, 80, 2));
  d.Write("b/2.jpg", TempDataset::Jpeg(50, 30, 3));
  const std::vector<Device> rings = {Device::Cpu(), Device::Cpu(), Device::Cpu()};
  auto sources = MakeSources(Options(d.root()), rings);
  ASSERT_TRUE(sources.ok()) << sources.status().ToString();
  ASSERT_EQ(sources->size(), 3u);
  Source& first = *sources->front();
  for (const auto& s : *sources) {
    EXPECT_EQ(s->size(), 3u);
    EXPECT_EQ(s->fields(), first.fields());
    EXPECT_EQ(s->sample_groups(), first.sample_groups());
    EXPECT_EQ(s->listing_digest(), first.listing_digest());
    EXPECT_NE(s->listing_digest(), 0u);
  }
  LogCapture log;
  HostSlot on_ring0(first, {1, 0}, 0);
  auto valid = first.FillBatch(on_ring0.view, ReadAhead{});
  ASSERT_TRUE(valid.ok()) << valid.status().ToString();
  EXPECT_EQ(*valid, 1u);
  // Ring 2 meets the file in a later epoch: known bad, dropped unread. (Its
  // bytes now decode: a source with a dataset of its own would take them.)
  d.Write("a/1_bad.jpg", TempDataset::Jpeg(60, 60, 9));
  Source& ring2 = *(*sources)[2];
  HostSlot on_ring2(ring2, {1, 2}, 1);
  valid = ring2.FillBatch(on_ring2.view, ReadAhead{});
  ASSERT_TRUE(valid.ok()) << valid.status().ToString();
  EXPECT_EQ(*valid, 1u);
  EXPECT_EQ(on_ring2.indices[0], 2);
  EXPECT_EQ(log.Count("dropping "), 1) << log.text();
  for (const auto& s : *sources) {
    EXPECT_EQ(Counter(*s, "files_dropped_at_decode"), 1);
    EXPECT_EQ(Counter(*s, "samples_dropped"), 2);
    const std::vector<std::string> shared = s->dataset_counters();
    EXPECT_NE(std::find(shared.begin(), shared.end(), "files_dropped_at_decode"), shared.end());
  }
}

}  // namespace
}  // namespace batchcast
