// ProducerLoop: the producer thread of one ring when Sources fill the rings
// (one per ring, each with its own Source decoding on its ring's device: Note
// [Rings per GPU], device_list.h). It asks the Scheduler what its ring writes
// next (BeginWork: the shared stream's next batch when it is placed on this
// ring, Note [Placement], waiting while the window is full, Note [Leases];
// or a batch of the resume lane, Note [Resume]), reads the batch's dataset
// indices from the shared epoch orders, has the SlotPublisher say where the
// samples go, calls Source::FillBatch with a read-ahead hint (its ring's
// next batch, across epoch ends too), and publishes the slot with the
// samples the source wrote (a dropped file leaves a hole: Note [Holes],
// slot_table.h; every producer epoch still spans epoch_len seqs). After the
// shared stream's last batch (--epochs) it ends the stream and goes on
// serving the lane. An epoch in which every sample was dropped stops the
// producer with DataLoss: a stream of empty epochs is an error, never a
// success. With an AttachPoint, a process attached to the ring fills its
// slots instead, while it is there (Note [Attached producers],
// attach_point.h).
//
// Thread-safety: Run is the entry point of one thread and owns everything it
// touches except the Scheduler and the EpochOrders (thread-safe) and the
// Source (used by this thread only; its counters() are read by the control
// thread for stats).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attach_point.h"
#include "batchcast/core/status.h"
#include "batchcast/sources/source.h"
#include "epoch_orders.h"
#include "scheduler.h"
#include "slot_publisher.h"

namespace batchcast {

class ProducerLoop {
 public:
  // The producer of ring `ring`. Every pointer must outlive the loop;
  // `attach` may be null (no process may take the ring over).
  ProducerLoop(EpochOrders* orders, uint32_t ring, Source* source, Scheduler* scheduler,
               SlotPublisher* publisher, uint32_t batch_size, AttachPoint* attach = nullptr);

  // Runs until Scheduler::Stop (Cancelled) or until a step failed (that
  // error; the caller stops the server with it).
  Status Run();

 private:
  // The read-ahead hint: the samples of the producer batch from seq `next`
  // (across an epoch end). `keep` holds the order the hint points into.
  ReadAhead NextSamples(uint64_t next, std::shared_ptr<const std::vector<int64_t>>& keep);
  // Writes and publishes `work`; how many samples the source wrote.
  Result<uint32_t> WriteBatch(const Scheduler::Work& work);

  EpochOrders* const orders_;
  const uint32_t ring_;
  Source* const source_;
  Scheduler* const scheduler_;
  SlotPublisher* const publisher_;
  const uint32_t batch_size_;
  AttachPoint* const attach_;
  // The samples of a delegated slot that the holder dropped.
  std::vector<int64_t> dropped_;
};

}  // namespace batchcast
