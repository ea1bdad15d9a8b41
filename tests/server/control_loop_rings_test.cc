// The control loop of a server with a ring per GPU (Note [Rings per GPU],
// server/src/device_list.h), over a real socket but without GPUs: one
// Scheduler for every ring; a HELLO's home ring is the ring of the device it
// names (or the first), its WELCOME lists every ring and names its home.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <thread>
#include <zmq.hpp>

#include "core/src/protocol.h"
#include "server/src/control_loop.h"

namespace batchcast {
namespace {

class ControlLoopRings : public ::testing::Test {
 protected:
  void SetUp() override {
    SchedulerConfig sc;
    sc.epoch_len = 1000;
    sc.rings = 2;
    scheduler_ = std::make_unique<Scheduler>(sc);
    ControlLoopOptions co;
    endpoint_ = "ipc:///tmp/bc-rings-test-" + std::to_string(getpid()) + ".sock";
    co.endpoint = endpoint_;
    co.server_name = "rings";
    co.stats_json = [] { return std::string("{}"); };
    co.finish = [](Status) {};
    co.scheduler = scheduler_.get();
    co.welcome.window = 8;
    co.welcome.producer_batch_size = 64;
    co.welcome.epoch_len = 1000;
    for (int i = 0; i < 2; ++i) {
      proto::Allocation a;
      a.kind = MemoryKind::kCuda;
      a.device_index = i;
      co.welcome.rings.push_back(proto::RingInfo{i, {a}});
    }
    auto loop = ControlLoop::Create(std::move(co));
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
    thread_ = std::thread([this] { loop_->Run(); });
  }
  void TearDown() override {
    if (loop_) loop_->RequestStop();
    if (thread_.joinable()) thread_.join();
    loop_.reset();
  }

  // Says HELLO naming `device` on a new connection; returns the answer.
  proto::Message Hello(const std::string& device) {
    sockets_.emplace_back(ctx_, zmq::socket_type::dealer);
    zmq::socket_t& s = sockets_.back();
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 5000);
    s.connect(endpoint_);
    proto::Hello h;
    h.name = "c";
    h.pid = static_cast<uint32_t>(getpid());
    h.batch_size = 16;
    h.device = device;
    const std::string frame = proto::Encode(h);
    s.send(zmq::buffer(frame));
    while (true) {
      zmq::message_t m;
      if (!s.recv(m)) return proto::Error{0, StatusCode::kDeadlineExceeded, "no answer"};
      auto decoded =
          proto::Decode({static_cast<const uint8_t*>(m.data()), static_cast<size_t>(m.size())});
      if (!decoded.ok()) return proto::Error{0, StatusCode::kInternal, "undecodable"};
      if (std::holds_alternative<proto::Heartbeat>(*decoded)) continue;
      return *decoded;
    }
  }

  std::unique_ptr<Scheduler> scheduler_;
  std::string endpoint_;
  std::unique_ptr<ControlLoop> loop_;
  std::thread thread_;
  zmq::context_t ctx_;
  std::deque<zmq::socket_t> sockets_;
};

TEST_F(ControlLoopRings, EachHelloGetsEveryRingAndItsHome) {
  std::vector<uint64_t> ids;
  // (device named, home ring expected)
  for (const auto& [device, ring] : std::vector<std::pair<std::string, uint32_t>>{
           {"cuda:1", 1}, {"", 0}, {"cuda:0", 0}, {"cpu", 0}, {"cuda:7", 0}, {"cuda:1", 1}}) {
    proto::Message m = Hello(device);
    auto* w = std::get_if<proto::Welcome>(&m);
    ASSERT_NE(w, nullptr) << device << ": " << proto::MessageName(m);
    ASSERT_EQ(w->rings.size(), 2u);
    EXPECT_EQ(w->rings[1].device, 1);
    EXPECT_EQ(w->home_ring, ring) << device;
    ids.push_back(w->consumer_id);
  }
  // One Scheduler: the counts are the server's.
  EXPECT_EQ(scheduler_->Identities().size(), 6u);
  const nlohmann::json rings = scheduler_->Stats()["rings"];
  ASSERT_EQ(rings.size(), 2u);
  EXPECT_EQ(rings[0]["consumers"], 4);
  EXPECT_EQ(rings[1]["consumers"], 2);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end()) << "consumer ids repeat";
  // A BYE removes the consumer from the server.
  zmq::socket_t& first = sockets_.front();
  const std::string bye = proto::Encode(proto::Bye{});
  first.send(zmq::buffer(bye));
  for (int i = 0; i < 200 && scheduler_->Identities().size() != 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(scheduler_->Identities().size(), 5u);
}

// A HELLO naming `device` is refused with InvalidArgument saying `why`.
void ExpectRefused(const proto::Message& m, const std::string& why) {
  auto* e = std::get_if<proto::Error>(&m);
  ASSERT_NE(e, nullptr) << proto::MessageName(m);
  EXPECT_EQ(e->code, StatusCode::kInvalidArgument);
  EXPECT_NE(e->message.find(why), std::string::npos) << e->message;
}

TEST_F(ControlLoopRings, AHostRingNameNeedsAHostRing) {
  ExpectRefused(Hello("cpu:1"), "host ring");
}

TEST_F(ControlLoopRings, AHelloNamingNoDeviceIsRefused) {
  ExpectRefused(Hello("tpu:0"), "not cpu or cuda:N");
}

}  // namespace
}  // namespace batchcast
