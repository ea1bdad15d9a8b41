// Server::Impl: the wiring of a batchcast server: it makes the ring, the
// Scheduler, the ControlLoop, the SlotPublisher and (for Server::Start) the
// ProducerLoop, starts their threads, and stops them.
//
// Note [Server threads]
// thread      | entry point           | state it owns              | talks to the others through
// ------------+-----------------------+----------------------------+------------------------------
// control     | ControlLoop::Run      | the ROUTER socket, the     | Scheduler calls (one for each
//             | (control_loop.h)      | send buffer, heartbeat and | message; Tick every 100 ms)
//             |                       | tick timers, bad-message   | and its outbox; woken by its
//             |                       | counts                     | WakeFd (Scheduler::Commit and
//             |                       |                            | EndStream, RequestStop); ends
//             |                       |                            | the server with Impl::Finish
// producer    | ProducerLoop::Run     | the sampler's order, the   | Scheduler::BeginBatch (waits
// (Start)     | (producer_loop.h)     | read-ahead hint, the       | on its CondVar, signalled by
//             |                       | Source, the SlotPublisher  | releases, cursor moves, Tick,
//             |                       | (its stream and staging),  | Stop) and Commit; an error
//             |                       | the ring's attach socket   | ends the server
//             |                       | (attach_point.h)           | (Impl::Finish); WORK and DONE
//             |                       |                            | with an attached producer
// external    | Server::BeginBatch,   | the slot between Begin and | the same Scheduler calls; the
// producer    | CommitBatch,          | Commit; the SlotPublisher  | slot's event is recorded on
// (caller's)  | EndStream             | (one caller at a time)     | the caller's stream
// user        | Server::Stop, WaitFor | nothing                    | Impl::Finish; done_mu guards
// threads     | status, StatsJson     |                            | the outcome; Stop joins the
//             |                       |                            | threads under shutdown_mu
// metrics     | MetricsEndpoint       | its listening socket and   | ServerStats (each Scheduler's
// (--metrics- | (civetweb's threads:  | connections, the last      | lock while its part is read),
// port)       | metrics_endpoint.h)   | rendering                  | at most 10 times a second
//             |                       |                            | (Note [Metrics endpoint]);
//             |                       |                            | stopped first by Shutdown
// Shared state: the Scheduler (its own mutex, Note [Leases]); the outcome
// (done, final_status) under done_mu; everything else in Impl is set before
// the threads start and immutable afterwards. Locks are never nested across
// objects except shutdown_mu, taken before done_mu and before the Scheduler's.
// With several GPUs (Note [Rings per GPU], device_list.h) there is one
// producer thread per ring, each with its ring's device current for its whole
// life (so its kernels launch there), all feeding the one Scheduler (Note
// [Placement], scheduler.h), and one control thread for all.
// Shutdown: Finish marks the outcome, stops the Scheduler (BeginBatch fails
// with Cancelled) and the control loop (which tells every consumer); Shutdown
// then joins the threads. The members are destroyed in reverse order, so the
// control loop (which closes the socket) goes before the rings, and in each
// ring the publisher (which waits for the producer's stream) before the
// memory.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "attach_point.h"
#include "batchcast/core/field_spec.h"
#include "batchcast/server/server.h"
#include "control_loop.h"
#include "core/src/mutex.h"
#include "core/src/ring_layout.h"
#include "core/src/runtime_dir.h"
#include "epoch_orders.h"
#include "metrics_endpoint.h"
#include "mps_probe.h"
#include "producer_loop.h"
#include "ring_memory.h"
#include "scheduler.h"
#include "slot_publisher.h"

namespace batchcast {

struct Server::Impl {
  ~Impl() { Shutdown(); }

