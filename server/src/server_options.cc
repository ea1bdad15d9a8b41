#include "batchcast/server/server_options.h"

#include <algorithm>

#include "core/src/runtime_dir.h"
#include "core/src/enum_names.h"

namespace batchcast {

namespace {
constexpr EnumNames<LagPolicy, 3> kLagPolicyNames{
    "lag_policy",
    {{{LagPolicy::kBlock, "block"}, {LagPolicy::kSkip, "skip"}, {LagPolicy::kEvict, "evict"}}}};
}  // namespace

Result<LagPolicy> ParseLagPolicy(std::string_view text) { return kLagPolicyNames.Parse(text); }
std::string_view LagPolicyName(LagPolicy policy) { return kLagPolicyNames.Name(policy); }

std::chrono::milliseconds ServerOptions::heartbeat_period() const {
  if (heartbeat_interval.count() > 0) return heartbeat_interval;
  return std::max(std::chrono::milliseconds(10), heartbeat_timeout / 8);
}

Status ServerOptions::Validate() const {
  auto bad = [](const std::string& what) { return InvalidArgumentError(what); };
  BATCHCAST_RETURN_IF_ERROR(ValidateServerName(name).WithContext("name (--name)"));
  if (!endpoint.empty()) {
    BATCHCAST_RETURN_IF_ERROR(ResolveEndpoint(endpoint, EndpointUse::kBind)
                                  .status()
                                  .WithContext("endpoint (--endpoint)"));
  }
  if (batch_size == 0 || batch_size > 65536) return bad("batch_size (--batch-size) must be in 1..65536");
  if (window < 2 || window > 4096) return bad("window (--window) must be in 2..4096 slots");
  if (num_shards == 0 || shard_rank >= num_shards) {
    return bad("shard_rank (--shard-rank) must be below num_shards (--num-shards)");
  }
  if (lag_timeout.count() <= 0) return bad("lag_timeout (--lag-timeout) must be positive");
  if (heartbeat_timeout.count() <= 0 || heartbeat_interval.count() < 0 ||
      heartbeat_timeout < 2 * heartbeat_period()) {
    return bad("heartbeat_timeout (--heartbeat-timeout) must be at least twice the heartbeat "
               "interval (--heartbeat-interval)");
  }
  if (max_leases == 0) return bad("max_leases (--max-leases) must be positive");
  if (max_consumers == 0) return bad("max_consumers (--max-consumers) must be positive");
  if ((all_gpus || !gpus.empty()) &&
      (!source.device.is_cuda() || (!gpus.empty() && gpus.front() != source.device.index))) {
    return bad("device (--device): source.device must be the first of the GPUs listed");
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (std::find(gpus.begin() + i + 1, gpus.end(), gpus[i]) != gpus.end()) {
      return bad("device (--device) names cuda:" + std::to_string(gpus[i]) + " twice");
    }
  }
  return Status::Ok();
}

}  // namespace batchcast
