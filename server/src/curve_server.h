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
// Thread-safety: the control thread alone uses it (it polls zap_handle()
// and monitor_handle()), except refused(), which any thread may read.
#pragma once

#include <atomic>
#include <cstdint>
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
  static Result<std::unique_ptr<CurveServer>> Attach(zmq::context_t& context, zmq::socket_t& router,
                                                     const CurveKeyPair& key);

  // The ZAP socket and the monitor's, for zmq_poll (ZMQ_POLLIN).
  void* zap_handle() { return zap_.handle(); }
  void* monitor_handle() { return monitor_.handle(); }
  // Answers every waiting ZAP request and reads the monitor's events,
  // without blocking.
  void HandleRequests();
  // Handshakes that failed so far (peers without the key). Thread-safe.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  CurveServer(zmq::context_t& context, std::string allowed);
  // Answers one request (its frames).
  void Answer(const std::vector<zmq::message_t>& request);
  // Counts (and logs) the failed handshakes the monitor reported.
  void ReadMonitor();

  zmq::socket_t zap_;
  zmq::socket_t monitor_;      // PAIR: the ROUTER's handshake failures
  const std::string allowed_;  // the key's public part, 32 bytes
  std::atomic<uint64_t> refused_{0};
};

// The server's key (core's LoadKey for KeyUse::kServe, with ZeroMQ's CURVE).
Result<KeyFile> LoadServerKey(std::string_view key_file);

}  // namespace batchcast
