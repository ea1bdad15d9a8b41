// Helpers of the image end-to-end tests (image_test.cc, shards_test.cc):
// datasets made by tools/make_dataset.py, server options, consumers that read
// whole epochs keeping every sample's bytes.
#pragma once

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/client/consumer.h"
#include "batchcast/server/server.h"
#include "harness.h"
#include "process.h"

namespace batchcast {

using namespace std::chrono_literals;

// Makes a dataset with tools/make_dataset.py (cached per process).
inline std::string MakeDataset(const std::string& key, const std::vector<std::string>& args) {
  static std::map<std::string, std::string> made;
  if (auto it = made.find(key); it != made.end()) return it->second;
  const std::string dir = testing::TempDir() + "/ds";
  // The interpreter with PIL and numpy: $BATCHCAST_PYTHON, else Debian's.
  const char* python = std::getenv("BATCHCAST_PYTHON");
  std::vector<std::string> argv = {python != nullptr ? python : "/usr/bin/python3",
                                   BC_SOURCE_DIR "/tools/make_dataset.py", dir, "--quiet"};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::Process p(argv);
  EXPECT_EQ(p.Wait(120s), 0) << "make_dataset.py failed";
  made[key] = dir;
  return dir;
}

inline ServerOptions ImageOptions(const std::string& data) {
  ServerOptions o;
  o.name = testing::UniqueName("img");
  o.source.data = data;
  o.batch_size = 16;
  o.window = 6;
  o.source.size = 32;
  o.source.workers = 2;
  o.source.seed = 5;
  return o;
}

inline std::unique_ptr<Consumer> Connect(const std::string& endpoint, uint32_t batch,
                                         bool drop_last = true) {
  ConsumerOptions c;
  c.endpoint = endpoint;
  c.batch_size = batch;
  c.drop_last = drop_last;
  c.join = JoinPolicy::kNextEpoch;
  c.timeout = 60s;
  auto r = Consumer::Connect(c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

struct Epoch {
  std::vector<int64_t> indices;
  std::vector<int64_t> labels;
  std::map<int64_t, std::vector<uint8_t>> images;  // by dataset index
};

// Reads one epoch; keeps the image bytes of every sample.
inline Epoch ReadEpoch(Consumer& c) {
  Epoch e;
  testing::ForEachBatchOfEpoch(&c, [&](const Batch& b) {
    auto image = b.field("image");
    auto label = b.field("label");
    EXPECT_TRUE(image.ok() && label.ok());
    const size_t per = image->bytes / b.size();
    for (size_t i = 0; i < b.size(); ++i) {
      const int64_t idx = b.indices()[i];
      e.indices.push_back(idx);
      e.labels.push_back(static_cast<const int64_t*>(label->data)[i]);
      const auto* p = static_cast<const uint8_t*>(image->data) + i * per;
      e.images[idx] = std::vector<uint8_t>(p, p + per);
    }
  });
  return e;
}

// `o` on `rings` host rings standing in for GPUs (4 slots per ring), waiting
// for a consumer per ring.
inline ServerOptions OnHostRings(ServerOptions o, uint32_t rings) {
  o.host_rings = rings;
  o.window = 4 * rings;
  o.min_consumers = rings;
  return o;
}

// A consumer of `endpoint` on each of its `rings` host rings (device
// "cpu:N", batch `batch`, incomplete batches kept), all reading at once,
// each `epochs` whole epochs: what each read, by ring (nothing, and a test
// failure, when one cannot connect).
inline std::vector<std::vector<Epoch>> ReadOnEveryRing(const std::string& endpoint, int rings,
                                                       uint32_t batch, int epochs) {
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (int ring = 0; ring < rings; ++ring) {
    ConsumerOptions c;
    c.endpoint = endpoint;
    c.batch_size = batch;
    c.drop_last = false;
    c.timeout = 60s;
    c.device = "cpu:" + std::to_string(ring);
    auto consumer = Consumer::Connect(c);
    EXPECT_TRUE(consumer.ok()) << consumer.status().ToString();
    if (!consumer.ok()) return {};
    consumers.push_back(std::move(*consumer));
  }
  return testing::ReadTogether(consumers, [epochs](Consumer& c) {
    std::vector<Epoch> read;
    for (int e = 0; e < epochs; ++e) read.push_back(ReadEpoch(c));
    return read;
  });
}

// A consumer on each of `endpoint`'s `rings` host rings (ReadOnEveryRing),
// each reading the whole stream: every one of its `epochs` epochs holds the
// `samples` usable samples, each once, whichever ring each batch was placed
// on.
inline void ExpectEveryRingReadsWholeEpochs(const std::string& endpoint, int rings, uint32_t batch,
                                            int epochs, size_t samples) {
  const auto reads = ReadOnEveryRing(endpoint, rings, batch, epochs);
  ASSERT_EQ(reads.size(), static_cast<size_t>(rings));
  for (const auto& read : reads) {
    ASSERT_EQ(read.size(), static_cast<size_t>(epochs));
    for (const Epoch& e : read) {
      EXPECT_EQ(e.indices.size(), samples);
      EXPECT_EQ(std::set<int64_t>(e.indices.begin(), e.indices.end()).size(), samples);
    }
  }
}

// Server::Start(o) with --on-error fail fails, naming `what` (the bad file or
// shard) and the policy.
inline void ExpectOnErrorFailNames(ServerOptions o, const std::string& what) {
  o.source.on_error = ErrorPolicy::kFail;
  auto server = Server::Start(o);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find(what), std::string::npos) << server.status().ToString();
  EXPECT_NE(server.status().message().find("--on-error fail"), std::string::npos);
}

inline nlohmann::json StatsOf(Server& s) { return nlohmann::json::parse(s.StatsJson()); }

}  // namespace batchcast
