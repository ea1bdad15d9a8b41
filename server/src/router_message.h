// RouterMessage: one message taken from a ZeroMQ ROUTER socket, as the
// server's sockets (the control loop's, each ring's attach socket) read
// them: the peer's identity frame and one payload frame.
//
// Thread-safety: a value; TakeRouterMessage uses the socket, which only its
// owning thread may.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <zmq.hpp>

namespace batchcast {

struct RouterMessage {
  zmq::message_t identity;
  zmq::message_t payload;  // empty when the peer sent the identity alone
  // The peer sent more frames than the protocol has (they were read and
  // dropped, so the next message starts clean).
  bool extra = false;

  std::string peer() const {
    return std::string(static_cast<const char*>(identity.data()), identity.size());
  }
  std::span<const uint8_t> bytes() const {
    return std::span<const uint8_t>(static_cast<const uint8_t*>(payload.data()), payload.size());
  }
  // The descriptor of the connection it came on (ZMQ_SRCFD: the payload's,
  // when one came, else the identity's), or -1.
  int source_fd() const;
};

// The next message waiting on `router`, without blocking; nullopt when none.
std::optional<RouterMessage> TakeRouterMessage(zmq::socket_t& router);

}  // namespace batchcast
