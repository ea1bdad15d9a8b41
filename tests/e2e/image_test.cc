// End-to-end tests of the CPU image pipeline behind a real server: exactly
// once on a real folder, labels, determinism of train crops, hazard files,
// and exactly once with files that fail only when decoded (Note [Dropped
// files]).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "batchcast/client/consumer.h"
#include "batchcast/image/pipeline.h"
#include "batchcast/server/server.h"
#include "core/src/sampler.h"
#include "dropped_files.h"
#include "harness.h"
#include "image_harness.h"
#include "process.h"
#include "sources/src/image_source.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using testing::Process;
using testing::TempDir;
using testing::UniqueName;

// Exactly once per epoch on a real folder, in the sampler's order, with the
// labels torchvision's ImageFolder would assign.
TEST(ImagePipeline, ExactlyOnceOnRealFolder) {
  const std::string data = MakeDataset("plain", {"--classes", "5", "--per-class", "20"});
  auto entries = ListImageDataset(data);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 100u);
  ServerOptions o = ImageOptions(data);
  o.epochs = 2;
  o.min_consumers = 2;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto a = Connect(o.name, 32, false);
  auto b = Connect(o.name, 48, false);
  ASSERT_TRUE(a && b);
  auto sampler = Sampler::Make(100, SamplerOptions{5, true, 0, 1});
  ASSERT_TRUE(sampler.ok());
  Epoch ea[2], eb[2];
  std::thread tb([&] {
    eb[0] = ReadEpoch(*b);
    eb[1] = ReadEpoch(*b);
  });
  ea[0] = ReadEpoch(*a);
  ea[1] = ReadEpoch(*a);
  tb.join();
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(ea[e].indices, sampler->EpochOrder(e));
    EXPECT_EQ(eb[e].indices, sampler->EpochOrder(e));
    for (size_t i = 0; i < ea[e].indices.size(); ++i) {
      EXPECT_EQ(ea[e].labels[i], (*entries)[static_cast<size_t>(ea[e].indices[i])].label);
    }
    // Both consumers got the same decoded bytes for every sample.
    EXPECT_EQ(ea[e].images, eb[e].images);
  }
  // Train crops change across epochs.
  int same = 0;
  for (const auto& [idx, img] : ea[0].images) same += ea[1].images.at(idx) == img;
  EXPECT_LT(same, 10) << "train crops did not change across epochs";
}

// Train crops are a pure function of (seed, epoch, index): a second server
// with the same seed produces the same bytes; another seed does not.
TEST(ImagePipeline, TrainCropsAreDeterministic) {
  const std::string data = MakeDataset("plain", {"--classes", "5", "--per-class", "20"});
  auto run = [&](uint64_t seed) {
    ServerOptions o = ImageOptions(data);
    o.source.seed = seed;
    o.epochs = 1;
    auto server = Server::Start(o);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    auto c = Connect(o.name, 16, false);
    return c ? ReadEpoch(*c).images : std::map<int64_t, std::vector<uint8_t>>();
  };
  auto first = run(5), again = run(5), other = run(6);
  ASSERT_EQ(first.size(), 100u);
  EXPECT_EQ(first, again);
  int same = 0;
  for (const auto& [idx, img] : first) same += other.at(idx) == img;
  EXPECT_LT(same, 10);
}

// Hazard files never crash the server; with skip they are counted and named.
TEST(ImagePipeline, HazardsAreSkippedAndCounted) {
  const std::string data =
      MakeDataset("hazards", {"--classes", "2", "--per-class", "10", "--hazards"});
  ServerOptions o = ImageOptions(data);
  o.epochs = 1;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  // empty, random bytes and the 60000x60000 header are dropped at the scan;
  // the CMYK file is valid, the PNG named .JPEG is served as the PNG it is
  // (Note [Image formats]); the truncated one fails when decoded.
  EXPECT_EQ((*server)->epoch_len(), 20u + 3);
  auto c = Connect(o.name, 11, false);
  Epoch e = ReadEpoch(*c);
  // The truncated file is dropped: 22 samples, each once.
  EXPECT_EQ(e.indices.size(), 22u);
  EXPECT_EQ(std::set<int64_t>(e.indices.begin(), e.indices.end()).size(), 22u);
  auto st = StatsOf(**server);
  EXPECT_EQ(st["source_counters"]["files_dropped_at_scan"], 3) << st.dump();
  EXPECT_EQ(st["source_counters"]["files_png"], 1) << st.dump();
  EXPECT_EQ(st["source_counters"]["files_dropped_at_decode"], 1) << st.dump();
  EXPECT_EQ(st["source_counters"]["samples_dropped"], 1) << st.dump();
  EXPECT_EQ(st["holes"], 1) << st.dump();
}

