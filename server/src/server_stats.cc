#include "server_stats.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/src/catch_all.h"
#include "device_list.h"

namespace batchcast {
namespace {

// One ring's counters, its source's included.
nlohmann::json RingStats(const Server::Impl::Ring& ring) {
  nlohmann::json j = ring.scheduler->Stats();
  if (ring.source) {
    j["source"] = ring.source->description();
    nlohmann::json counters = nlohmann::json::object();
    for (const auto& [k, v] : ring.source->counters()) counters[k] = v;
    j["source_counters"] = counters;
    // docs/stats.md producer_stage_s: the source's stages, then the wait
    // for a free slot (the scheduler's producer_blocked_s).
    nlohmann::json stages = nlohmann::json::object();
    nlohmann::json threads = nlohmann::json::object();
    for (const StageTime& t : ring.source->stage_times()) {
      stages[t.name] = t.seconds;
      threads[t.name] = t.threads;
    }
    stages["slot_wait"] = j.value("producer_blocked_s", 0.0);
    threads["slot_wait"] = 1;
    j["producer_stage_s"] = stages;
    j["producer_stage_threads"] = threads;
  }
  return j;
}

}  // namespace

nlohmann::json ServerStats(const Server::Impl& impl) {
  const std::vector<Server::Impl::Ring>& rings = impl.rings;
  nlohmann::json j = RingStats(rings.front());
  if (rings.size() > 1) {
    // Note [Rings per GPU]: every consumer at the top level, each ring's own.
    nlohmann::json all_consumers = nlohmann::json::array();
    nlohmann::json per_ring = nlohmann::json::array();
    for (const Server::Impl::Ring& ring : rings) {
      nlohmann::json rj = RingStats(ring);
      const std::string device = DeviceName(Device::Cuda(ring.device));
      rj["device"] = device;
      if (rj.contains("consumers")) {
        for (nlohmann::json c : rj["consumers"]) {
          c["device"] = device;
          all_consumers.push_back(std::move(c));
        }
      }
      per_ring.push_back(std::move(rj));
    }
    j["consumers"] = std::move(all_consumers);
    j["rings"] = std::move(per_ring);
  }
  j["name"] = impl.options.name;
  j["endpoint"] = impl.endpoint;
  j["device"] = DeviceName(impl.options.source.device);
  if (rings.size() > 1) {
    ServerOptions listed = impl.options;
    listed.all_gpus = false;
    listed.gpus.clear();
    for (const Server::Impl::Ring& ring : rings) listed.gpus.push_back(ring.device);
    j["device"] = DeviceOptionName(listed);  // "cuda:0,1", also for cuda:all
  }
  j["pid"] = getpid();
  j["refused_connections"] = impl.control->refused_connections();
  j["handshakes_cut"] = impl.control->handshakes_cut();
  if (impl.mps) {
    // docs/stats.md: true / false, or "unknown"; mps_detail says why.
    if (impl.mps->kind == MpsState::Kind::kUnknown) {
      j["mps"] = "unknown";
    } else {
      j["mps"] = impl.mps->kind == MpsState::Kind::kOn;
    }
    j["mps_detail"] = impl.mps->reason;
  }
  if (impl.shard) {
    const ServerOptions::ShardChoice& shard = *impl.shard;
    j["shard"] = {{"rank", shard.rank}, {"num_shards", shard.count}, {"source", shard.source}};
  }
  if (impl.metrics) j["metrics_endpoint"] = impl.metrics->url();
  return j;
}

std::string ServerStatsJson(const Server::Impl& impl) {
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  Result<std::string> r = CatchAll("the stats", [&impl]() -> Result<std::string> {
    return ServerStats(impl).dump(-1, ' ', false, kReplace);
  });
  if (r.ok()) return *std::move(r);
  nlohmann::json error = {
      {"name", impl.options.name}, {"pid", getpid()}, {"error", r.status().message()}};
  return error.dump(-1, ' ', false, kReplace);
}

}  // namespace batchcast
