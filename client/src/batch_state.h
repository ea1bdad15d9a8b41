// BatchState: what a Batch, and every DLPack tensor made from it, shares: the
// batch's fields, the lease it still holds and the session that ends it.
// MakeBatch builds one from a BATCH reply. Internal to batchcast::client.
//
// Life of a data batch (Note [Client leases], lease_ledger.h):
//  - zero-copy (one segment, on the home ring): the fields view the ring; the lease is held
//    until the state dies, then ends after the GPU work queued on `streams`
//    (none on a host ring: at once).
//  - gathered (several segments, or one on another GPU's ring): the samples
//    are copied into private buffers on the home ring's device, one per ring
//    view, on the delivery stream; the lease ends as
//    soon as the copies completed (host: at once), and the buffers are freed
//    when the state dies, after the work queued on `streams`.
// Every data batch holds the session, so the ring's mapping and the ledger
// outlive the Consumer while batches are alive.
//
// Thread-safety: immutable once MakeBatch returns, except `streams`
// (streams_mu; Batch::RecordStream may run on any thread). The state may die
// on any thread.
#pragma once

#include <memory>
#include <vector>

#include "batchcast/client/batch.h"
#include "core/src/mutex.h"
#include "core/src/protocol.h"
#include "core/src/ring_layout.h"
#include "session.h"

namespace batchcast::internal {

struct BatchState {
  std::shared_ptr<Session> session;  // null for end-of-epoch markers
  uint64_t lease_id = 0;             // the lease this state still ends; 0 = none
  bool end_of_epoch = false;
  uint32_t epoch = 0;
  uint32_t step = 0;
  uint64_t first_seq = 0;
  uint64_t skipped = 0;
  bool zero_copy = false;
  std::vector<Segment> segments;
  std::vector<int64_t> indices;
  std::vector<FieldView> fields;
  // The private copies of a gathered batch, one per ring view it reads.
  struct Gathered {
    const RingView* view = nullptr;
    void* data = nullptr;
  };
  std::vector<Gathered> gathered;

  Mutex streams_mu;
  // Where the batch is used: the delivery stream first, then those of RecordStream.
  std::vector<CudaStreamRef> streams BC_GUARDED_BY(streams_mu);

  // Batch::RecordStream: `stream` waits for the batch's data and joins `streams`.
  Status RecordStream(CudaStreamRef stream) BC_EXCLUDES(streams_mu);
  // Frees `gathered` and ends `lease_id`, both after the work queued on `streams`.
  ~BatchState();
};

// The Batch of `reply` (a BATCH whose lease the session delivered), ready in
// the order of `stream`: the stream waits for the producer's writes, and a
// batch spanning slots is gathered. Internal when the server sent segments
// outside the ring; a CUDA error otherwise. On failure the lease still ends
// (after any copy already queued).
Result<Batch> MakeBatch(std::shared_ptr<Session> session, proto::Batch reply, CudaStreamRef stream);
// The end-of-epoch marker of `marker`.
Batch MakeEndOfEpoch(const proto::EndOfEpoch& marker);

}  // namespace batchcast::internal
