// ProducerLoop: the server's producer thread when a Source fills the ring:
// walks the sampler's order epoch by epoch, cuts it into producer batches,
// asks the Scheduler for a slot for each (waiting while the window is full,
// Note [Leases]), has the SlotPublisher say where the samples go, calls
// Source::FillBatch with a read-ahead hint (the next batch's samples, across
// epoch ends too), and publishes the slot with the samples the source wrote
// (a dropped file leaves a hole: Note [Holes], slot_table.h; every producer
// epoch still spans epoch_len seqs). After the last epoch (--epochs) it ends
// the stream. An epoch in which every sample was dropped stops the producer
// with DataLoss: a stream of empty epochs is an error, never a success.
//
// Thread-safety: Run is the entry point of one thread and owns everything it
// touches except the Scheduler (thread-safe) and the Source (used by this
// thread only; its counters() are read by the control thread for stats).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/sources/source.h"
#include "core/src/sampler.h"
#include "scheduler.h"
#include "slot_publisher.h"

namespace batchcast {

class ProducerLoop {
 public:
  // `epochs` = 0: no end. Every pointer must outlive the loop.
  ProducerLoop(Sampler sampler, Source* source, Scheduler* scheduler, SlotPublisher* publisher,
               uint32_t batch_size, uint64_t epochs);

  // Runs until the stream's last batch is published and the stream ended
  // (OK), until Scheduler::Stop (Cancelled), or until a step failed (that
  // error; the caller stops the server with it).
  Status Run();

 private:
  // The order of producer epoch `epoch`; one computed ahead is reused.
  std::vector<int64_t> TakeOrder(uint64_t epoch);
  // The samples after those at [off, off + n) of `order` (epoch `epoch`).
  ReadAhead NextSamples(const std::vector<int64_t>& order, uint64_t epoch, uint64_t off, size_t n);
  // Writes and publishes one batch; how many samples the source wrote.
  Result<uint32_t> WriteBatch(uint32_t epoch, std::span<const int64_t> indices,
                              const ReadAhead& next);

  const Sampler sampler_;
  Source* const source_;
  Scheduler* const scheduler_;
  SlotPublisher* const publisher_;
  const uint32_t batch_size_;
  const uint64_t epochs_;
  std::vector<int64_t> next_order_;  // the order of the next epoch, once computed
};

}  // namespace batchcast