  // One ring per device (several with --device cuda:0,1: Note [Rings per
  // GPU], device_list.h), each with its memory, publisher and, for
  // Server::Start, its own source and producer thread. Members are
  // destroyed in reverse order: the producer, then the publisher (which
  // waits for the producer's stream), ..., the memory last.
  struct Ring {
    int device = -1;  // the ring's GPU, -1 for a host ring
    std::unique_ptr<RingMemory> memory;
    std::unique_ptr<Source> source;  // null for external production
    std::unique_ptr<SlotPublisher> publisher;
    // Note [Attached producers]: null for external production, --no-attach,
    // or when the socket could not be bound.
    std::unique_ptr<AttachPoint> attach;
    std::unique_ptr<ProducerLoop> producer;  // null for external production
  };

  // Takes the instance lock, makes a ring on each of `devices` (-1: host)
  // for `specs` (their memory kind set to the rings'), the Scheduler and
  // the control loop (bound, not running).
  // `group_epoch_len`: the smallest shard's epoch (SchedulerConfig);
  // `stream`: the stream's identity; `replay`: the built-in producer writes
  // what the Scheduler says (then the ring has options.resume_slots more
  // slots: Note [Resume]).
  Status Init(std::vector<FieldSpec> specs, uint64_t epoch_len, uint64_t group_epoch_len,
              const std::vector<int>& devices, const std::string& stream, bool replay,
              bool begin_ahead);
  // Makes each ring's publisher for `writer`, and its producer loop over
  // `sampler`'s epoch orders (shared by the rings) when Sources fill the
  // rings (rings[i].source set); then starts the threads.
  Status StartThreads(SlotWriter writer, std::optional<Sampler> sampler);
  // Ring `i`'s attach socket (Note [Attached producers]), or null when the
  // ring cannot have one (a warning says why).
  std::unique_ptr<AttachPoint> BindAttachPoint(size_t i);
  // Note [Shared listing]: the path of the dataset's scan, saved from
  // `source` by the first call (a producer thread answering an ATTACH), or
  // a later one that finds the file gone, and removed by Shutdown; "" when
  // the source lists no files or it could not be saved (then each attached
  // producer scans the dataset itself).
  std::string SharedListing(const Source& source) BC_EXCLUDES(listing_mu);
  // Records the outcome (the first call wins) and stops everything.
  void Finish(Status status) BC_EXCLUDES(done_mu);
  // Waits until Finish was called (true) or `deadline` passed (false;
  // max() = no deadline).
  bool WaitDone(Clock::time_point deadline) BC_EXCLUDES(done_mu);
  // Finish(OK) if not finished, then joins the threads. Idempotent.
  void Shutdown() BC_EXCLUDES(shutdown_mu, done_mu);
  Scheduler& scheduler() const { return *sched; }

  // Set before the threads start, immutable afterwards.
  ServerOptions options;
  std::optional<ServerOptions::ShardChoice> shard;  // Server::Start's sources
  std::optional<InstanceLock> lock;
  std::string endpoint;
  std::vector<FieldSpec> fields;
  std::optional<RingLayout> layout;
  // The server's one Scheduler (Note [Placement]) and, for Server::Start,
  // the sampler's orders its producers share; both outlive the rings.
  std::unique_ptr<Scheduler> sched;
  std::unique_ptr<EpochOrders> orders;
  std::vector<Ring> rings;  // at least one once Init succeeded
  std::unique_ptr<ControlLoop> control;
  std::optional<MpsState> mps;  // probed at start for a CUDA ring (mps_probe.h)
  // --metrics-port: started by StartThreads before the other threads;
  // Shutdown stops it (the object stays, for its url).
  std::unique_ptr<MetricsEndpoint> metrics;

  Mutex shutdown_mu BC_ACQUIRED_BEFORE(done_mu);
  std::thread control_thread BC_GUARDED_BY(shutdown_mu);
  std::vector<std::thread> producer_threads BC_GUARDED_BY(shutdown_mu);  // one per ring

  Mutex listing_mu;                                                   // a leaf
  std::optional<std::string> listing_path BC_GUARDED_BY(listing_mu);  // once saved or tried

  mutable Mutex done_mu;
  CondVar done_cv;  // with done_mu
  bool done BC_GUARDED_BY(done_mu) = false;
  Status final_status BC_GUARDED_BY(done_mu);
};

}  // namespace batchcast