// A server with a ring per GPU (two host rings stand in) has a source per
// ring over one shared dataset: the server's counters give the dataset's
// (its files, a file dropped at decode on whichever ring decoded it) once,
// at the top level only, so that a sum over the rings counts them once.
TEST(ImagePipeline, TwoRingsCountTheDatasetOnce) {
  const std::string data =
      MakeDataset("hazards", {"--classes", "2", "--per-class", "10", "--hazards"});
  ServerOptions o = OnHostRings(ImageOptions(data), 2);
  o.epochs = 3;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectEveryRingReadsWholeEpochs(o.name, 2, 11, 3, 22));
  auto st = StatsOf(**server);
  const auto& top = st["source_counters"];
  EXPECT_EQ(top["files"], 23) << st.dump();
  EXPECT_EQ(top["files_dropped_at_scan"], 3) << st.dump();
  EXPECT_EQ(top["files_jpeg"], 22) << st.dump();
  EXPECT_EQ(top["files_png"], 1) << st.dump();
  // The truncated file failed once, and was known bad from then on.
  EXPECT_EQ(top["files_dropped_at_decode"], 1) << st.dump();
  EXPECT_EQ(top["samples_dropped"], 3) << "a hole each epoch: " << st.dump();
  ASSERT_EQ(st["rings"].size(), 2u);
  int64_t decoded = 0;
  for (const auto& ring : st["rings"]) {
    EXPECT_FALSE(ring["source_counters"].contains("files")) << "the server's, once: " << st.dump();
    EXPECT_GT(ring["samples_decoded"].get<int64_t>(), 0) << "both rings decode";
    decoded += ring["samples_decoded"].get<int64_t>();
  }
  EXPECT_EQ(decoded, 3 * 22);
}

// Note [Dropped files] end to end: files that pass the scan and fail when
// decoded (truncated, corrupt entropy data) are dropped, never replaced:
// three consumers of different batch sizes, with and without drop_last, read
// three epochs; in each, every other index arrives exactly once in the
// sampler's order, the bad ones never, with its own label and the pixels of
// its own decode; each epoch has at least announced - dropped batches; each
// bad file is counted once, each of its dropped samples too.
TEST(ImagePipeline, FilesThatFailToDecodeAreDroppedFromEveryEpoch) {
  const std::string data = MakeDataset(
      "decode-failures", {"--classes", "3", "--per-class", "11", "--decode-failures", "5"});
  auto entries = ListImageDataset(data);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 38u);
  const testing::MarkedListing listing = testing::Mark(*entries, "hazard_decode_");
  const std::set<int64_t>& bad = listing.marked;
  ASSERT_EQ(bad.size(), 5u);
  const ServerOptions o = ImageOptions(data);
  std::vector<testing::ConsumerShape> shapes = {{5, false}, {7, true}, {16, true}};
  const testing::ServedEpochs served = testing::ServeEpochsToShapes(o, 3, shapes);
  const auto& reads = served.reads;
  ASSERT_EQ(reads.size(), shapes.size());

  auto sampler = Sampler::Make(entries->size(), SamplerOptions{5, true, 0, 1});
  ASSERT_TRUE(sampler.ok());
  auto transform = MakeTransformOptions(o.source);
  ASSERT_TRUE(transform.ok());
  image::CpuImagePipeline pipeline(*transform);
  for (size_t k = 0; k < shapes.size(); ++k) {
    SCOPED_TRACE("consumer of batch " + std::to_string(shapes[k].batch));
    ASSERT_EQ(reads[k].size(), 3u);
    for (uint32_t e = 0; e < 3; ++e) {
      SCOPED_TRACE("epoch " + std::to_string(e));
      const testing::EpochRead& read = reads[k][e];
      testing::ExpectEpochMinusDropped(read, sampler->EpochOrder(e), bad, shapes[k],
                                       listing.label_of);
      // Every sample holds the pixels of its own file (producer epoch e).
      for (size_t i = 0; i < read.indices.size(); ++i) {
        const int64_t index = read.indices[i];
        std::vector<uint8_t> bytes, want(pipeline.output_bytes());
        ASSERT_TRUE(ReadFileBytes((*entries)[size_t(index)].path, bytes).ok());
        ASSERT_TRUE(pipeline.Process(bytes, e, index, want.data()).ok());
        EXPECT_EQ(read.images[i], want) << "sample " << i << " (index " << index << ")";
      }
    }
  }
  auto st = StatsOf(*served.server);
  EXPECT_EQ(st["source_counters"]["files_dropped_at_decode"], 5) << st.dump();
  EXPECT_EQ(st["source_counters"]["samples_dropped"], 15) << st.dump();
  EXPECT_EQ(st["holes"], 15) << st.dump();
  EXPECT_EQ(st["epoch_len"], 38) << "the announced epoch stays the dataset's length";
}

