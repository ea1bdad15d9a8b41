// CurveServer: a tcp:// server's side of Note [Transport security]
// (core/src/curve_key.h). Its ROUTER is a CURVE server with the key's secret
// part, and a ZAP handler (ZeroMQ's authentication protocol, RFC 27) bound in
// the same ZeroMQ context admits a connection only when the client proved
// that it holds the key: its CURVE public key is the key's own. Every other
// client is refused during the handshake, before any message of it reaches
// the control loop. A socket monitor on the ROUTER sees every failed
// handshake: a peer without CURVE (plain ZeroMQ), one that expects another
// server key (it holds another key file), one the ZAP handler refused. They
// are counted (stats: refused_connections) and logged, at most 10 lines a
// second.
//
// Note [Handshake limits]
// Any local user (and, with --allow-remote, any machine) can open tcp://
// connections, key or not; each holds one of the server's descriptors until
// its handshake ends. So a connection must complete its handshake within
// kHandshakeMs, and at most `max_pending` connections may be *pending*:
// accepted (the monitor's ACCEPTED event names the descriptor) and not yet
// heard from (a message arrived from that descriptor: ZeroMQ's ZMQ_SRCFD).
// Beyond that the oldest pending connection is shut down (shutdown(2): ZeroMQ
// then closes it as if the peer had left); a real client's handshake takes
// milliseconds and its ZeroMQ socket reconnects by itself if it was cut. So
// keyless peers cannot exhaust the descriptors the server needs for its
// dataset (open-file limit: open_file_limit.h) nor keep its threads busy
// with them. Cut connections are counted (stats: `handshakes_cut`).
//
// Thread-safety: the control thread alone uses it (it polls zap_handle()
// and monitor_handle()), except refused(), which any thread may read.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <zmq.hpp>

#include "batchcast/core/status.h"
#include "core/src/curve_key.h"

namespace batchcast {

class CurveServer {
 public:
  // Binds the ZAP handler in `context` and makes `router` (not bound yet) a
  // CURVE server with `key` that asks it. `context` must outlive the result.
  // At most `max_pending` connections may be pending (Note [Handshake
  // limits]).
  static Result<std::unique_ptr<CurveServer>> Attach(zmq::context_t& context, zmq::socket_t& router,
                                                     const CurveKeyPair& key,
                                                     size_t max_pending = 256);

  // The ZAP socket and the monitor's, for zmq_poll (ZMQ_POLLIN).
  void* zap_handle() { return zap_.handle(); }
  void* monitor_handle() { return monitor_.handle(); }
  // Answers every waiting ZAP request and reads the monitor's events,
  // without blocking.
  void HandleRequests();
  // Handshakes that failed so far (peers without the key). Thread-safe.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  // Connections cut because too many were pending (Note [Handshake
  // limits]). Thread-safe.
  uint64_t cut() const { return cut_.load(std::memory_order_relaxed); }
  // A message arrived on the connection of descriptor `fd` (the identity
  // frame's ZMQ_SRCFD): its handshake is done.
  void Heard(int fd) { pending_.erase(fd); }
  size_t pending() const { return pending_.size(); }

 private:
  CurveServer(zmq::context_t& context, std::string allowed, size_t max_pending);
  // Answers one request (its frames).
  void Answer(const std::vector<zmq::message_t>& request);
  // Counts (and logs) the failed handshakes the monitor reported and keeps
  // the pending connections (Note [Handshake limits]).
  void ReadMonitor();
  // Cuts the oldest pending connections beyond max_pending.
  void CutPending();

  zmq::socket_t zap_;
  zmq::socket_t monitor_;      // PAIR: the ROUTER's handshake failures
  const std::string allowed_;  // the key's public part, 32 bytes
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> cut_{0};
  const size_t max_pending_;
  // Note [Handshake limits]: descriptor -> when accepted (in order).
  std::map<int, uint64_t> pending_;
  uint64_t accepted_ = 0;  // accept count, for the order of pending_
};

// The server's key (core's LoadKey for KeyUse::kServe, with ZeroMQ's CURVE).
Result<KeyFile> LoadServerKey(std::string_view key_file);

}  // namespace batchcast
