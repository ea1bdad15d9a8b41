// RenderMetrics (server/src/metrics_render.h): the stats object as Prometheus
// series: names and types by the conventions, the labels of rings,
// consumers and groups, values as in the stats; and docs/metrics.md lists
// every family.
#include "server/src/metrics_render.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "batchcast/core/version.h"

namespace batchcast {
namespace {

using nlohmann::json;

// The samples of an exposition, by their line's text before the value
// ("name{labels}"); the HELP and TYPE lines by family.
struct Parsed {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
  std::set<std::string> helped;
};

Parsed Parse(const std::string& text) {
  Parsed p;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("# HELP ")) {
      p.helped.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (line.starts_with("# TYPE ")) {
      const size_t space = line.find(' ', 7);
      p.types[line.substr(7, space - 7)] = line.substr(space + 1);
    } else {
      const size_t space = line.rfind(' ');
      p.samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
  }
  return p;
}

json OneRingStats() {
  return json::parse(R"({
    "name": "imnet", "endpoint": "ipc:///run/x.sock", "pid": 7, "device": "cpu",
    "refused_connections": 0, "handshakes_cut": 0, "window": 8, "batch_size": 64,
    "epoch_len": 1000, "lag_policy": "block", "seqs_published": 5000, "holes": 3,
    "samples_published": 4997, "batches_written": 79, "producer_epoch": 5,
    "stream_ended": false, "uptime_s": 12.5, "producer_blocked_s": 1.25,
    "slots": {"free": 2, "writing": 1, "ready": 3, "leased": 2},
    "consumers_evicted": 1, "consumers_lost": 0, "skip_events": 0,
    "slowest_lag_samples": 128, "slowest_lag_slots": 2.0,
    "source": "image dataset /d", "source_counters": {"files": 1000,
      "files_dropped_at_scan": 4, "files_dropped_at_decode": 2, "samples_dropped": 3,
      "read_retries": 1, "reads_recovered": 1, "files_unreadable": 0, "shard_opens": 9},
    "producer_stage_s": {"read": 3.5, "decode_augment": 20.0, "slot_wait": 1.25},
    "producer_stage_threads": {"read": 2, "decode_augment": 2, "slot_wait": 1},
    "shard": {"rank": 0, "num_shards": 2, "source": "options"},
    "metrics_endpoint": "http://127.0.0.1:9400/metrics",
    "consumers": [
      {"id": 1, "name": "train.py:100", "pid": 100, "batch_size": 32, "attached": true,
       "epoch": 4, "step": 10, "cursor": 4800, "lag_samples": 197, "batches": 150,
       "samples": 4800, "skipped": 0, "samples_passed_over": 1, "leases": 2, "pending": 1,
       "wait_s": 2.5, "connected_s": 11.0},
      {"id": 2, "name": "ddp \"job\"", "pid": 101, "batch_size": 16, "attached": true,
       "epoch": 2, "step": 3, "cursor": 2000, "lag_samples": 64, "batches": 120,
       "samples": 1920, "skipped": 0, "samples_passed_over": 0, "leases": 0, "pending": 0,
       "wait_s": 0.5, "connected_s": 9.0, "group": "torchrun:r:0", "rank": 1, "world_size": 2}],
    "groups": [{"name": "torchrun:r:0", "id": 1, "state": "running", "world_size": 2,
      "batch_size": 16, "ranks": "0,1", "batches_per_epoch": 31, "frontier": 4000,
      "rounds": 60, "skipped": 0, "samples_passed_over": 0}]
  })");
}

TEST(MetricsRender, SeriesCarryTheStatsValuesAndLabels) {
  const Parsed p = Parse(RenderMetrics(OneRingStats()));
  const std::string ring = R"(server="imnet",ring="cpu")";
  EXPECT_EQ(p.samples.at("batchcast_samples_published_total{" + ring + "}"), 4997);
  EXPECT_EQ(p.samples.at("batchcast_holes_total{" + ring + "}"), 3);
  EXPECT_EQ(p.samples.at("batchcast_producer_blocked_seconds_total{" + ring + "}"), 1.25);
  EXPECT_EQ(p.samples.at("batchcast_producer_stage_seconds_total{" + ring + R"(,stage="read"})"),
            3.5);
  EXPECT_EQ(p.samples.at("batchcast_producer_stage_threads{" + ring + R"(,stage="read"})"), 2);
  EXPECT_EQ(p.samples.at("batchcast_ring_slots{" + ring + R"(,state="ready"})"), 3);
  EXPECT_EQ(p.samples.at("batchcast_ring_capacity_slots{" + ring + "}"), 8);
  EXPECT_EQ(p.samples.at("batchcast_slowest_lag_samples{" + ring + "}"), 128);
  EXPECT_EQ(p.samples.at("batchcast_consumers{" + ring + "}"), 2);
  EXPECT_EQ(p.samples.at("batchcast_stream_ended{" + ring + "}"), 0);
  EXPECT_EQ(p.samples.count("batchcast_stream_end_samples{" + ring + "}"), 0u);  // no --epochs
  // Dropped files, by where they were dropped; an unmapped counter by name.
  EXPECT_EQ(p.samples.at("batchcast_files_dropped_total{" + ring + R"(,at="scan"})"), 4);
  EXPECT_EQ(p.samples.at("batchcast_files_dropped_total{" + ring + R"(,at="decode"})"), 2);
  EXPECT_EQ(p.samples.at("batchcast_samples_dropped_total{" + ring + "}"), 3);
  EXPECT_EQ(p.samples.at("batchcast_source_counter{" + ring + R"(,counter="shard_opens"})"), 9);
  // Consumers: name and id; a rank also its group and rank; names escaped.
  const std::string first = ring + R"(,consumer="train.py:100",consumer_id="1")";
  EXPECT_EQ(p.samples.at("batchcast_consumer_wait_seconds_total{" + first + "}"), 2.5);
  EXPECT_EQ(p.samples.at("batchcast_consumer_samples_total{" + first + "}"), 4800);
  EXPECT_EQ(p.samples.at("batchcast_consumer_lag_samples{" + first + "}"), 197);
  EXPECT_EQ(p.samples.at("batchcast_consumer_attached{" + first + "}"), 1);
  const std::string rank =
      ring + R"(,consumer="ddp \"job\"",consumer_id="2",group="torchrun:r:0",rank="1")";
  EXPECT_EQ(p.samples.at("batchcast_consumer_wait_seconds_total{" + rank + "}"), 0.5);
  // Groups: the state as 1 of its four, ranks connected counted.
  const std::string group = ring + R"(,group="torchrun:r:0")";
  EXPECT_EQ(p.samples.at("batchcast_group_state{" + group + R"(,state="running"})"), 1);
  EXPECT_EQ(p.samples.at("batchcast_group_state{" + group + R"(,state="broken"})"), 0);
  EXPECT_EQ(p.samples.at("batchcast_group_ranks_connected{" + group + "}"), 2);
  EXPECT_EQ(p.samples.at("batchcast_group_rounds_total{" + group + "}"), 60);
  // The server: its info and uptime.
  EXPECT_EQ(p.samples.count(R"(batchcast_server_info{server="imnet",version=")" BATCHCAST_VERSION
                            R"(",device="cpu",lag_policy="block",shard="0/2"})"),
            1u);
  EXPECT_EQ(p.samples.at(R"(batchcast_uptime_seconds{server="imnet"})"), 12.5);
}

