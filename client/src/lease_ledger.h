// LeaseLedger: every lease this consumer holds, from the BATCH that brought it
// to the message that gives it back. Internal to batchcast::client.
//
// Note [Client leases]
// The server leases a slot to a consumer from the BATCH that names it until
// the consumer releases it (Note [Leases], server/src/scheduler.h). On the
// client a lease goes through these states, all kept here:
//
//   prefetched --Deliver--> held --Release---------------------> queued --Take--> (sent)
//        |                    |                                     ^
//        |                    +--ReleaseAfter(tokens)--> pending ---+ (once every token is done)
//        +--Detach / Release-------------------------------------->-+
//
//  - prefetched: the BATCH arrived and waits in the session's reply queue.
//  - held: delivered to the user as a zero-copy batch (it views the ring).
//  - pending: the batch is gone but GPU work that reads it may still run
//    (Note [Device leases]); it counts as held.
//  - queued: to be sent with the next NEXT, or by the session's flush within
//    10 ms (Note [Client socket ownership], session.h); Take hands each
//    queued lease out once.
// A gathered batch (several segments) is released (or made pending) at
// delivery: its data is a private copy. BYE (Detach) keeps what is held or
// pending and releases what was only prefetched; a BATCH that arrives after
// Detach is queued for release at once (nobody will read it). Release and
// ReleaseAfter of a lease that is neither prefetched nor held (already
// pending, queued or sent, or never seen) do nothing, so a double release is
// harmless and never cuts a pending lease short. Lease id 0 means "no
// lease" and is ignored everywhere.
//
// Note [Device leases]
// With a ring in CUDA memory a batch is "read" by GPU work the user queued,
// which may still be running when the Batch (or its last DLPack tensor) dies.
// So a device lease ends only after that work completes, without blocking
// anyone:
//  - Delivery makes the delivery stream (ConsumerOptions::cuda_stream) wait
//    on each segment's slot event (Note [Device ring ordering],
//    server/src/server.cc) before the user sees the batch. No host sync
//    (CudaRingView::OrderAfterProducer, cuda_ring_view.cc).
//  - Zero-copy batch: when it dies, an event is recorded on every stream the
//    batch was used on (the delivery stream, and any added by
//    Batch::RecordStream) and the lease becomes pending on those events
//    (RingView::TokensAfter, ~BatchState in batch.cc).
//  - Gathered batch: the device-to-device copies into a private buffer are
//    queued on the delivery stream at once, an event is recorded after them
//    and the lease becomes pending right away; the private buffer is freed
//    stream-ordered when the batch dies (RingView::FreeGather).
//  - Take (from NEXT, the release flush and the heartbeat thread, every
//    10 ms) polls the tokens (cudaEventQuery, never a wait); a lease whose
//    tokens are all done is queued like a host lease.
//  - A pending lease counts as held (BYE keeps it), and the session's
//    destructor waits for the pending tokens (WaitForPending) before it
//    releases them and before the IPC mapping closes (Note [CUDA IPC
//    lifetimes], cuda/src/runtime.cc).
// A host lease has no tokens: ReleaseAfter with none is Release.
// The events, the gather buffer and the legacy default stream are all the
// ring's device's, whatever the consumer's current device (Note [Consumers on
// another GPU], cuda_ring_view.cc); an event cannot be recorded on a stream
// of another device, so a stream of another GPU given to RecordStream is
// waited for on the host instead (warned once).
//
// Thread-safety: none; the session guards its ledger with a mutex
// (Session::lease_mu_). No ZeroMQ and no CUDA here: the GPU is reached only
// through CompletionToken, so the rules are unit-tested with fake tokens
// (tests/client/lease_ledger_test.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace batchcast::internal {

// "Has the work queued before this token was made completed?" A CUDA event
// recorded on a stream (cuda_ring_view.cc); fakes in tests.
class CompletionToken {
 public:
  virtual ~CompletionToken() = default;
  // Polls without blocking. True when the work completed, and also when it
  // can never complete (an error: the context is gone), so a lease never
  // stays pending forever.
  virtual bool Done() = 0;
  // Blocks until Done() (the session's destructor only).
  virtual void Wait() = 0;
};

using CompletionTokens = std::vector<std::unique_ptr<CompletionToken>>;

class LeaseLedger {
 public:
  // A BATCH with lease `id` arrived and waits to be delivered. After Detach
  // the lease is queued for release at once.
  void Arrive(uint64_t id);
  // The batch of prefetched lease `id` was handed to the user: held until
  // Release or ReleaseAfter.
  void Deliver(uint64_t id);
  // Ends a prefetched or held lease: queued for the next message.
  void Release(uint64_t id);
  // Ends a prefetched or held lease once every token is done (pending until
  // then; counts as held). With no tokens, the same as Release.
  void ReleaseAfter(uint64_t id, CompletionTokens tokens);
  // Leaves the stream: prefetched leases are queued for release, and so is
  // every lease that arrives later. Held and pending leases stay.
  void Detach();

  // Polls the pending leases (never blocks), then returns every queued lease,
  // each once, and forgets them.
  std::vector<uint64_t> Take();
  // The leases the user may still read: held and pending (for BYE), sorted.
  std::vector<uint64_t> Held() const;
  // Blocks until every pending lease's tokens are done (the next Take then
  // queues them). For the session's destructor.
  void WaitForPending();

  bool detached() const { return detached_; }
  size_t pending() const { return pending_; }

 private:
  enum class State { kPrefetched, kHeld, kPending };
  struct Lease {
    State state = State::kPrefetched;
    CompletionTokens tokens;  // kPending only
  };
  // Queues a lease for release and forgets it.
  void Queue(uint64_t id);
  void PollPending();

  std::unordered_map<uint64_t, Lease> live_;  // prefetched, held and pending leases
  std::vector<uint64_t> queued_;
  size_t pending_ = 0;  // leases of live_ in kPending
  bool detached_ = false;
};

}  // namespace batchcast::internal
