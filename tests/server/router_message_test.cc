// TakeRouterMessage: one ROUTER message as the server's sockets read it
// (the control loop's, an attach socket's): identity and payload, extra
// frames drained so that the next message starts clean.
#include "server/src/router_message.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <zmq.hpp>

namespace batchcast {
namespace {

// Waits for the next message on `router` (a few seconds at most).
std::optional<RouterMessage> Next(zmq::socket_t& router) {
  for (int i = 0; i < 2000; ++i) {
    if (std::optional<RouterMessage> m = TakeRouterMessage(router)) return m;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::nullopt;
}

TEST(RouterMessage, ExtraFramesAreDrainedAndFlagged) {
  zmq::context_t context(1);
  zmq::socket_t router(context, zmq::socket_type::router);
  router.bind("inproc://router-message-test");
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::routing_id, "peer-1");
  dealer.connect("inproc://router-message-test");
  EXPECT_FALSE(TakeRouterMessage(router)) << "nothing waiting";
  dealer.send(zmq::str_buffer("a"), zmq::send_flags::sndmore);
  dealer.send(zmq::str_buffer("b"), zmq::send_flags::sndmore);
  dealer.send(zmq::str_buffer("c"), zmq::send_flags::none);
  dealer.send(zmq::str_buffer("next"), zmq::send_flags::none);
  std::optional<RouterMessage> m = Next(router);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->peer(), "peer-1");
  EXPECT_TRUE(m->extra);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->bytes().data()), m->bytes().size()), "a");
  m = Next(router);
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->extra);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->bytes().data()), m->bytes().size()),
            "next");
  EXPECT_EQ(m->source_fd(), -1) << "inproc has no descriptor";
}

}  // namespace
}  // namespace batchcast