// With --on-error fail the error names the file and the reason.
TEST(ImagePipeline, OnErrorFailNamesTheFile) {
  const std::string data =
      MakeDataset("hazards", {"--classes", "2", "--per-class", "10", "--hazards"});
  ExpectOnErrorFailNames(ImageOptions(data), "hazard_");

  // The binary: a clear message and a non-zero exit, no trace.
  const std::string dir = TempDir();
  Process p({BC_SERVER_BIN, "serve", data, "--on-error", "fail", "--name", UniqueName("f")},
            dir + "/err.log");
  EXPECT_EQ(p.Wait(30s), 1);
  const std::string text = testing::ReadText(dir + "/err.log");
  EXPECT_NE(text.find("hazard_"), std::string::npos) << text;
}

// A file that passes the scan but fails to decode (truncated) stops a
// fail-policy producer with its path; the consumer is told.
TEST(ImagePipeline, OnErrorFailAtDecodeStopsTheProducer) {
  const std::string data = MakeDataset("truncated-only", {"--classes", "1", "--per-class", "4"});
  // Add a truncated copy of a valid file.
  std::string victim;
  for (const auto& f : std::filesystem::recursive_directory_iterator(data)) {
    if (f.is_regular_file()) {
      victim = f.path().string();
      break;
    }
  }
  const std::string truncated = std::filesystem::path(victim).parent_path() / "zz_truncated.JPEG";
  {
    std::ifstream in(victim, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3);
  }
  ServerOptions o = ImageOptions(data);
  o.source.on_error = ErrorPolicy::kFail;
  o.shuffle = false;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto c = Connect(o.name, 5, false);
  auto b = c->Next();
  EXPECT_FALSE(b.ok());
  EXPECT_TRUE((*server)->WaitFor(10s));
  Status s = (*server)->status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("zz_truncated.JPEG"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace batchcast

namespace batchcast {
namespace {

// docs/stats.md: producer_stage_s (the CPU source's read and decode_augment,
// and slot_wait) and each consumer's wait_s appear and grow as batches are
// made; the client counts its own wait too.
TEST(ImagePipeline, StageTimesAndConsumerWaitAppearAndGrow) {
  const std::string data = MakeDataset("plain", {"--classes", "5", "--per-class", "20"});
  ServerOptions o = ImageOptions(data);
  o.epochs = 2;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto c = Connect(o.name, 16, false);
  ASSERT_TRUE(c);
  (void)ReadEpoch(*c);
  const nlohmann::json first = StatsOf(**server);
  (void)ReadEpoch(*c);
  const nlohmann::json second = StatsOf(**server);
  for (const char* stage : {"read", "decode_augment", "slot_wait"}) {
    ASSERT_TRUE(first["producer_stage_s"].contains(stage)) << first.dump();
    EXPECT_GE(second["producer_stage_s"][stage].get<double>(),
              first["producer_stage_s"][stage].get<double>())
        << stage;
  }
  EXPECT_GT(first["producer_stage_s"]["decode_augment"].get<double>(), 0);
  EXPECT_GT(second["producer_stage_s"]["decode_augment"].get<double>(),
            first["producer_stage_s"]["decode_augment"].get<double>());
  EXPECT_EQ(second["producer_stage_threads"]["decode_augment"], 2);
  EXPECT_FALSE(second["producer_stage_s"].contains("hw_decode")) << "no GPU stage on the CPU";
  ASSERT_EQ(second["consumers"].size(), 1u);
  EXPECT_GE(second["consumers"][0]["wait_s"].get<double>(),
            first["consumers"][0]["wait_s"].get<double>());
  EXPECT_GT(c->wait_seconds(), 0.0);
}

}  // namespace
}  // namespace batchcast