TEST(MetricsRender, NamesAndTypesFollowPrometheusConventions) {
  const Parsed p = Parse(RenderMetrics(OneRingStats()));
  std::set<std::string_view> known;
  for (const MetricFamily* f : MetricFamilies()) {
    EXPECT_TRUE(known.insert(f->name).second) << "twice: " << f->name;
    EXPECT_TRUE(f->name.starts_with("batchcast_")) << f->name;
    EXPECT_TRUE(IsMetricName(f->name)) << f->name;
    // Counters and only counters end in _total; no unit but base units.
    EXPECT_EQ(f->name.ends_with("_total"), f->type == MetricType::kCounter) << f->name;
    for (std::string_view bad : {"_ms", "millis", "_mb", "_percent", "_kb"}) {
      EXPECT_EQ(f->name.find(bad), std::string_view::npos) << f->name;
    }
    EXPECT_FALSE(f->help.empty()) << f->name;
  }
  for (const auto& [sample, value] : p.samples) {
    const std::string family = sample.substr(0, sample.find('{'));
    EXPECT_TRUE(known.count(family)) << family;
    EXPECT_TRUE(p.helped.count(family)) << family;
    EXPECT_TRUE(p.types.count(family)) << family;
  }
}

// Note [Placement]: the stream's series are the server's (ring "cuda:0,1");
// each ring has what it decoded, what its consumers read locally and from
// the peer, and its source's own counters; the dataset's counters, which the
// rings' sources share and the stats give at the top level only, are the
// server's, so that a sum over the rings counts each once.
TEST(MetricsRender, SeveralRingsShareTheStreamAndHaveTheirOwnSeries) {
  json stats = OneRingStats();
  stats["device"] = "cuda:0,1";
  stats["source_counters"] = {
      {"files", 1000}, {"files_dropped_at_decode", 2}, {"gpu_decoded", 5000}};
  json ring0 = {{"ring", 0},
                {"device", "cuda:0"},
                {"samples_decoded", 3000},
                {"batches_local", 40},
                {"batches_from_peers", 2},
                {"peer_bytes", 1024},
                {"turn_wait_s", 0.5},
                {"read_ahead_misses", 3},
                {"source_counters", {{"gpu_decoded", 3000}}}};
  json ring1 = ring0;
  ring1["device"] = "cuda:1";
  ring1["samples_decoded"] = 1997;
  ring1["source_counters"]["gpu_decoded"] = 2000;
  stats["rings"] = json::array({ring0, ring1});
  const Parsed p = Parse(RenderMetrics(stats));
  EXPECT_EQ(p.samples.at(R"(batchcast_samples_published_total{server="imnet",ring="cuda:0,1"})"),
            4997);
  EXPECT_EQ(p.samples.at(R"(batchcast_ring_samples_decoded_total{server="imnet",ring="cuda:0"})"),
            3000);
  EXPECT_EQ(p.samples.at(R"(batchcast_ring_samples_decoded_total{server="imnet",ring="cuda:1"})"),
            1997);
  EXPECT_EQ(p.samples.at(R"(batchcast_ring_peer_bytes_total{server="imnet",ring="cuda:1"})"), 1024);
  EXPECT_EQ(p.samples.at(R"(batchcast_ring_turn_wait_seconds_total{server="imnet",ring="cuda:0"})"),
            0.5);
  EXPECT_EQ(p.samples.at(R"(batchcast_ring_read_ahead_misses_total{server="imnet",ring="cuda:1"})"),
            3);
  EXPECT_EQ(
      p.samples.at(R"(batchcast_ring_batches_from_peers_total{server="imnet",ring="cuda:0"})"), 2);
  EXPECT_EQ(p.samples.at(R"(batchcast_source_files{server="imnet",ring="cuda:0,1"})"), 1000);
  EXPECT_EQ(p.samples.count(R"(batchcast_source_files{server="imnet",ring="cuda:1"})"), 0u);
  EXPECT_EQ(
      p.samples.at(R"(batchcast_files_dropped_total{server="imnet",ring="cuda:0,1",at="decode"})"),
      2);
  EXPECT_EQ(
      p.samples.at(R"(batchcast_images_decoded_total{server="imnet",ring="cuda:1",on="gpu"})"),
      2000);
  EXPECT_EQ(
      p.samples.count(R"(batchcast_images_decoded_total{server="imnet",ring="cuda:0,1",on="gpu"})"),
      0u)
      << "a ring's own counters only per ring";
  EXPECT_EQ(
      p.samples.at(
          R"(batchcast_consumer_wait_seconds_total{server="imnet",ring="cuda:0,1",consumer="train.py:100",consumer_id="1"})"),
      2.5);
}

