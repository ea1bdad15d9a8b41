// End-to-end tests of tar shards (WebDataset layout) behind a real server:
// every sample once per epoch in the sampler's shard order, over several
// epochs and consumers, with the labels and pixels of the folder the shards
// were packed from (same seed: the same crops for the same index); hostile
// shards (a non-JPEG member, a sample without label, a truncated shard) are
// skipped and counted; the binary serves a brace pattern; --on-error fail
// names the shard.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <thread>
#include <vector>

#include "batchcast/image/pipeline.h"
#include "core/src/sampler.h"
#include "dropped_files.h"
#include "image_harness.h"
#include "sources/src/image_source.h"
#include "sources/src/tar_archive.h"

namespace batchcast {
namespace {

using testing::Process;
using testing::TempDir;
using testing::UniqueName;

#define SKIP_WITHOUT_TAR() \
  if (!BuiltWithTar())     \
  GTEST_SKIP() << "built without libarchive (BATCHCAST_WITH_TAR=OFF or not found)"

std::string Folder() { return MakeDataset("plain", {"--classes", "5", "--per-class", "20"}); }

std::string Shards(const std::string& key, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--shards", "16", "--from-folder", Folder()};
  args.insert(args.end(), more.begin(), more.end());
  return MakeDataset(key, args) + "/train-{000000..00000" + (more.empty() ? "6" : "8") + "}.tar";
}

TEST(Shards, EverySampleOncePerEpochWithTheFolderCrops) {
  SKIP_WITHOUT_TAR();
  const std::string folder = Folder();
  const std::string pattern = Shards("shards");
  auto entries = ListImageDataset(folder);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 100u);
  std::vector<int64_t> label_of;
  for (const ImageEntry& e : *entries) label_of.push_back(e.label);

  ServerOptions o = ImageOptions(pattern);
  o.epochs = 3;
  o.source.shuffle_buffer = 24;
  o.min_consumers = 2;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<testing::ConsumerShape> shapes = {{16, false}, {7, true}};
  const auto consumers = testing::ConnectShapes(o.name, shapes);
  ASSERT_EQ(consumers.size(), shapes.size());
  const auto reads = testing::ReadEpochsTogether(consumers, 3);

  const std::vector<uint64_t> groups = {16, 16, 16, 16, 16, 16, 4};
  auto sampler = Sampler::Make(100, SamplerOptions{5, true, 0, 1, groups, 24});
  ASSERT_TRUE(sampler.ok());
  auto transform = MakeTransformOptions(o.source);
  ASSERT_TRUE(transform.ok());
  image::CpuImagePipeline pipeline(*transform);
  for (size_t k = 0; k < consumers.size(); ++k) {
    ASSERT_EQ(reads[k].size(), 3u);
    for (uint32_t e = 0; e < 3; ++e) {
      SCOPED_TRACE("consumer " + std::to_string(k) + " epoch " + std::to_string(e));
      const testing::EpochRead& read = reads[k][e];
      testing::ExpectEpochMinusDropped(read, sampler->EpochOrder(e), {}, shapes[k], label_of);
      if (shapes[k].drop_last) continue;
      EXPECT_EQ(std::set<int64_t>(read.indices.begin(), read.indices.end()).size(), 100u);
      // The pixels the folder's server makes of the same index (same seed).
      for (size_t i = 0; i < read.indices.size(); ++i) {
        const int64_t index = read.indices[i];
        std::vector<uint8_t> bytes, want(pipeline.output_bytes());
        ASSERT_TRUE(ReadFileBytes((*entries)[size_t(index)].path, bytes).ok());
        ASSERT_TRUE(pipeline.Process(bytes, e, index, want.data()).ok());
        ASSERT_EQ(read.images[i], want) << "index " << index;
      }
    }
  }
  auto st = StatsOf(**server);
  const auto& c = st["source_counters"];
  EXPECT_EQ(c["shards"], 7) << st.dump();
  EXPECT_EQ(c["shard_rereads"], 0) << "every shard read front to back";
  EXPECT_LE(c["shard_opens"].get<int>(), 7 * 3 + 7) << st.dump();
  EXPECT_LE(c["shard_held_peak_samples"].get<int>(), 24 + 16) << "shuffle buffer + a batch";
}

// Serves the "shards" set on two host rings placing batches by `placement`
// (2 epochs, shuffle buffer 24), has a consumer on each ring read every
// epoch exactly, and sets `stats` to the server's stats after.
void ReadShardsOnTwoRings(Placement placement, nlohmann::json& stats) {
  ServerOptions o = OnHostRings(ImageOptions(Shards("shards")), 2);
  o.placement = placement;
  o.epochs = 2;
  o.source.shuffle_buffer = 24;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectEveryRingReadsWholeEpochs(o.name, 2, 16, 2, 100));
  stats = StatsOf(**server);
}

