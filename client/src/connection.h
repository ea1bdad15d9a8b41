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
#include "batchcast/core/host_shm.h"
#include "batchcast/core/protocol.h"
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

  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  bool hb_stop_ = false;
  std::thread hb_thread_;
};

}  // namespace batchcast
