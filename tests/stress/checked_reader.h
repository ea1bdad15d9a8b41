// ReadChecked: a consumer loop that checks everything it is given, shared by
// the stress programs' consumers (the chaos and soak consumer processes, the
// fuzzer's good consumer thread).
//
// Every batch of the synthetic source is checked byte for byte against its
// formula (core/src/synthetic.h, both fields) and its position against the
// sampler (EpochChecker); each event is reported through a Reporter
// (report.h). Optionally every n-th zero-copy batch is held for a while (its
// lease pins its slot meanwhile; one held batch at a time) and checked again
// when dropped, so a slot rewritten under a held lease is caught.
//
// Thread-safety: one call per Consumer at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "batchcast/client/consumer.h"
#include "epoch_checker.h"
#include "report.h"

namespace batchcast::stress {

struct CheckedReadOptions {
  uint64_t dataset_size = 0;  // of the server's synthetic source
  SamplerOptions sampler;     // the server's seed, shuffle, shard
  int64_t max_batches = -1;   // stop (OK) after this many; -1: no limit
  uint32_t hold_every = 0;    // hold every n-th zero-copy batch (0: never)
  std::chrono::milliseconds hold_for{0};
  const std::atomic<bool>* stop = nullptr;  // stop (OK) when it becomes true
};

// Reads batches of `consumer` (connected with `consumer_options`) until
// Next() fails (its status is returned, after Reporter::Lost), max_batches
// were read or *stop is set (OK). Violations are reported, never returned.
Status ReadChecked(Consumer& consumer, const ConsumerOptions& consumer_options,
                   const CheckedReadOptions& options, Reporter& reporter);

}  // namespace batchcast::stress
