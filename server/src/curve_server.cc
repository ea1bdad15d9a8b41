#include "curve_server.h"

#include <sys/socket.h>
#include <zmq.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <vector>
#include <zmq_addon.hpp>

#include "core/src/escape.h"
#include "core/src/logging.h"
#include "core/src/zmq_curve_ops.h"

namespace batchcast {
namespace {

// Where libzmq sends the ZAP requests of the sockets of a context (RFC 27).
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
// How long a peer may take to complete the CURVE handshake (libzmq's default
// is 30 s): a connection that never finishes it is closed after this (Note
// [Handshake limits]).
constexpr int kHandshakeMs = 2000;
// Requests answered (and events read) per call, so that a flood cannot hold
// the control loop.
constexpr int kMaxRequestsPerCall = 256;
constexpr int kFailureEvents = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
// Events read per call: a flood of connections makes several per connection.
constexpr int kMaxEventsPerCall = 4096;

// The ZAP request frames (RFC 27): version, request id, domain, address,
// routing id, mechanism, credentials (CURVE: the client's 32-byte public key).
enum Frame : size_t { kVersion, kRequestId, kDomain, kAddress, kRoutingId, kMechanism, kKey };

std::string Text(const zmq::message_t& m) { return std::string(m.to_string_view()); }

}  // namespace

// Why a handshake failed, from the monitor's event and value.
std::string FailureReason(uint16_t event, uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) return "its CURVE key is not this server's";
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
    if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
      return "it does not use CURVE (a ZeroMQ peer without a key)";
    }
    if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) {
      return "it expects another server key (it holds another key file)";
    }
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%x", value);
    return std::string("ZeroMQ protocol error ") + hex;
  }
  return "it left during the handshake";
}

CurveServer::CurveServer(zmq::context_t& context, std::string allowed, size_t max_pending)
    : zap_(context, zmq::socket_type::rep),
      monitor_(context, zmq::socket_type::pair),
      allowed_(std::move(allowed)),
      max_pending_(std::max<size_t>(1, max_pending)) {}

Result<std::unique_ptr<CurveServer>> CurveServer::Attach(zmq::context_t& context,
                                                         zmq::socket_t& router,
                                                         const CurveKeyPair& key,
                                                         size_t max_pending) {
  std::array<uint8_t, 32> binary{};
  if (!IsZ85Key(key.public_key) ||
      zmq_z85_decode(binary.data(), key.public_key.c_str()) == nullptr) {
    return InvalidArgumentError("the server's CURVE public key is not Z85 text");
  }
  std::unique_ptr<CurveServer> s(new CurveServer(
      context, std::string(reinterpret_cast<const char*>(binary.data()), 32), max_pending));
  try {
    s->zap_.set(zmq::sockopt::linger, 0);
    s->zap_.bind(kZapEndpoint);
    const std::string monitor = "inproc://batchcast-handshakes";
    if (zmq_socket_monitor(router.handle(), monitor.c_str(),
                           kFailureEvents | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0) {
      throw zmq::error_t();
    }
    s->monitor_.set(zmq::sockopt::linger, 0);
    s->monitor_.connect(monitor);
    router.set(zmq::sockopt::curve_server, 1);
    router.set(zmq::sockopt::curve_secretkey, key.secret_key);
    router.set(zmq::sockopt::zap_domain, "batchcast");
    router.set(zmq::sockopt::handshake_ivl, kHandshakeMs);
  } catch (const zmq::error_t& e) {
    return UnavailableError(std::string("cannot set up CURVE security: ") + e.what());
  }
  return s;
}

void CurveServer::Answer(const std::vector<zmq::message_t>& request) {
  const bool well_formed = request.size() > kKey && request[kVersion].to_string_view() == "1.0";
  const bool admitted = well_formed && request[kMechanism].to_string_view() == "CURVE" &&
                        request[kKey].to_string_view() == allowed_;
  const std::string request_id = request.size() > kRequestId ? Text(request[kRequestId]) : "";
  std::array<zmq::const_buffer, 6> reply = {
      zmq::str_buffer("1.0"),
      zmq::buffer(request_id),
      admitted ? zmq::str_buffer("200") : zmq::str_buffer("400"),
      admitted ? zmq::str_buffer("OK") : zmq::str_buffer("not this server's key"),
      zmq::str_buffer(""),
      zmq::str_buffer("")};
  (void)zmq::send_multipart(zap_, reply, zmq::send_flags::dontwait);
  if (!admitted) {  // counted by ReadMonitor (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    const std::string address =
        request.size() > kAddress ? EscapeText(Text(request[kAddress]), 64) : "?";
    BC_LOG_WARN_LIMITED(
        "refused a tcp:// connection from {}: its CURVE key is not this server's (a client "
        "with a key pair of its own)",
        address);
  }
}

void CurveServer::ReadMonitor() {
  for (int i = 0; i < kMaxEventsPerCall; ++i) {
    std::vector<zmq::message_t> event;
    if (!zmq::recv_multipart(monitor_, std::back_inserter(event), zmq::recv_flags::dontwait)) {
      return;
    }
    if (event.empty() || event[0].size() < 6) continue;
    uint16_t id = 0;
    uint32_t value = 0;
    std::memcpy(&id, event[0].data(), sizeof(id));
    std::memcpy(&value, static_cast<const char*>(event[0].data()) + 2, sizeof(value));
    if (id == ZMQ_EVENT_ACCEPTED) {  // the value is the connection's descriptor
      pending_[static_cast<int>(value)] = accepted_++;
      continue;
    }
    if (id == ZMQ_EVENT_DISCONNECTED) {
      pending_.erase(static_cast<int>(value));
      continue;
    }
    if ((id & kFailureEvents) == 0) continue;
    refused_.fetch_add(1, std::memory_order_relaxed);
    // The ZAP handler already said why it refused (with the peer's address).
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) continue;
    BC_LOG_WARN_LIMITED("refused a tcp:// connection: {}", FailureReason(id, value));
  }
}

void CurveServer::CutPending() {
  while (pending_.size() > max_pending_) {
    auto oldest =
        std::min_element(pending_.begin(), pending_.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    // ZeroMQ owns the descriptor: shutdown (not close) makes it see the peer
    // leave and close it itself (Note [Handshake limits]).
    (void)shutdown(oldest->first, SHUT_RDWR);
    pending_.erase(oldest);
    cut_.fetch_add(1, std::memory_order_relaxed);
    BC_LOG_WARN_LIMITED(
        "closed a tcp:// connection still in its handshake: more than {} were pending (a peer "
        "opening connections without completing them)",
        max_pending_);
  }
}

void CurveServer::HandleRequests() {
  for (int i = 0; i < kMaxRequestsPerCall; ++i) {
    std::vector<zmq::message_t> request;
    if (!zmq::recv_multipart(zap_, std::back_inserter(request), zmq::recv_flags::dontwait)) break;
    Answer(request);
  }
  ReadMonitor();
  CutPending();
}

Result<KeyFile> LoadServerKey(std::string_view key_file) {
  const CurveOps ops = ZmqCurveOps();
  return LoadKey(key_file, KeyUse::kServe, ops);
}

}  // namespace batchcast