// Note [Attached producers]: a ring that accepts them says who decodes it
// (a trainer's pid, 0: the server), what they wrote and how often the server
// took the ring back; a ring without an attach socket has none of these.
TEST(MetricsRender, AttachedProducerSeriesOnlyForRingsThatAcceptThem) {
  json stats = OneRingStats();
  stats["device"] = "cuda:0,1";
  json ring0 = {{"ring", 0},
                {"device", "cuda:0"},
                {"samples_decoded", 3000},
                {"attached_pid", 4242},
                {"attached_batches", 45},
                {"attached_detached", 1}};
  json ring1 = {{"ring", 1},         {"device", "cuda:1"},    {"samples_decoded", 1997},
                {"attached_pid", 0}, {"attached_batches", 0}, {"attached_detached", 2}};
  stats["rings"] = json::array({ring0, ring1});
  const Parsed p = Parse(RenderMetrics(stats));
  EXPECT_EQ(p.samples.at(R"(batchcast_ring_attached_pid{server="imnet",ring="cuda:0"})"), 4242);
  EXPECT_EQ(p.samples.at(R"(batchcast_ring_attached_pid{server="imnet",ring="cuda:1"})"), 0);
  EXPECT_EQ(p.samples.at(R"(batchcast_ring_attached_batches_total{server="imnet",ring="cuda:0"})"),
            45);
  EXPECT_EQ(p.samples.at(R"(batchcast_ring_attached_detached_total{server="imnet",ring="cuda:1"})"),
            2);
  EXPECT_EQ(p.types.at("batchcast_ring_attached_pid"), "gauge");
  EXPECT_EQ(p.types.at("batchcast_ring_attached_batches_total"), "counter");
  EXPECT_EQ(p.types.at("batchcast_ring_attached_detached_total"), "counter");

  // --no-attach, or an external producer: the keys are absent, so are the series.
  stats["device"] = "cpu";
  stats["rings"] = json::array({{{"ring", 0}, {"device", "cpu"}, {"samples_decoded", 10}}});
  const Parsed none = Parse(RenderMetrics(stats));
  EXPECT_EQ(
      none.samples.count(R"(batchcast_ring_samples_decoded_total{server="imnet",ring="cpu"})"), 1u);
  for (const char* family : {"batchcast_ring_attached_pid", "batchcast_ring_attached_batches_total",
                             "batchcast_ring_attached_detached_total"}) {
    EXPECT_EQ(none.types.count(family), 0u) << family;
  }
}

