// TransportWatch: a consumer's side of Note [Transport security]
// (core/src/curve_key.h), used by the session and QueryStats.
//
// For a tcp:// endpoint, Secure() makes the DEALER a CURVE client with the
// key (ConsumerOptions::key_file, else $BATCHCAST_KEY_FILE, else the user's
// key): the key's public part is the server's expected key and the pair is
// the client's own. It then watches the connection (a ZeroMQ socket monitor)
// until its handshake succeeds, so that a connection that cannot succeed
// fails at once, with the reason, instead of after connect_timeout:
//   - the server refused the key (ZAP): PermissionDenied;
//   - the server ended the handshake (it holds another key: another key
//     file, a rotated key, another user's server): PermissionDenied;
//   - the peer does not use CURVE (not a batchcast server, or an old one):
//     Unavailable;
//   - nothing listens there (the TCP connection was refused): Unavailable.
// For ipc:// it does nothing (the runtime directory protects those).
//
// Thread-safety: one thread uses it, together with the socket it watches
// (the session's socket lock). The socket must outlive it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <zmq.hpp>

#include "batchcast/core/status.h"

namespace batchcast::internal {

// InvalidArgument for a key_file with an endpoint that is not tcp:// (the
// runtime directory protects ipc:// ones); checked before anything else.
Status CheckKeyFileUse(const std::string& endpoint, std::string_view key_file);

class TransportWatch {
 public:
  // Call before socket.connect(endpoint). CheckKeyFileUse's and LoadKey's
  // errors (core/src/curve_key.h).
  static Result<TransportWatch> Secure(zmq::context_t& context, zmq::socket_t& socket,
                                       const std::string& endpoint, std::string_view key_file);
  TransportWatch(TransportWatch&& other) noexcept;
  TransportWatch& operator=(TransportWatch&&) = delete;
  ~TransportWatch();  // stops watching

  // OK while the connection may still come up, or is up; otherwise why it
  // cannot (see above). Never blocks.
  Status Check();
  // After the handshake: Unavailable once the connection is lost (the
  // server's process ended or closed it: over tcp:// the close is seen at
  // once, long before a heartbeat timeout). Never blocks.
  Status CheckConnection();
  // The monitor's socket, to poll beside the watched one (nullptr for ipc://).
  void* monitor_handle() { return monitor_ ? monitor_->handle() : nullptr; }

 private:
  TransportWatch() = default;
  Status Failure(uint16_t event, uint32_t value) const;

  zmq::socket_t* watched_ = nullptr;
  std::optional<zmq::socket_t> monitor_;  // the monitor's PAIR socket (tcp:// only)
  std::string endpoint_;
  std::string key_path_;
  bool connected_ = false;  // a TCP connection was made
  bool secured_ = false;    // the handshake succeeded: nothing more to watch
  // Handshakes ended without a reason: a server refusing the key, or one
  // killed mid-handshake (then the reconnection finds nothing listening, or
  // its restart). Only a second one in a row is taken as a refusal.
  int unexplained_endings_ = 0;
  // A connection ended: the next CONNECT_RETRIED only schedules the
  // reconnection (it is not a refused connection).
  bool reconnecting_ = false;
  Status failed_;
};

}  // namespace batchcast::internal
