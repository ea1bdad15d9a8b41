// Session: one consumer's conversation with a server. Internal to
// batchcast::client.
//
// Owns the DEALER socket, the handshake (HELLO -> WELCOME), the message pump,
// heartbeats and the server's liveness (its pid, its silence), the queue of
// NEXT requests and their replies (kept `prefetch` deep), the mapped ring
// (ring_view.h) and the lease ledger (lease_ledger.h). It is shared
// (std::shared_ptr) by the Consumer handle and every live Batch, so that the
// mapping and the leases outlive the Consumer while batches are alive (Note
// [Leases], server/src/scheduler.h; Note [Client leases], lease_ledger.h).
//
// Note [Client socket ownership]
// ZeroMQ sockets are not thread-safe. The socket is used only under sock_mu_:
// by NextReply(), Stats() and Detach() (the user's thread, which also sends
// heartbeats and queued releases while it waits, every slice of at most half
// a heartbeat interval) and by the flush thread, which wakes every 10 ms
// (kReleaseFlush) and only try-locks, so it never delays Next(). Batch
// destruction on any thread only records the lease's end in the ledger
// (under lease_mu_): the next NEXT carries it, or the flush thread sends it
// within 10 ms when no NEXT is being waited for, or the waiting NEXT's next
// slice does.
// Lock order: sock_mu_ before lease_mu_ (before the CUDA event pool's leaf
// lock, cuda_ring_view.cc). flush_mu_ guards only the flush thread's stop flag
// and is never held with another lock.
//
// Failure: once the server is gone (pid vanished, silent for
// heartbeat_timeout, told us it stops, evicted us) or the socket failed, the
// session is fatal: every later NextReply()/Stats() returns that Status.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "batchcast/client/consumer.h"
#include "core/src/mutex.h"
#include "core/src/protocol.h"
#include "curve_client.h"
#include "lease_ledger.h"
#include "ring_view.h"

namespace batchcast::internal {

class Session {
 public:
  // Connects to options.endpoint, says HELLO, waits for WELCOME (up to
  // options.connect_timeout) and maps the ring. NotFound when no server
  // socket exists there, Unavailable when it does not answer or, on this
  // machine, is not running (told at once: server_probe.h), the server's
  // refusal (InvalidArgument, ...) or the mapping's error otherwise.
  static Result<std::shared_ptr<Session>> Open(const ConsumerOptions& options);
  // Waits for the GPU work of pending device leases (Note [Device leases]),
  // sends their releases and, unless Detach() ran, BYE; then unmaps the ring.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The next reply to a NEXT: a proto::Batch (its lease is now delivered,
  // Note [Client leases]), a proto::EndOfEpoch or a proto::Error. Keeps
  // `prefetch` requests in flight and the session alive while it waits.
  // Errors: Cancelled after Detach(), DeadlineExceeded after
  // options.timeout, the fatal Status (Unavailable, ...) otherwise.
  // One caller at a time (Consumer::Next).
  Result<proto::Message> NextReply() BC_EXCLUDES(sock_mu_, lease_mu_);
  // The server's stats (JSON text); waits up to 5 s.
  Result<std::string> Stats() BC_EXCLUDES(sock_mu_, lease_mu_);
  // Note [Resume]: RESUME, before the first NEXT; the server's refusal, or
  // InvalidArgument after a NEXT was sent. Waits up to connect_timeout.
  Status Resume(const ConsumerPosition& place) BC_EXCLUDES(sock_mu_, lease_mu_);
  // Leaves the stream: releases what was only prefetched and sends BYE
  // naming the leases the user still holds (they stay until released).
  void Detach() BC_EXCLUDES(sock_mu_, lease_mu_);

  // Ends a lease now / after `tokens` (Note [Client leases]); any thread.
  void Release(uint64_t lease_id) BC_EXCLUDES(lease_mu_);
  void ReleaseAfter(uint64_t lease_id, CompletionTokens tokens) BC_EXCLUDES(lease_mu_);