TEST(MetricsRender, WhatTheStatsLackIsLeftOut) {
  // A batchcast.Producer: no source, no stages, no shard; an error object.
  const Parsed p = Parse(RenderMetrics(
      json::parse(R"({"name": "p", "device": "cpu", "samples_published": 5, "consumers": []})")));
  EXPECT_EQ(p.samples.at(R"(batchcast_samples_published_total{server="p",ring="cpu"})"), 5);
  EXPECT_EQ(p.types.count("batchcast_producer_stage_seconds_total"), 0u);
  EXPECT_EQ(p.types.count("batchcast_files_dropped_total"), 0u);
  EXPECT_NO_THROW(RenderMetrics(json::parse(R"({"name": "x", "error": "no"})")));
  EXPECT_NO_THROW(RenderMetrics(json::array()));
}

TEST(MetricsRender, DocsListEveryFamily) {
  std::ifstream in(BC_SOURCE_DIR "/docs/metrics.md");
  ASSERT_TRUE(in) << "docs/metrics.md";
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const MetricFamily* f : MetricFamilies()) {
    EXPECT_NE(doc.find("`" + std::string(f->name) + "`"), std::string::npos)
        << f->name << " is not in docs/metrics.md";
  }
}

}  // namespace
}  // namespace batchcast
