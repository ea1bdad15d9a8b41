#include "batchcast/server/server_options.h"

#include "batchcast/core/dtype.h"
#include "batchcast/core/runtime_dir.h"

namespace batchcast {

Result<LagPolicy> ParseLagPolicy(std::string_view text) {
  if (text == "block") return LagPolicy::kBlock;
  if (text == "skip") return LagPolicy::kSkip;
  if (text == "evict") return LagPolicy::kEvict;
  return InvalidArgumentError("lag_policy must be block, skip or evict, got '" +
                              std::string(text) + "'");
}

std::string_view LagPolicyName(LagPolicy policy) {
  switch (policy) {
    case LagPolicy::kBlock: return "block";
    case LagPolicy::kSkip: return "skip";
    case LagPolicy::kEvict: return "evict";
  }
  return "?";
}

Status ServerOptions::Validate() const {
  auto bad = [](const std::string& what) { return InvalidArgumentError(what); };
  BATCHCAST_RETURN_IF_ERROR(ValidateServerName(name).WithContext("name (--name)"));
  if (data.empty() && synthetic == 0) {
    return bad("no data: give a dataset path (an image folder or a .tsv list) or --synthetic COUNT");
  }
  if (!data.empty() && synthetic != 0) return bad("give either a dataset path or --synthetic, not both");
  if (batch_size == 0 || batch_size > 65536) return bad("batch_size (--batch-size) must be in 1..65536");
  if (window < 2 || window > 4096) return bad("window (--window) must be in 2..4096 slots");
  if (size < 1 || size > 8192) return bad("size (--size) must be in 1..8192");
  if (transform != "train" && transform != "eval") return bad("transform (--transform) must be train or eval");
  if (layout != "nchw" && layout != "nhwc") return bad("layout (--layout) must be nchw or nhwc");
  if (decode != "auto" && decode != "cpu" && decode != "gpu") {
    return bad("decode (--decode) must be auto, cpu or gpu");
  }
  if (on_error != "skip" && on_error != "fail") return bad("on_error (--on-error) must be skip or fail");
  auto dt = ParseDType(dtype);
  if (!dt.ok()) return dt.status().WithContext("--dtype");
  if (*dt != DType::kFloat32 && *dt != DType::kFloat16 && *dt != DType::kBFloat16 &&
      *dt != DType::kUInt8) {
    return bad("dtype (--dtype) must be float32, float16, bfloat16 or uint8");
  }
  for (float s : std) {
    if (!(s > 0)) return bad("std (--std) values must be positive");
  }
  if (device != "cpu" && !(device.starts_with("cuda:") && device.size() > 5 &&
                           device.find_first_not_of("0123456789", 5) == std::string::npos)) {
    return bad("device (--device) must be cpu or cuda:N, got '" + device + "'");
  }
  if (num_shards == 0 || shard_rank >= num_shards) {
    return bad("shard_rank (--shard-rank) must be below num_shards (--num-shards)");
  }
  if (workers < 0 || workers > 1024) return bad("workers (--workers) must be in 0..1024");
  if (lag_timeout.count() <= 0) return bad("lag_timeout (--lag-timeout) must be positive");
  if (heartbeat_interval.count() <= 0 || heartbeat_timeout < 2 * heartbeat_interval) {
    return bad("heartbeat timeout must be at least twice the heartbeat interval");
  }
  if (max_pixels == 0) return bad("max_pixels (--max-pixels) must be positive");
  if (max_leases == 0) return bad("max_leases must be positive");
  return Status::Ok();
}

}  // namespace batchcast
