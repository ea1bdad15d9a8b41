#include <unistd.h>

#include <filesystem>
#include <zmq.hpp>

#include "batchcast/client/consumer.h"
#include "core/src/runtime_dir.h"
#include "core/src/protocol.h"

namespace batchcast {

Result<std::string> QueryStats(const std::string& endpoint_or_name,
                               std::chrono::milliseconds timeout) {
  BATCHCAST_ASSIGN_OR_RETURN(std::string endpoint, ResolveEndpoint(endpoint_or_name));
  if (endpoint.starts_with("ipc://") && !std::filesystem::exists(endpoint.substr(6))) {
    return NotFoundError("no batchcast server named '" + endpoint_or_name + "' (no socket at " +
                         endpoint.substr(6) + ")");
  }
  zmq::context_t context(1);
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  socket.connect(endpoint);
  const std::string request = proto::Encode(proto::Stats{});
  if (!socket.send(zmq::buffer(request), zmq::send_flags::dontwait)) {
    return UnavailableError("cannot send to " + endpoint);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    zmq::message_t msg;
    if (!socket.recv(msg, zmq::recv_flags::dontwait)) continue;
    Result<proto::Message> m = proto::Decode({static_cast<const uint8_t*>(msg.data()), msg.size()});
    if (!m.ok()) return m.status();
    if (auto* r = std::get_if<proto::StatsReply>(&*m)) return std::move(r->json);
    if (auto* e = std::get_if<proto::Error>(&*m)) return proto::ToStatus(*e);
  }
  return UnavailableError("server at " + endpoint + " did not answer within " +
                          std::to_string(timeout.count()) + " ms");
}

}  // namespace batchcast
