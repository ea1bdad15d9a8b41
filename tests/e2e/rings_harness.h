// Test helpers for servers of several host rings standing in for GPUs
// (ServerOptions::host_rings): the server, readers on chosen rings, and the
// whole dataset to compare epochs with.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/client/consumer.h"
#include "batchcast/server/server.h"
#include "device_util.h"
#include "harness.h"

namespace batchcast::testing {

constexpr uint64_t kSamples = 480;

// `rings` host rings, batch 16 over the default window (4 slots per ring, 8
// at least), `epochs` epochs, waiting for `min` consumers.
inline std::unique_ptr<Server> StartRings(const std::string& name, uint64_t epochs, uint32_t min,
                                          uint32_t rings = 2,
                                          Placement placement = Placement::kRoundRobin) {
  ServerOptions o;
  o.name = name;
  o.placement = placement;
  o.host_rings = rings;
  o.epochs = epochs;
  o.min_consumers = min;
  o.source.synthetic = kSamples;
  o.source.size = 8;
  o.batch_size = 16;
  auto started = Server::Start(o);
  EXPECT_TRUE(started.ok()) << started.status().ToString();
  return started.ok() ? std::move(*started) : nullptr;
}

struct Reader {
  std::string device;  // "cpu:N"
  uint32_t batch = 16;
  std::string group;
  uint32_t rank = 0;
  uint32_t world = 0;
  // What it read: the indices of each epoch, batches, zero-copy batches, mismatches.
  std::vector<std::vector<int64_t>> epochs;
  int batches = 0;
  int zero_copy = 0;
  int64_t mismatches = 0;
  std::string error;
};

// Rank `rank` of the group "ddp" of `world` ranks, on ring `rank`.
inline Reader RankOnItsRing(uint32_t rank, uint32_t world) {
  Reader r;
  r.device = "cpu:" + std::to_string(rank);
  r.group = "ddp";
  r.rank = rank;
  r.world = world;
  return r;
}

// Connects every reader, then reads with each on its own thread until the
// stream ends.
inline void ReadAll(const std::string& name, std::vector<Reader>& readers) {
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (Reader& r : readers) {
    ConsumerOptions o =
        ReaderOptions(name, r.batch, JoinPolicy::kNextEpoch, std::chrono::seconds(30));
    o.device = r.device;
    o.group = r.group;  // "": none, whatever the environment says
    if (r.world > 0) {
      o.rank = r.rank;
      o.world_size = r.world;
    }
    auto c = Consumer::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ((*c)->device(), Device::Cpu());
    consumers.push_back(std::move(*c));
  }
  std::vector<std::thread> threads;
  for (size_t i = 0; i < readers.size(); ++i) {
    threads.emplace_back([&r = readers[i], c = consumers[i].get()] {
      std::vector<int64_t> epoch;
      while (true) {
        Result<Batch> b = c->Next();
        if (!b.ok()) {
          if (b.status().code() != StatusCode::kOutOfRange) r.error = b.status().ToString();
          return;
        }
        if (b->end_of_epoch()) {
          r.epochs.push_back(std::move(epoch));
          epoch.clear();
          continue;
        }
        ++r.batches;
        r.zero_copy += b->zero_copy() ? 1 : 0;
        epoch.insert(epoch.end(), b->indices().begin(), b->indices().end());
        Result<int64_t> bad = FormulaMismatches(*b, CudaStreamRef());
        r.mismatches += bad.ok() ? *bad : 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

inline std::set<int64_t> All() {
  std::set<int64_t> all;
  for (uint64_t i = 0; i < kSamples; ++i) all.insert(static_cast<int64_t>(i));
  return all;
}

}  // namespace batchcast::testing