  // Fixed once Open() returned.
  const proto::Welcome& welcome() const { return welcome_; }
  const std::optional<GroupMembership>& group() const { return group_; }
  const MappedRing& ring() const { return *ring_; }

 private:
  explicit Session(const ConsumerOptions& options);
  Status Handshake() BC_EXCLUDES(sock_mu_);
  // Sends RESUME and waits for its answer.
  Status ResumeLocked(const ConsumerPosition& place) BC_REQUIRES(sock_mu_);

  void Send(const proto::Message& m) BC_REQUIRES(sock_mu_);
  // Waits up to `timeout` for the socket to be readable (EINTR is a wake-up).
  void Poll(std::chrono::milliseconds timeout) BC_REQUIRES(sock_mu_);
  // Receives and handles every message ready now.
  void Drain() BC_REQUIRES(sock_mu_);
  void Handle(proto::Message m) BC_REQUIRES(sock_mu_);
  // Queued releases, a heartbeat when due, the server's liveness.
  void KeepAlive() BC_REQUIRES(sock_mu_);
  // Sends NEXTs (carrying the queued releases) up to `prefetch` in flight.
  void TopUp() BC_REQUIRES(sock_mu_);
  void FlushReleases() BC_REQUIRES(sock_mu_);
  std::vector<uint64_t> TakeReleases() BC_REQUIRES(sock_mu_) BC_EXCLUDES(lease_mu_);
  // The flush thread (Note [Client socket ownership]); an exception never
  // escapes it: one from the socket work makes the session fatal.
  void FlushLoop() BC_EXCLUDES(flush_mu_, sock_mu_, lease_mu_);
  void KeepAliveOrFail() BC_REQUIRES(sock_mu_);

  // Fixed once Open() returned.
  ConsumerOptions options_;
  std::string endpoint_;
  std::string hello_device_;  // HELLO's device: "cuda:M" or "" (ConsumerOptions::device)
  proto::Welcome welcome_;
  std::optional<GroupMembership> group_;  // ResolveGroup(options_)
  std::optional<MappedRing> ring_;
  bool server_pid_visible_ = false;

  zmq::context_t context_{1};
  Mutex sock_mu_ BC_ACQUIRED_BEFORE(lease_mu_);
  zmq::socket_t socket_ BC_GUARDED_BY(sock_mu_);
  // tcp://: the connection's watch (Note [Transport security]); it also
  // notices a lost connection at once.
  std::optional<TransportWatch> watch_ BC_GUARDED_BY(sock_mu_);
  std::string buffer_ BC_GUARDED_BY(sock_mu_);  // encoding scratch
  std::deque<proto::Message> replies_ BC_GUARDED_BY(sock_mu_);
  uint64_t next_request_id_ BC_GUARDED_BY(sock_mu_) = 1;
  size_t in_flight_ BC_GUARDED_BY(sock_mu_) = 0;  // NEXTs not answered yet
  bool detached_ BC_GUARDED_BY(sock_mu_) = false;
  Status fatal_ BC_GUARDED_BY(sock_mu_);
  std::optional<std::string> stats_reply_ BC_GUARDED_BY(sock_mu_);
  Status stats_error_ BC_GUARDED_BY(sock_mu_);                   // a STATS the server refused
  std::optional<Status> resume_answer_ BC_GUARDED_BY(sock_mu_);  // RESUMED, or its refusal
  std::chrono::steady_clock::time_point last_heard_ BC_GUARDED_BY(sock_mu_);
  std::chrono::steady_clock::time_point last_sent_ BC_GUARDED_BY(sock_mu_);
  std::chrono::steady_clock::time_point last_pid_check_ BC_GUARDED_BY(sock_mu_);

  Mutex lease_mu_;
  LeaseLedger ledger_ BC_GUARDED_BY(lease_mu_);

  Mutex flush_mu_;
  CondVar flush_cv_;  // with flush_mu_
  bool flush_stop_ BC_GUARDED_BY(flush_mu_) = false;
  std::thread flush_thread_;
};

}  // namespace batchcast::internal
