#include "batchcast/server/server_options.h"

#include <algorithm>

#include "core/src/endpoint.h"
#include "core/src/enum_names.h"
#include "core/src/launcher_env.h"
#include "core/src/runtime_dir.h"

namespace batchcast {

namespace {
constexpr EnumNames<LagPolicy, 3> kLagPolicyNames{
    "lag_policy",
    {{{LagPolicy::kBlock, "block"}, {LagPolicy::kSkip, "skip"}, {LagPolicy::kEvict, "evict"}}}};
constexpr EnumNames<Placement, 2> kPlacementNames{
    "placement", {{{Placement::kRoundRobin, "round-robin"}, {Placement::kDemand, "demand"}}}};
}  // namespace

Result<LagPolicy> ParseLagPolicy(std::string_view text) { return kLagPolicyNames.Parse(text); }
std::string_view LagPolicyName(LagPolicy policy) { return kLagPolicyNames.Name(policy); }
Result<Placement> ParsePlacement(std::string_view text) { return kPlacementNames.Parse(text); }
std::string_view PlacementName(Placement placement) { return kPlacementNames.Name(placement); }

uint32_t ServerOptions::window_for(size_t rings) const {
  constexpr uint32_t kDefaultWindow = 8, kSlotsPerRing = 4;
  if (window != 0) return window;
  return std::max<uint32_t>(kDefaultWindow, kSlotsPerRing * static_cast<uint32_t>(rings));
}

std::chrono::milliseconds ServerOptions::heartbeat_period() const {
  if (heartbeat_interval.count() > 0) return heartbeat_interval;
  return std::max(std::chrono::milliseconds(10), heartbeat_timeout / 8);
}

std::string ServerOptions::metrics_address() const {
  if (metrics_port == 0) return "0";
  const std::string port =
      metrics_port == kAnyMetricsPort ? std::string("any") : std::to_string(metrics_port);
  return metrics_host.empty() ? port : metrics_host + ":" + port;
}

Result<ServerOptions::ShardChoice> ServerOptions::Shard() const {
  ShardChoice c{shard_rank.value_or(0), num_shards.value_or(1),
                shard_rank || num_shards ? "options" : "default"};
  if (shard_from_env && !(shard_rank && num_shards)) {
    Result<std::optional<NodeShard>> from_env = NodeShardFromEnv();
    if (!from_env.ok()) return from_env.status().WithContext("shard_from_env (--shard-from-env)");
    const std::optional<NodeShard>& node = *from_env;
    if (!node) {
      return InvalidArgumentError(
          "shard_from_env (--shard-from-env): no launcher variables name this node's shard "
          "(GROUP_RANK with GROUP_WORLD_SIZE or NNODES, PET_NODE_RANK with PET_NNODES, or "
          "SLURM_NODEID with SLURM_NNODES); run it under srun, set them, or pass --shard-rank and "
          "--num-shards");
    }
    c.rank = shard_rank.value_or(node->shard_rank);
    c.count = num_shards.value_or(node->num_shards);
    c.source = shard_rank || num_shards ? node->source + " and options" : node->source;
  }
  if (c.count == 0 || c.rank >= c.count) {
    return InvalidArgumentError("shard_rank (--shard-rank) " + std::to_string(c.rank) +
                                " must be below num_shards (--num-shards) " +
                                std::to_string(c.count) + " (" + c.source + ")");
  }
  return c;
}

Status ServerOptions::Validate() const {
  auto bad = [](const std::string& what) { return InvalidArgumentError(what); };
  BATCHCAST_RETURN_IF_ERROR(ValidateServerName(name).WithContext("name (--name)"));
  if (!endpoint.empty()) {
    BATCHCAST_RETURN_IF_ERROR(ResolveEndpoint(endpoint, EndpointUse::kBind)
                                  .status()
                                  .WithContext("endpoint (--endpoint)"));
  }
  const bool tcp = endpoint.starts_with("tcp://");
  if (tcp && !allow_remote && !IsLoopbackTcp(endpoint)) {
    return bad("endpoint (--endpoint) " + endpoint +
               " accepts connections from other machines; pass allow_remote (--allow-remote) "
               "to mean it, or bind tcp://127.0.0.1:PORT (tcp:// is always authenticated and "
               "encrypted with CURVE: README \"Security\")");
  }
  // The metrics endpoint has no authentication: beyond loopback only when
  // asked for (docs/metrics.md). Its host is an IPv4 address (the option
  // table checks it), loopback as IsLoopbackTcp reads it.
  if (metrics_port != 0 && !allow_remote && !metrics_host.empty() &&
      !IsLoopbackTcp("tcp://" + metrics_host + ":1")) {
    return bad("metrics_port (--metrics-port) " + metrics_address() +
               " serves the metrics to other machines, without authentication; pass "
               "allow_remote (--allow-remote) to mean it, or give the port alone (it then "
               "listens on 127.0.0.1)");
  }
  if (!key_file.empty() && !tcp) {
    return bad(
        "key_file (--key-file) is for tcp:// endpoints; ipc:// ones are protected by the "
        "runtime directory, which only you may enter");
  }
  if (batch_size == 0 || batch_size > 65536)
    return bad("batch_size (--batch-size) must be in 1..65536");
  if (window != 0 && (window < 2 || window > 4096))
    return bad("window (--window) must be in 2..4096 slots (0: the default)");
  if (resume_slots > 4096) return bad("resume_slots (--resume-slots) must be in 0..4096 slots");
  BATCHCAST_RETURN_IF_ERROR(Shard().status());
  if (lag_timeout.count() <= 0) return bad("lag_timeout (--lag-timeout) must be positive");
  if (heartbeat_timeout.count() <= 0 || heartbeat_interval.count() < 0 ||
      heartbeat_timeout < 2 * heartbeat_period()) {
    return bad(
        "heartbeat_timeout (--heartbeat-timeout) must be at least twice the heartbeat "
        "interval (--heartbeat-interval)");
  }
  if (max_leases == 0) return bad("max_leases (--max-leases) must be positive");
  if (max_consumers == 0) return bad("max_consumers (--max-consumers) must be positive");
  if (min_consumers > max_consumers) {
    return bad("min_consumers (--min-consumers) is " + std::to_string(min_consumers) +
               " but max_consumers (--max-consumers) is " + std::to_string(max_consumers) +
               ": the producer would wait for consumers that may never join");
  }
  if (group_timeout.count() <= 0) return bad("group_timeout (--group-timeout) must be positive");
  if ((all_gpus || !gpus.empty()) &&
      (!source.device.is_cuda() || (!gpus.empty() && gpus.front() != source.device.index))) {
    return bad("device (--device): source.device must be the first of the GPUs listed");
  }
  if (host_rings == 0 || host_rings > kMaxHostRings)
    return bad("host_rings must be in 1.." + std::to_string(kMaxHostRings));
  if (host_rings > 1 && source.device.is_cuda()) {
    return bad("host_rings stand in for GPUs on a server whose device is cpu");
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (std::find(gpus.begin() + i + 1, gpus.end(), gpus[i]) != gpus.end()) {
      return bad("device (--device) names cuda:" + std::to_string(gpus[i]) + " twice");
    }
  }
  return Status::Ok();
}

}  // namespace batchcast
