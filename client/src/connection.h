// Connection: the client side of one consumer's session with a server.
// Internal to batchcast::client.
//
// Owns the DEALER socket, the mapped ring, the reply queue and a heartbeat
// thread. It is shared (std::shared_ptr) by the Consumer handle and every
// batch state, so that the mapping and the lease bookkeeping outlive the
// Consumer while batches are alive (Note [Leases], server/src/scheduler.h).
//
// Note [Client socket ownership]
// ZeroMQ sockets are not thread-safe. The socket is used only under sock_mu_:
// by Next() (the user's thread, which also sends heartbeats and releases
// while it waits) and by the heartbeat thread, which only try_locks and so
// never delays Next(). Batch destruction on any thread only queues the lease
// id: the next NEXT carries it, or the heartbeat thread sends it within 10 ms.
//
// Note [Device leases]
// With a ring in CUDA memory a batch is "read" by GPU work the user queued,
// which may still be running when the Batch (or its last DLPack tensor) dies.
// So a device lease ends only after that work completes, without blocking
// anyone:
//  - MakeBatch makes the delivery stream (ConsumerOptions::cuda_stream)
//    wait on each segment's slot event (Note [Device ring ordering],
//    server/src/slot_publisher.h) before the user sees the batch. No host sync.
//  - Zero-copy batch: when it dies, an event is recorded on every stream the
//    batch was used on (the delivery stream, and any added by
//    Batch::RecordStream); the lease joins `pending_`.
//  - Gathered batch (several segments): the device-to-device copies into a
//    private buffer are queued on the delivery stream at once, an event is
//    recorded after them and the lease joins `pending_` right away; the
//    private buffer is freed stream-ordered when the batch dies.
//  - PollPendingLocked (from NEXT, the release flush and the heartbeat thread,
//    every 10 ms) queries the events (cudaEventQuery, never a wait); a lease
//    whose events all completed is released like a host lease.
//  - A pending lease counts as held (BYE keeps it), and the Connection's
//    destructor waits for the pending events before it releases them and
//    before the IPC mapping closes (Note [CUDA IPC lifetimes]).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>
#include <zmq.hpp>

#include "batchcast/client/batch.h"
#include "batchcast/client/consumer.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/core/host_shm.h"
#include "core/src/protocol.h"
#include "batchcast/core/ring_layout.h"

namespace batchcast {

namespace internal {
struct BatchState {
  std::shared_ptr<Connection> connection;  // null for end-of-epoch markers
  uint64_t lease_id = 0;                   // 0 = nothing to release
  bool end_of_epoch = false;
  uint32_t epoch = 0;
  uint32_t step = 0;
  uint64_t first_seq = 0;
  uint64_t skipped = 0;
  bool zero_copy = false;
  std::vector<Segment> segments;
  std::vector<int64_t> indices;
  std::vector<FieldView> fields;
  std::vector<uint8_t> gather;  // private copy when the batch spans slots
  // Device batches (Note [Device leases]).
  bool on_device = false;
  int cuda_device = -1;
  void* gather_device = nullptr;  // private device copy (stream-ordered allocation)
  std::mutex streams_mu;
  std::vector<CudaStreamRef> streams;  // delivery stream first, then those of RecordStream
  ~BatchState();
};
}  // namespace internal

class Connection {
 public:
  static Result<std::shared_ptr<Connection>> Open(const ConsumerOptions& options);
  ~Connection();

  Result<Batch> Next(const std::shared_ptr<Connection>& self);
  Result<std::string> Stats();
  // Queues a lease release; callable from any thread.
  void Release(uint64_t lease_id);
  // Releases `lease_id` once the work queued so far on `streams` has
  // completed (Note [Device leases]); callable from any thread. lease_id 0
  // only waits (nothing to release).
  void ReleaseAfter(uint64_t lease_id, const std::vector<CudaStreamRef>& streams);
  // Batch::RecordStream: makes `stream` wait for the data of `state`.
  Status RecordStream(internal::BatchState& state, CudaStreamRef stream);
  void set_cuda_stream(CudaStreamRef stream) { cuda_stream_.store(stream); }
  // Leaves the stream: releases prefetched batches and sends BYE.
  void Detach();

  const proto::Welcome& welcome() const { return welcome_; }

 private:
  explicit Connection(const ConsumerOptions& options);
  Status Handshake();
  Status MapRing();
  // All *Locked methods REQUIRE sock_mu_.
  void SendLocked(const proto::Message& m);
  void FlushReleasesLocked();
  // Receives every message ready now; returns false on a fatal state.
  void DrainLocked();
  void HandleLocked(proto::Message m);
  void KeepAliveLocked();
  void TopUpLocked();
  Result<Batch> MakeBatch(const std::shared_ptr<Connection>& self, proto::Batch b);
  void HeartbeatLoop();

  ConsumerOptions options_;
  std::string endpoint_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  int wake_fd_ = -1;
  proto::Welcome welcome_;
  std::optional<RingLayout> layout_;
  std::unique_ptr<HostSharedMemory> host_ring_;
  // CUDA ring (Note [CUDA IPC lifetimes]): the mapping, one event per slot.
  int cuda_device_ = -1;
  std::shared_ptr<cuda::IpcMapping> device_ring_;
  std::vector<cuda::Event> slot_events_;
  std::atomic<CudaStreamRef> cuda_stream_{CudaStreamRef()};
  bool server_pid_visible_ = false;

  std::mutex sock_mu_;  // Note [Client socket ownership]
  std::deque<proto::Message> replies_;
  uint64_t next_request_id_ = 1;
  size_t in_flight_ = 0;
  bool detached_ = false;
  Status fatal_;
  std::optional<std::string> stats_reply_;
  std::chrono::steady_clock::time_point last_heard_;
  std::chrono::steady_clock::time_point last_sent_;
  std::chrono::steady_clock::time_point last_pid_check_;
  std::string buffer_;

  std::mutex release_mu_;
  std::vector<uint64_t> releases_;
  std::unordered_set<uint64_t> held_;  // leases of zero-copy batches alive now
  // Device leases waiting for GPU work (Note [Device leases]), and spare events.
  struct PendingRelease {
    uint64_t lease_id = 0;
    std::vector<cuda::Event> events;
  };
  std::vector<PendingRelease> pending_;
  std::vector<cuda::Event> spare_events_;
  // REQUIRE release_mu_.
  Result<cuda::Event> TakeEventLocked();
  void PollPendingLocked();

  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  bool hb_stop_ = false;
  std::thread hb_thread_;
};

}  // namespace batchcast
