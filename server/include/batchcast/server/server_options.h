// ServerOptions: everything that configures a batchcast server, one struct.
// The same names, snake_case, are the Python keyword arguments; the command
// line spells them in kebab-case (--batch-size).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include "batchcast/core/status.h"

namespace batchcast {

enum class LagPolicy : uint8_t {
  kBlock = 0,  // the slowest consumer paces everyone
  kSkip = 1,   // a consumer that blocks the producer longer than lag_timeout jumps forward
  kEvict = 2,  // ... is disconnected with an error
};
Result<LagPolicy> ParseLagPolicy(std::string_view text);
std::string_view LagPolicyName(LagPolicy policy);

struct ServerOptions {
  // Source: a dataset path (ImageFolder directory or .tsv list), or synthetic > 0.
  std::string data;
  uint64_t synthetic = 0;  // sample count of the synthetic source

  std::string name = "batchcast";  // names the endpoint, lock and shared memory
  std::string endpoint;            // "" = ipc://<runtime dir>/<name>.sock
  std::string device = "cpu";      // "cpu" or "cuda:N"

  uint32_t batch_size = 64;  // producer batch (one ring slot)
  uint32_t window = 8;       // ring slots

  // Transforms (image sources).
  std::string transform = "train";  // train | eval
  int size = 224;
  std::string dtype = "float32";  // float32 | float16 | bfloat16 | uint8 (synthetic: uint8)
  std::string layout = "nchw";    // nchw | nhwc
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  std::string decode = "auto";    // auto | cpu | gpu
  std::string on_error = "skip";  // skip | fail
  uint64_t max_pixels = 178956970;

  // Order.
  uint64_t seed = 0;
  bool shuffle = true;
  uint64_t epochs = 0;  // 0 = no limit
  uint32_t shard_rank = 0;
  uint32_t num_shards = 1;
  int workers = 0;  // 0 = one per core

  // Consumers.
  LagPolicy lag_policy = LagPolicy::kBlock;
  std::chrono::milliseconds lag_timeout{1000};
  uint32_t min_consumers = 1;
  std::chrono::milliseconds heartbeat_interval{250};
  std::chrono::milliseconds heartbeat_timeout{2000};
  uint32_t max_leases = 16;   // unreleased batches one consumer may hold
  uint32_t max_consumers = 256;

  // Checks ranges and names; InvalidArgument naming the option otherwise.
  Status Validate() const;
};

}  // namespace batchcast
