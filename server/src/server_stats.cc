#include "server_stats.h"

#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/src/catch_all.h"
#include "device_list.h"

namespace batchcast {
namespace {

// Adds `from`'s numbers to `to`'s, key by key, but for the keys in `once`
// (kept as `to` has them).
void AddCounts(nlohmann::json& to, const nlohmann::json& from,
               const std::vector<std::string>& once = {}) {
  for (const auto& [k, v] : from.items()) {
    if (std::find(once.begin(), once.end(), k) != once.end() && to.contains(k)) continue;
    if (!to.contains(k)) {
      to[k] = v;
    } else if (to[k].is_number_integer() && v.is_number_integer()) {
      to[k] = to[k].get<int64_t>() + v.get<int64_t>();
    } else {
      to[k] = to[k].get<double>() + v.get<double>();
    }
  }
}

// A ring's source: what it is, its counters and its stage times.
nlohmann::json SourceStats(const Source& source) {
  nlohmann::json j;
  j["source"] = source.description();
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& [k, v] : source.counters()) counters[k] = v;
  j["source_counters"] = counters;
  nlohmann::json stages = nlohmann::json::object();
  nlohmann::json threads = nlohmann::json::object();
  for (const StageTime& t : source.stage_times()) {
    stages[t.name] = t.seconds;
    threads[t.name] = t.threads;
  }
  j["producer_stage_s"] = stages;
  j["producer_stage_threads"] = threads;
  return j;
}

}  // namespace

nlohmann::json ServerStats(const Server::Impl& impl) {
  const std::vector<Server::Impl::Ring>& rings = impl.rings;
  // The server's counters (one Scheduler for every ring: Note [Placement]).
  nlohmann::json j = impl.scheduler().Stats();
  nlohmann::json& per_ring = j["rings"];
  for (size_t i = 0; i < rings.size() && i < per_ring.size(); ++i) {
    const Server::Impl::Ring& ring = rings[i];
    nlohmann::json& rj = per_ring[i];
    rj["device"] = DeviceName(ring.device >= 0 ? Device::Cuda(ring.device) : Device::Cpu());
    if (ring.attach) {  // Note [Attached producers]
      rj["attached_pid"] = ring.attach->holder_pid();
      rj["attached_batches"] = ring.attach->holder_batches();
      rj["attached_detached"] = ring.attach->detached_count();
    }
    if (!ring.source) continue;
    const nlohmann::json source = SourceStats(*ring.source);
    const std::vector<std::string> shared = ring.source->dataset_counters();
    for (const auto& [k, v] : source.items()) rj[k] = v;
    // The top level: the first ring's source, every ring's counts summed but
    // the dataset's, which the rings share (MakeSources): once, there only,
    // so that a sum over the rings (a Prometheus query) counts it once.
    if (i == 0) {
      for (const auto& [k, v] : source.items()) j[k] = v;
    } else {
      AddCounts(j["source_counters"], source["source_counters"], shared);
      for (const char* k : {"producer_stage_s", "producer_stage_threads"}) {
        AddCounts(j[k], source[k]);
      }
    }
    if (rings.size() > 1) {
      for (const std::string& k : shared) rj["source_counters"].erase(k);
    }
  }
  if (rings.front().source) {
    // docs/stats.md producer_stage_s: the sources' stages, then the wait for
    // a free slot (the scheduler's producer_blocked_s).
    j["producer_stage_s"]["slot_wait"] = j.value("producer_blocked_s", 0.0);
    j["producer_stage_threads"]["slot_wait"] = rings.size();
  }
  if (rings.size() > 1) {
    for (nlohmann::json& c : j["consumers"]) {
      c["device"] = per_ring[c.value("ring", 0)].value("device", "");
    }
  }
  j["name"] = impl.options.name;
  j["endpoint"] = impl.endpoint;
  j["device"] = DeviceName(impl.options.source.device);
  if (rings.size() > 1 && rings.front().device >= 0) {
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
