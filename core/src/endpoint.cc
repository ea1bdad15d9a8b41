#include "core/src/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <charconv>
#include <string>

namespace batchcast {
namespace {

Status Bad(std::string_view endpoint, std::string_view why) {
  return InvalidArgumentError("endpoint '" + std::string(endpoint) + "': " + std::string(why));
}

}  // namespace

std::string IpcPath(std::string_view endpoint) {
  return endpoint.starts_with("ipc://") ? std::string(endpoint.substr(6)) : std::string();
}

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

bool IsLoopbackTcp(std::string_view endpoint) {
  if (!endpoint.starts_with("tcp://")) return false;
  std::string_view host = endpoint.substr(6);
  host = host.substr(0, host.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "lo") return true;
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

std::string BindAddress(std::string_view endpoint) {
  constexpr std::string_view kLocalhost = "tcp://localhost:";
  if (endpoint.starts_with(kLocalhost)) {
    return "tcp://127.0.0.1:" + std::string(endpoint.substr(kLocalhost.size()));
  }
  return std::string(endpoint);
}

}  // namespace batchcast
