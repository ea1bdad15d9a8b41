#include "core/src/endpoint.h"

#include <sys/un.h>

#include <charconv>
#include <string>

namespace batchcast {
namespace {

Status Bad(std::string_view endpoint, std::string_view why) {
  return InvalidArgumentError("endpoint '" + std::string(endpoint) + "': " + std::string(why));
}

}  // namespace

Status ValidateEndpoint(std::string_view endpoint, EndpointUse use) {
  if (endpoint.starts_with("ipc://")) {
    const std::string_view path = endpoint.substr(6);
    if (path.empty()) return Bad(endpoint, "no socket path after ipc://");
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return Bad(endpoint, "the socket path is " + std::to_string(path.size()) +
                               " bytes long; Unix sockets allow at most " +
                               std::to_string(sizeof(sockaddr_un{}.sun_path) - 1));
    }
    return Status::Ok();
  }
  if (endpoint.starts_with("tcp://")) {
    const std::string_view address = endpoint.substr(6);
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Bad(endpoint, "expected tcp://HOST:PORT");
    }
    const std::string_view port = address.substr(colon + 1);
    const bool any = port == "*" || port == "0";
    if (any) {
      if (use == EndpointUse::kBind) return Status::Ok();
      return Bad(endpoint, "a consumer needs the server's actual port (port " + std::string(port) +
                               " means any free port, only for a server)");
    }
    unsigned value = 0;
    const char* end = port.data() + port.size();
    auto [p, ec] = std::from_chars(port.data(), end, value);
    if (port.empty() || ec != std::errc() || p != end || value < 1 || value > 65535) {
      return Bad(
          endpoint,
          "the port must be a number in 1..65535" +
              std::string(use == EndpointUse::kBind ? " (or 0 or * for any free port)" : "") +
              ", got '" + std::string(port) + "'");
    }
    return Status::Ok();
  }
  if (endpoint.starts_with("inproc://")) {
    return Bad(endpoint,
               "inproc:// is reachable only inside one ZeroMQ context, and every batchcast server "
               "and consumer has its own, so nobody could connect; use ipc://PATH or "
               "tcp://127.0.0.1:PORT");
  }
  return InvalidArgumentError("unsupported endpoint '" + std::string(endpoint) +
                              "' (expected ipc://PATH, tcp://HOST:PORT or a server name)");
}

}  // namespace batchcast
