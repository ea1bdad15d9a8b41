#include "router_message.h"

namespace batchcast {

int RouterMessage::source_fd() const {
  int fd =
      payload.size() > 0 ? zmq_msg_get(const_cast<zmq_msg_t*>(payload.handle()), ZMQ_SRCFD) : -1;
  if (fd < 0) fd = zmq_msg_get(const_cast<zmq_msg_t*>(identity.handle()), ZMQ_SRCFD);
  return fd;
}

std::optional<RouterMessage> TakeRouterMessage(zmq::socket_t& router) {
  RouterMessage m;
  if (!router.recv(m.identity, zmq::recv_flags::dontwait)) return std::nullopt;
  if (m.identity.more()) {
    (void)router.recv(m.payload, zmq::recv_flags::none);
    while (m.payload.more()) {  // more frames than the protocol has: drain them
      zmq::message_t rest;
      (void)router.recv(rest, zmq::recv_flags::none);
      m.extra = true;
      if (!rest.more()) break;
    }
  }
  return m;
}

}  // namespace batchcast
