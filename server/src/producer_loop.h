// ProducerLoop: the server's producer thread when a Source fills the ring:
// asks the Scheduler what to write next (Scheduler::BeginWork: the shared
// stream's next producer batch, waiting while the window is full (Note
// [Leases]), or a batch of the resume lane, Note [Resume]), takes its
// samples from the sampler's order of that seq's producer epoch, has the
// SlotPublisher say where they go, calls Source::FillBatch with a read-ahead
// hint (the following batch's samples, across epoch ends too), and
// publishes the slot with the samples the source wrote (a dropped file
// leaves a hole: Note [Holes], slot_table.h; every producer epoch still
// spans epoch_len seqs). After the shared stream's last batch (--epochs) it
// ends the stream and goes on serving the lane. A whole epoch in which every
// sample was dropped stops the producer with DataLoss: a stream of empty
// epochs is an error, never a success.
//
// Thread-safety: Run is the entry point of one thread and owns everything it
// touches except the Scheduler (thread-safe) and the Source (used by this
// thread only; its counters() are read by the control thread for stats).
#pragma once

#include <cstdint>
#include <map>
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

  // Runs until Scheduler::Stop (Cancelled) or until a step failed (that
  // error; the caller stops the server with it).
  Status Run();

 private:
  // The order of producer epoch `epoch`, kept for a few epochs (the shared
  // stream's and the lane's may differ). The reference lives until the
  // next call with another epoch at least.
  const std::vector<int64_t>& Order(uint64_t epoch);
  // The producer batch after the one of seqs [first, end), as a hint.
  ReadAhead NextSamples(uint64_t end);
  // Writes and publishes `work`'s batch; how many samples the source wrote.
  Result<uint32_t> WriteBatch(const Scheduler::Work& work);
  // DataLoss when the shared stream's batch `work` ends a whole epoch whose
  // every sample was dropped; counts its `valid` samples.
  Status CountSharedBatch(const Scheduler::Work& work, uint32_t valid);

  const Sampler sampler_;
  Source* const source_;
  Scheduler* const scheduler_;
  SlotPublisher* const publisher_;
  const uint32_t batch_size_;
  const uint64_t stream_end_;                        // epochs x epoch_len, or UINT64_MAX
  std::map<uint64_t, std::vector<int64_t>> orders_;  // by producer epoch, at most kOrders
  // The shared stream's current epoch: its samples written so far, and
  // whether it was written from its first batch on.
  uint64_t shared_epoch_ = UINT64_MAX;
  uint64_t shared_written_ = 0;
  bool shared_whole_ = false;
};

}  // namespace batchcast
