// What the consumer programs share (tests/e2e/bc_test_consumer.cc,
// benchmarks/gpu_consumer_bench.cc): the command-line options of their
// ConsumerOptions, and a connection that delivers on a CUDA stream of its own
// when the ring is on a GPU.
//
// Header-only: used by executables that link CLI11, batchcast::client and
// batchcast::cuda.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "batchcast/client/consumer.h"
#include "batchcast/core/join_policy.h"
#include "batchcast/core/status.h"
#include "batchcast/cuda/runtime.h"

namespace batchcast {

// --batch-size, --join, --prefetch, --timeout-ms, --no-drop-last, --key-file
// and the group (--group, --rank, --world-size; --no-group opts out of the
// launcher's), set in `options` (the values it holds now are the defaults).
inline void AddConsumerOptions(CLI::App* app, ConsumerOptions& options) {
  app->add_option("--batch-size", options.batch_size, "samples per batch")->capture_default_str();
  app->add_option("--prefetch", options.prefetch, "batch requests kept in flight")
      ->capture_default_str();
  app->add_option_function<std::string>(
         "--join", [&options](const std::string& text) { options.join = *ParseJoinPolicy(text); },
         "immediate or next_epoch [default: " + std::string(JoinPolicyName(options.join)) + "]")
      ->check(CLI::IsMember({"immediate", "next_epoch"}));
  app->add_option_function<int64_t>(
      "--timeout-ms", [&options](int64_t ms) { options.timeout = std::chrono::milliseconds(ms); },
      "limit on one batch (0: as long as the server is alive) [default: " +
          std::to_string(options.timeout.count()) + "]");
  app->add_flag_function(
      "--no-drop-last", [&options](int64_t) { options.drop_last = false; },
      "keep the last, incomplete batch of each epoch");
  app->add_option("--key-file", options.key_file, "tcp:// only: the server's key file");
  app->add_option_function<std::string>(
      "--group", [&options](const std::string& g) { options.group = g; },
      "consumer group (default: the launcher's, torchrun or SLURM)");
  app->add_flag_function(
      "--no-group", [&options](int64_t) { options.group = std::string(); },
      "read the whole stream even under torchrun or SLURM");
  app->add_option_function<uint32_t>(
      "--rank", [&options](uint32_t r) { options.rank = r; }, "rank in the group");
  app->add_option_function<uint32_t>(
      "--world-size", [&options](uint32_t w) { options.world_size = w; }, "ranks in the group");
}

// A consumer and, on a CUDA ring, the stream (on the ring's device) that its
// batches are delivered on. `stream` is destroyed after `consumer`.
struct OwnStreamConsumer {
  std::optional<cuda::Stream> stream;
  std::unique_ptr<Consumer> consumer;
  // The delivery stream: the legacy default one on a host ring.
  CudaStreamRef stream_ref() const { return stream ? stream->ref() : CudaStreamRef(); }
};

// Connects with `options`; on a CUDA ring then creates a stream on the ring's
// device and delivers on it (Consumer::set_cuda_stream).
inline Result<OwnStreamConsumer> ConnectOnOwnStream(const ConsumerOptions& options) {
  OwnStreamConsumer out;
  BATCHCAST_ASSIGN_OR_RETURN(out.consumer, Consumer::Connect(options));
  if (const Device d = out.consumer->device(); d.is_cuda()) {
    BATCHCAST_ASSIGN_OR_RETURN(cuda::Stream s, cuda::Stream::Create(d.index));
    out.stream.emplace(std::move(s));
    out.consumer->set_cuda_stream(out.stream->ref());
  }
  return out;
}

}  // namespace batchcast
