// ControlLoop: the server's control thread. It owns the ZeroMQ ROUTER socket
// and everything said on it: it decodes each consumer message and hands it to
// the Scheduler (HELLO -> WELCOME or ERROR, NEXT, RELEASE, HEARTBEAT, BYE,
// STATS), sends what the Scheduler queued in its outbox, heartbeats every
// consumer, calls Scheduler::Tick every 100 ms (liveness, lag policy, the
// hoarding answer), notices when the server is finished, and on the way out
// tells every consumer that the server stopped. See Note [Server threads]
// (server_impl.h). What one peer may cost the others is bounded by a
// PeerGuard (Note [Peer limits], peer_guard.h); names from peers are escaped
// before they are shown (core/src/escape.h); an exception escaping the loop
// ends the server with an Internal error instead of the process. On tcp://
// only holders of the server's key get through the handshake (Note
// [Transport security], core/src/curve_key.h; curve_server.h).
//
// Thread-safety: Run is the entry point of one thread, which alone uses the
// socket and the fields marked so. RequestStop may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "batchcast/core/status.h"
#include "core/src/curve_key.h"
#include "core/src/mutex.h"
#include "core/src/protocol.h"
#include "curve_server.h"
#include "peer_guard.h"
#include "scheduler.h"

namespace batchcast {

// An eventfd that wakes the control loop's zmq_poll. Thread-safe.
class WakeFd {
 public:
  WakeFd();
  ~WakeFd();
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void Signal() const;
  void Drain() const;

 private:
  const int fd_;
};

struct ControlLoopOptions {
  std::string endpoint;  // where the ROUTER binds (ipc:// or tcp://)
  // tcp:// endpoints: the server's key (Note [Transport security]); required.
  std::optional<KeyFile> curve_key;
  std::string server_name;  // for logs and the shutdown notice
  std::chrono::milliseconds heartbeat_period{250};
  PeerGuardLimits peer_limits;
  Scheduler* scheduler = nullptr;  // the server's (must outlive the loop)
  // WELCOME as every consumer gets it: every ring of the server (at least
  // one; several with --device cuda:0,1: Note [Rings per GPU],
  // device_list.h); consumer_id, batches_per_epoch and home_ring (the ring of
  // the device its HELLO names, RingForConsumer) are filled in per consumer.
  proto::Welcome welcome;
  // The server's stats as JSON text (STATS).
  std::function<std::string()> stats_json;
  // Called on the control thread when it ends the server: OK when the stream
  // ended and every consumer left, an error when polling failed.
  std::function<void(Status)> finish;
};

class ControlLoop {
 public:
  // Binds the ROUTER socket (replacing a socket file a dead server left,
  // Note [Server instance lock]) and makes the schedulers' wake-ups reach
  // it. Unavailable when the endpoint cannot be bound, or when another
  // server listens on its ipc:// path.
  static Result<std::unique_ptr<ControlLoop>> Create(ControlLoopOptions options);
  // Closes the socket and removes its ipc:// file. REQUIRES: Run returned
  // (or never ran).
  ~ControlLoop();

  // The thread's entry point: serves until RequestStop or until the server
  // is finished, then tells every consumer it stopped.
  void Run();
  // Makes Run return soon; every consumer is then told that the server
  // stopped (Unavailable), with `why` when it is an error (the producer's
  // failure, say), so that each sees the reason; DataLoss keeps its code.
  // Thread-safe.
  void RequestStop(Status why = Status::Ok()) BC_EXCLUDES(stop_mu_);
  // The endpoint bound: as given, except that a tcp:// port 0 or * reads as
  // the port the system picked. Fixed once Create returned.
  const std::string& endpoint() const { return endpoint_; }
  // tcp:// connections refused for their key so far. Thread-safe.
  uint64_t refused_connections() const { return curve_ ? curve_->refused() : 0; }
  // tcp:// connections cut in their handshake (Note [Handshake limits]).
  uint64_t handshakes_cut() const { return curve_ ? curve_->cut() : 0; }

 private:
  explicit ControlLoop(ControlLoopOptions options);
  // Removes consumer `identity` (if it is one).
  void Remove(const std::string& identity, const std::string& reason);
  // Reads and handles up to a bounded number of waiting messages.
  void ReceiveAll();
  // The loop itself (Run catches what escapes it).
  void Serve();
  void HandleMessage(const std::string& identity, std::span<const uint8_t> payload);
  // Note [Admission] (peer_guard.h): admits the HELLO now, or keeps it
  // waiting, or refuses it.
  void HandleHello(const std::string& identity, proto::Hello hello);
  // Admits the waiting HELLOs whose turn it is.
  void AdmitWaiting();
  // Asks the Scheduler and answers (WELCOME or ERROR);
  // false when the server is full of unconfirmed consumers (it must wait).
  bool Admit(const std::string& identity, const proto::Hello& hello);
  void HandleStats(const std::string& identity);
  // Removes a consumer the PeerGuard gave up on and tells it why.
  void Drop(const std::string& identity, const std::string& reason);
  // Sends one message; a peer that is gone or not reading is removed.
  void SendTo(const std::string& identity, const proto::Message& message);
  void FlushOutbox();
  // Heartbeats and Scheduler::Tick when due.
  void RunTimers();

  const ControlLoopOptions options_;
  std::string endpoint_;  // fixed once Create returned
  WakeFd wake_;
  std::atomic<bool> stopping_{false};
  Mutex stop_mu_;
  Status stop_reason_ BC_GUARDED_BY(stop_mu_);  // RequestStop's `why`

  // Control thread only.
  zmq::context_t context_{1};
  std::optional<zmq::socket_t> router_;
  std::unique_ptr<CurveServer> curve_;  // tcp:// only; fixed once Create returned
  std::string send_buffer_;
  std::vector<Outgoing> outbox_;
  PeerGuard guard_;
  std::unordered_map<std::string, proto::Hello> waiting_hellos_;  // Note [Admission]
  std::string stats_cache_;  // the last rendering of the stats (Note [Peer limits])
  Clock::time_point next_heartbeat_;
  Clock::time_point next_tick_;
};

}  // namespace batchcast
