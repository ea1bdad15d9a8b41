// Endpoints: the ZeroMQ addresses a server binds and consumers connect to.
//
//   ipc://PATH       a Unix socket (PATH at most 107 bytes, the kernel's limit)
//   tcp://HOST:PORT  PORT in 1..65535; a server may bind port 0 or * (any free
//                    port: the port it got is what Server::endpoint() reports)
//
// inproc:// is refused: such an endpoint is reachable only from sockets of
// the same ZeroMQ context, and every batchcast server and consumer has its
// own, so nobody could ever connect.
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast {

enum class EndpointUse {
  kBind,     // a server's endpoint (tcp port 0 or * allowed)
  kConnect,  // a consumer's (a real port)
};

// InvalidArgument saying what is wrong with `endpoint` (which must hold "://").
Status ValidateEndpoint(std::string_view endpoint, EndpointUse use);

}  // namespace batchcast
