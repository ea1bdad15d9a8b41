#include "curve_client.h"

#include <zmq.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/src/curve_key.h"
#include "core/src/zmq_curve_ops.h"

namespace batchcast::internal {
namespace {

constexpr int kWatchedEvents =
    ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED |
    ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
    ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

std::string Hex(uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%x", value);
  return buf;
}

}  // namespace

Status CheckKeyFileUse(const std::string& endpoint, std::string_view key_file) {
  if (key_file.empty() || endpoint.starts_with("tcp://")) return Status::Ok();
  return InvalidArgumentError(
      "key_file is for tcp:// endpoints; ipc:// ones (and server names) are protected by the "
      "runtime directory, which only its user may enter");
}

Result<TransportWatch> TransportWatch::Secure(zmq::context_t& context, zmq::socket_t& socket,
                                              const std::string& endpoint,
                                              std::string_view key_file) {
  TransportWatch w;
  BATCHCAST_RETURN_IF_ERROR(CheckKeyFileUse(endpoint, key_file));
  if (!endpoint.starts_with("tcp://")) return w;
  const CurveOps ops = ZmqCurveOps();
  BATCHCAST_ASSIGN_OR_RETURN(KeyFile key, LoadKey(key_file, KeyUse::kConnect, ops));
  w.watched_ = &socket;
  w.endpoint_ = endpoint;
  w.key_path_ = key.path;
  // The server must hold the key (its public part is the server's), and the
  // key pair is this client's own, which the server's ZAP handler admits.
  socket.set(zmq::sockopt::curve_serverkey, key.key.public_key);
  socket.set(zmq::sockopt::curve_publickey, key.key.public_key);
  socket.set(zmq::sockopt::curve_secretkey, key.key.secret_key);
  const std::string address =
      "inproc://batchcast-watch-" + std::to_string(reinterpret_cast<uintptr_t>(socket.handle()));
  if (zmq_socket_monitor(socket.handle(), address.c_str(), kWatchedEvents) != 0) {
    return InternalError(std::string("cannot watch the connection: ") + zmq_strerror(zmq_errno()));
  }
  w.monitor_.emplace(context, zmq::socket_type::pair);
  w.monitor_->set(zmq::sockopt::linger, 0);
  w.monitor_->connect(address);
  return w;
}

TransportWatch::TransportWatch(TransportWatch&& other) noexcept
    : watched_(std::exchange(other.watched_, nullptr)),
      monitor_(std::move(other.monitor_)),
      endpoint_(std::move(other.endpoint_)),
      key_path_(std::move(other.key_path_)),
      connected_(other.connected_),
      secured_(other.secured_),
      unexplained_endings_(other.unexplained_endings_),
      reconnecting_(other.reconnecting_),
      failed_(std::move(other.failed_)) {
  other.monitor_.reset();
}

TransportWatch::~TransportWatch() {
  if (!monitor_) return;
  if (watched_ != nullptr) zmq_socket_monitor(watched_->handle(), nullptr, 0);
  monitor_->close();
}

Status TransportWatch::Failure(uint16_t event, uint32_t value) const {
  const std::string pass = " Pass the key file the server uses (key_file, --key-file or $" +
                           std::string(kKeyFileVariable) +
                           "; `batchcast-server key` on the server's machine names it).";
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      return PermissionDeniedError("the server at " + endpoint_ + " refused this consumer's key (" +
                                   key_path_ + ", ZAP status " + std::to_string(value) +
                                   "): it admits only holders of its own key file." + pass);
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
        return UnavailableError("the peer at " + endpoint_ +
                                " does not use CURVE security: it is not a batchcast server (or "
                                "one older than tcp:// security)");
      }
      return UnavailableError("the CURVE handshake with " + endpoint_ +
                              " failed (ZeroMQ protocol error " + Hex(value) + ")");
    case ZMQ_EVENT_CONNECT_RETRIED:
      return UnavailableError("nothing listens at " + endpoint_ +
                              " (the connection was refused or the host is unreachable); is the "
                              "server running there?");
    default:  // the server ended the handshake: it could not open our HELLO
      return PermissionDeniedError(
          "the server at " + endpoint_ + " ended the CURVE handshake: it does not hold the key " +
          key_path_ +
          " (it was started with another key file, by another user, or before "
          "`batchcast-server key --new`: restart it to use the new key; or what listens there "
          "is not a batchcast server)." +
          pass);
  }
}

Status TransportWatch::Check() {
  if (!monitor_ || secured_ || !failed_.ok()) return failed_;
  while (true) {
    zmq::message_t head, address;
    if (!monitor_->recv(head, zmq::recv_flags::dontwait)) return failed_;
    if (head.more()) (void)monitor_->recv(address, zmq::recv_flags::none);
    if (head.size() < 6) continue;
    uint16_t event = 0;
    uint32_t value = 0;
    std::memcpy(&event, head.data(), sizeof(event));
    std::memcpy(&value, static_cast<const char*>(head.data()) + 2, sizeof(value));
    switch (event) {
      case ZMQ_EVENT_CONNECTED:
        connected_ = true;
        break;
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        secured_ = true;
        return failed_;
      case ZMQ_EVENT_CONNECT_RETRIED:
        if (std::exchange(reconnecting_, false)) break;
        if (!connected_) failed_ = Failure(event, value);
        break;
      case ZMQ_EVENT_DISCONNECTED:  // after a failure event, or a server that went away
        connected_ = false;
        reconnecting_ = true;
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        // A server killed mid-handshake looks the same as one refusing the
        // key: ZeroMQ reconnects, and the next attempt tells them apart.
        if (++unexplained_endings_ >= 2) failed_ = Failure(event, value);
        break;
      default:
        failed_ = Failure(event, value);
        break;
    }
    if (!failed_.ok()) return failed_;
  }
}

Status TransportWatch::CheckConnection() {
  if (!monitor_ || !failed_.ok()) return failed_;
  while (true) {
    zmq::message_t head, address;
    if (!monitor_->recv(head, zmq::recv_flags::dontwait)) return Status::Ok();
    if (head.more()) (void)monitor_->recv(address, zmq::recv_flags::none);
    if (head.size() < 6) continue;
    uint16_t event = 0;
    std::memcpy(&event, head.data(), sizeof(event));
    if (event == ZMQ_EVENT_DISCONNECTED) {
      failed_ = UnavailableError("the server at " + endpoint_ +
                                 " closed the connection: it stopped or was killed");
      return failed_;
    }
  }
}

}  // namespace batchcast::internal
