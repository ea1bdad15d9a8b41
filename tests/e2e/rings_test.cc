// End-to-end tests of a server with several rings sharing one stream (Note
// [Placement], server/src/scheduler.h) without GPUs: an in-process server
// with two or four host rings standing in for GPUs (ServerOptions::host_rings),
// consumers choosing their home ring with the device "cpu:N". Every byte is
// checked against the synthetic formula; the stats show each sample decoded
// once, on one ring.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../sources/log_capture.h"
#include "batchcast/client/consumer.h"
#include "batchcast/server/server.h"
#include "device_util.h"
#include "harness.h"
#include "rings_harness.h"

namespace batchcast {
namespace {

using nlohmann::json;
using testing::All;
using testing::kSamples;
using testing::RankOnItsRing;
using testing::ReadAll;
using testing::Reader;
using testing::StartRings;
using testing::UniqueName;

// A consumer per ring, batch sizes that do and do not divide the producer
// batch: both read every epoch exactly; each sample was decoded once.
// Round robin: each ring decoded half; by demand, shares that follow the
// rings' speeds.
class HostRingsPlaced : public ::testing::TestWithParam<Placement> {};

INSTANTIATE_TEST_SUITE_P(Placements, HostRingsPlaced,
                         ::testing::Values(Placement::kRoundRobin, Placement::kDemand),
                         [](const ::testing::TestParamInfo<Placement>& p) {
                           return p.param == Placement::kDemand ? "demand" : "round_robin";
                         });

TEST_P(HostRingsPlaced, AConsumerPerRingReadsExactEpochsFromOneDecode) {
  const std::string name = UniqueName("rings");
  testing::LogCapture log;
  auto server = StartRings(name, 2, 2, 2, GetParam());
  ASSERT_TRUE(server);
  // The start line says how batches are placed.
  EXPECT_EQ(log.Count(std::string("a ring and a producer on each of 2 host rings, sharing one "
                                  "stream (each sample decoded once), batches placed ") +
                      (GetParam() == Placement::kDemand ? "by demand" : "round robin")),
            1)
      << log.text();
  std::vector<Reader> readers(2);
  readers[0].device = "cpu:0";
  readers[0].batch = 16;
  readers[1].device = "cpu:1";
  readers[1].batch = 10;
  ASSERT_NO_FATAL_FAILURE(ReadAll(name, readers));
  for (const Reader& r : readers) {
    SCOPED_TRACE(r.device);
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.mismatches, 0);
    ASSERT_EQ(r.epochs.size(), 2u);
    for (const std::vector<int64_t>& e : r.epochs) {
      EXPECT_EQ(std::set<int64_t>(e.begin(), e.end()), All());
      EXPECT_EQ(e.size(), kSamples);
    }
    if (GetParam() == Placement::kDemand) continue;
    EXPECT_GT(r.zero_copy, 0);
    EXPECT_LT(r.zero_copy, r.batches) << "nothing was copied from the other ring";
  }
  const json stats = json::parse(server->StatsJson());
  EXPECT_EQ(stats["placement"], std::string(PlacementName(GetParam())));
  ASSERT_EQ(stats["rings"].size(), 2u);
  const json& rings = stats["rings"];
  EXPECT_EQ(
      rings[0]["samples_decoded"].get<uint64_t>() + rings[1]["samples_decoded"].get<uint64_t>(),
      2 * kSamples)
      << "each sample decoded once";
  if (GetParam() == Placement::kDemand) return;
  EXPECT_EQ(rings[0]["samples_decoded"].get<uint64_t>(), kSamples) << "an equal share";
  EXPECT_GT(rings[1]["samples_decoded"].get<uint64_t>(), 0u);
  EXPECT_GT(rings[1]["peer_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(rings[1]["device"], "cpu");
}

// A group with a rank on each ring and B equal to the producer batch: one
// group, an exact split, every batch read zero-copy from the rank's own ring.
TEST(HostRings, AGroupAcrossRingsSplitsExactlyWithoutCopies) {
  const std::string name = UniqueName("ringgroup");
  auto server = StartRings(name, 2, 2);
  ASSERT_TRUE(server);
  std::vector<Reader> readers = {RankOnItsRing(0, 2), RankOnItsRing(1, 2)};
  ASSERT_NO_FATAL_FAILURE(ReadAll(name, readers));
  for (const Reader& r : readers) {
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.mismatches, 0);
    EXPECT_EQ(r.zero_copy, r.batches) << r.device << " read from the other ring";
  }
  EXPECT_EQ(readers[0].batches, readers[1].batches);
  ASSERT_EQ(readers[0].epochs.size(), 2u);
  ASSERT_EQ(readers[1].epochs.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    std::set<int64_t> both(readers[0].epochs[e].begin(), readers[0].epochs[e].end());
    both.insert(readers[1].epochs[e].begin(), readers[1].epochs[e].end());
    EXPECT_EQ(both, All()) << "epoch " << e;
  }
  const json stats = json::parse(server->StatsJson());
  EXPECT_EQ(stats["rings"][0]["peer_bytes"], 0);
  EXPECT_EQ(stats["rings"][1]["peer_bytes"], 0);
}

// Four rings: a group of four ranks, one per ring, splits each epoch exactly with equal
// batch counts (the 32 samples short of a round of 64 are left out, as
// DistributedSampler's drop_last does) and reads only its own ring; four
// consumers that each read the whole stream beside it get exact epochs; each
// ring decoded a quarter of the stream, within a producer batch per epoch.
TEST(HostRings, FourRingsSplitAGroupOfFourAndShareTheDecode) {
  const std::string name = UniqueName("rings4");
  constexpr uint64_t kEpochs = 2;
  auto server = StartRings(name, kEpochs, 8, /*rings=*/4);
  ASSERT_TRUE(server);
  EXPECT_EQ(server->options().window, 16u) << "the default window: 4 slots per ring";
  std::vector<Reader> readers(8);
  for (uint32_t r = 0; r < 4; ++r) {
    readers[r] = RankOnItsRing(r, 4);
    readers[4 + r].device = "cpu:" + std::to_string(r);
    readers[4 + r].batch = 12;
  }
  ASSERT_NO_FATAL_FAILURE(ReadAll(name, readers));
  for (const Reader& r : readers) {
    SCOPED_TRACE(r.device + (r.group.empty() ? "" : " rank " + std::to_string(r.rank)));
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.mismatches, 0);
    ASSERT_EQ(r.epochs.size(), kEpochs);
  }
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(readers[r].batches, readers[0].batches) << "rank " << r;
    EXPECT_EQ(readers[r].zero_copy, readers[r].batches) << "rank " << r << " copied";
    for (const std::vector<int64_t>& e : readers[4 + r].epochs) {
      EXPECT_EQ(e.size(), kSamples);
      EXPECT_EQ(std::set<int64_t>(e.begin(), e.end()), All());
    }
  }
  for (size_t e = 0; e < kEpochs; ++e) {
    std::set<int64_t> split;
    size_t read = 0;
    for (uint32_t r = 0; r < 4; ++r) {
      split.insert(readers[r].epochs[e].begin(), readers[r].epochs[e].end());
      read += readers[r].epochs[e].size();
    }
    EXPECT_EQ(read, kSamples / 64 * 64) << "epoch " << e;
    EXPECT_EQ(split.size(), read) << "epoch " << e << ": a sample read twice";
  }
  const json stats = json::parse(server->StatsJson());
  ASSERT_EQ(stats["rings"].size(), 4u);
  uint64_t decoded = 0;
  for (const json& ring : stats["rings"]) {
    const uint64_t n = ring["samples_decoded"].get<uint64_t>();
    decoded += n;
    EXPECT_NEAR(static_cast<double>(n), kEpochs * kSamples / 4.0, kEpochs * 16.0) << ring.dump();
  }
  EXPECT_EQ(decoded, kEpochs * kSamples) << "each sample decoded once";
}

}  // namespace
}  // namespace batchcast