// A server with a ring per GPU (two host rings stand in) reads each shard
// once for all rings: the rings' sources share one reader, where a sample
// read ahead for one ring waits for the ring its batch was placed on.
TEST(Shards, TwoRingsReadEachShardOnce) {
  SKIP_WITHOUT_TAR();
  nlohmann::json st;
  ASSERT_NO_FATAL_FAILURE(ReadShardsOnTwoRings(Placement::kRoundRobin, st));
  const auto& c = st["source_counters"];
  EXPECT_EQ(c["shards"], 7) << st.dump();
  EXPECT_EQ(c["shard_rereads"], 0) << st.dump();
  EXPECT_LE(c["shard_opens"].get<int>(), 7 * 2 + 7) << "each shard once an epoch: " << st.dump();
  EXPECT_EQ(c["shard_held_samples"], 0) << "every sample read was taken: " << st.dump();
  // Rings in step hold about the shuffle buffer and a batch per ring (24 + 2 *
  // 16); a ring whose read-ahead runs ahead of the other ring's reads holds up
  // to two batches per ring (54-59 in about one run of 25). A reader that kept
  // what it passed would hold the whole epoch (100).
  EXPECT_LE(c["shard_held_peak_samples"].get<int>(), 24 + 2 * 2 * 16)
      << "the shuffle buffer and two batches per ring: " << st.dump();
  ASSERT_EQ(st["rings"].size(), 2u);
  for (const auto& ring : st["rings"]) {
    EXPECT_GT(ring["samples_decoded"].get<int64_t>(), 0) << st.dump();
    EXPECT_FALSE(ring["source_counters"].contains("shard_opens")) << "one reader: " << st.dump();
  }
}

// By demand a ring may take a batch that another ring read ahead: the shared
// reader kept a copy of what that ring read on a guess (ReadAhead::guess),
// so each shard is still read once an epoch, every copy is taken or
// forgotten, and every epoch stays exact.
TEST(Shards, TwoRingsByDemandReadEachShardOnce) {
  SKIP_WITHOUT_TAR();
  nlohmann::json st;
  ASSERT_NO_FATAL_FAILURE(ReadShardsOnTwoRings(Placement::kDemand, st));
  EXPECT_EQ(st["placement"], "demand");
  const auto& c = st["source_counters"];
  EXPECT_EQ(c["shard_rereads"], 0) << st.dump();
  EXPECT_LE(c["shard_opens"].get<int>(), 7 * 2 + 7) << "each shard once an epoch: " << st.dump();
  // Every copy taken or forgotten: 0 held in 30 of 31 runs. A guess across
  // an epoch's end can make the ring that gets the batch open a shard again,
  // holding what it passes (2 in that run).
  EXPECT_LE(c["shard_held_samples"].get<int>(), 16) << st.dump();
  EXPECT_EQ(
      st["rings"][0]["samples_decoded"].get<int>() + st["rings"][1]["samples_decoded"].get<int>(),
      200)
      << "each sample decoded once: " << st.dump();
}

TEST(Shards, HostileShardsAreSkippedAndCounted) {
  SKIP_WITHOUT_TAR();
  const std::string pattern = Shards("hostile", {"--hostile-shards"});
  ServerOptions o = ImageOptions(pattern);
  o.epochs = 2;
  o.source.shuffle_buffer = 10;
  auto server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto c = Connect(o.name, 10, /*drop_last=*/false);
  ASSERT_TRUE(c);
  for (int e = 0; e < 2; ++e) {
    Epoch got = ReadEpoch(*c);
    EXPECT_EQ(got.indices.size(), 104u) << "100 + the 4 good hostile samples";
    EXPECT_EQ(std::set<int64_t>(got.indices.begin(), got.indices.end()).size(), 104u);
  }
  auto st = StatsOf(**server);
  EXPECT_EQ(st["source_counters"]["files_dropped_at_scan"], 2) << st.dump();
  EXPECT_EQ(st["source_counters"]["shards_damaged"], 1) << st.dump();
  EXPECT_EQ(st["epoch_len"], 104);

  // --on-error fail stops the start with the shard and the reason.
  o.name = UniqueName("fail");
  ExpectOnErrorFailNames(o, "train-00000");
}

// The binary takes a quoted brace pattern, and says what is wrong with a bad one.
TEST(Shards, TheBinaryServesABracePattern) {
  SKIP_WITHOUT_TAR();
  const std::string pattern = Shards("shards");
  const std::string name = UniqueName("cli");
  const std::string dir = TempDir();
  Process server({BC_SERVER_BIN, "serve", pattern, "--name", name, "--size", "32", "--epochs", "1",
                  "--batch-size", "20", "--workers", "2"},
                 dir + "/server.log");
  ASSERT_FALSE(testing::WaitForServer(name).is_null()) << "the server did not start";
  auto c = Connect(name, 20, false);
  ASSERT_TRUE(c);
  Epoch got = ReadEpoch(*c);
  EXPECT_EQ(std::set<int64_t>(got.indices.begin(), got.indices.end()).size(), 100u);
  c.reset();
  EXPECT_EQ(server.Wait(30s), 0);

  Process bad({BC_SERVER_BIN, "serve", "/nonexistent/t-{0..3.tar", "--name", UniqueName("bad")},
              dir + "/bad.log");
  EXPECT_NE(bad.Wait(30s), 0);
  const std::string text = testing::ReadText(dir + "/bad.log");
  EXPECT_NE(text.find("unbalanced braces"), std::string::npos) << text;
}

}  // namespace
}  // namespace batchcast
