#include <zmq.hpp>

#include "batchcast/client/consumer.h"
#include "core/src/catch_all.h"
#include "core/src/protocol.h"
#include "core/src/runtime_dir.h"
#include "server_probe.h"

namespace batchcast {
namespace {

Result<std::string> Query(const std::string& endpoint_or_name, std::chrono::milliseconds timeout) {
  BATCHCAST_ASSIGN_OR_RETURN(std::string endpoint, ResolveEndpoint(endpoint_or_name));
  BATCHCAST_RETURN_IF_ERROR(internal::CheckLocalServer(endpoint, endpoint_or_name));
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
    if (!socket.recv(msg, zmq::recv_flags::dontwait)) {
      BATCHCAST_RETURN_IF_ERROR(internal::CheckLocalServer(endpoint, endpoint_or_name));
      continue;
    }
    Result<proto::Message> m = proto::Decode({static_cast<const uint8_t*>(msg.data()), msg.size()});
    if (!m.ok()) return m.status();
    if (auto* r = std::get_if<proto::StatsReply>(&*m)) return std::move(r->json);
    if (auto* e = std::get_if<proto::Error>(&*m)) return proto::ToStatus(*e);
  }
  return UnavailableError("server at " + endpoint + " did not answer within " +
                          std::to_string(timeout.count()) + " ms");
}

}  // namespace

Result<std::string> QueryStats(const std::string& endpoint_or_name,
                               std::chrono::milliseconds timeout) {
  return CatchAll("QueryStats", [&] { return Query(endpoint_or_name, timeout); });
}

}  // namespace batchcast
