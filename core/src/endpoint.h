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
// A tcp:// server binds 127.0.0.1 (or another loopback address) unless told
// otherwise (ServerOptions::allow_remote); every tcp:// connection uses CURVE
// (Note [Transport security], core/src/curve_key.h).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast {

enum class EndpointUse {
  kBind,     // a server's endpoint (tcp port 0 or * allowed)
  kConnect,  // a consumer's (a real port)
};

// InvalidArgument saying what is wrong with `endpoint` (which must hold "://").
Status ValidateEndpoint(std::string_view endpoint, EndpointUse use);

// The socket file of "ipc://PATH" (PATH); "" for every other scheme.
std::string IpcPath(std::string_view endpoint);

// True for "tcp://HOST:PORT" whose HOST is a loopback address (127.0.0.0/8,
// ::1, IPv4-mapped 127.x), "localhost" or the interface "lo": only this
// machine can connect there. False for "*", 0.0.0.0 and every other address,
// host or interface name, and for other schemes.
bool IsLoopbackTcp(std::string_view endpoint);

// What a server binds for `endpoint`: ZeroMQ binds interface names and
// addresses, not host names, so "tcp://localhost:P" becomes
// "tcp://127.0.0.1:P"; every other endpoint is returned as it is.
std::string BindAddress(std::string_view endpoint);

}  // namespace batchcast
