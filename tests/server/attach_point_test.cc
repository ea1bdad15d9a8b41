// AttachPoint (Note [Attached producers], server/src/attach_point.h) against
// a holder played by the test over a DEALER socket: the handshake, a batch
// handed over and answered, a silent holder waited for (never written
// under) and named in the log, a DONE naming samples the slot does not
// hold, and the refusals.
#include "server/src/attach_point.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "../sources/log_capture.h"
#include "core/src/protocol.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;

std::string TestEndpoint() {
  static int n = 0;
  return "ipc:///tmp/bc-attach-test-" + std::to_string(getpid()) + "-" + std::to_string(n++) +
         ".sock";
}

// The test's side of the socket: a holder process.
class FakeHolder {
 public:
  explicit FakeHolder(const std::string& endpoint) : socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
  }
  void Send(const proto::Message& m) {
    const std::string bytes = proto::Encode(m);
    socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
  }
  // The next message within `wait`, polling `point` meanwhile (the
  // producer thread's part), or nullopt.
  std::optional<proto::Message> Receive(AttachPoint* point, std::chrono::milliseconds wait = 2s) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < deadline) {
      if (point != nullptr) point->Poll();
      zmq::message_t m;
      if (socket_.recv(m, zmq::recv_flags::dontwait)) {
        auto decoded = proto::Decode(
            std::span<const uint8_t>(static_cast<const uint8_t*>(m.data()), m.size()));
        EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
        if (decoded.ok()) return *decoded;
      }
      std::this_thread::sleep_for(5ms);
    }
    return std::nullopt;
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
};

std::unique_ptr<AttachPoint> Bind(const std::string& endpoint) {
  AttachPointOptions o;
  o.endpoint = endpoint;
  o.ring = 1;
  o.ring_name = "host ring 1";
  o.attached.window = 4;
  o.attached.batch_size = 4;
  o.attached.options = {"size=8"};
  o.work_timeout = 200ms;
  auto p = AttachPoint::Bind(std::move(o));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(*p) : nullptr;
}

// ATTACH -> ATTACHED, READY: attached.
void Attach(AttachPoint* point, FakeHolder& holder) {
  holder.Send(proto::Attach{1, static_cast<uint32_t>(getpid())});
  std::optional<proto::Message> m = holder.Receive(point);
  ASSERT_TRUE(m && std::holds_alternative<proto::Attached>(*m));
  EXPECT_EQ(std::get<proto::Attached>(*m).options, std::vector<std::string>{"size=8"});
  holder.Send(proto::Ready{});
  for (int i = 0; i < 200 && !point->attached(); ++i) {
    point->Poll();
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(point->attached());
  EXPECT_EQ(point->holder_pid(), static_cast<uint32_t>(getpid()));
}

// A bound attach point and a holder attached to it.
class AttachPointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(point);
    ASSERT_NO_FATAL_FAILURE(Attach(point.get(), holder));
  }
  const std::string endpoint = TestEndpoint();
  std::unique_ptr<AttachPoint> point = Bind(endpoint);
  FakeHolder holder{endpoint};
};

TEST_F(AttachPointTest, ASilentHolderIsWaitedForAndNamedNeverWrittenUnder) {
  testing::LogCapture log;
  std::vector<int64_t> indices = {5, 6, 7, 8};
  const SlotGrant grant{2, 100, 4, indices.data()};
  ReadAhead next;
  const std::vector<int64_t> ahead = {9, 10};
  next.indices = ahead;
  next.epoch = 3;
  Result<std::optional<uint32_t>> got = std::optional<uint32_t>();
  std::vector<int64_t> dropped = {42};  // cleared first
  std::thread producer([&] { got = point->Delegate(grant, 3, next, dropped); });
  std::optional<proto::Message> m = holder.Receive(nullptr);
  ASSERT_TRUE(m && std::holds_alternative<proto::Work>(*m));
  const proto::Work& work = std::get<proto::Work>(*m);
  EXPECT_EQ(work.slot, 2u);
  EXPECT_EQ(work.first_seq, 100u);
  EXPECT_EQ(work.epoch, 3u);
  EXPECT_EQ(work.indices, (std::vector<int64_t>{5, 6, 7, 8}));
  EXPECT_EQ(work.next, ahead);
  std::this_thread::sleep_for(500ms);        // more than two work_timeouts
  holder.Send(proto::Done{2, 99, {5}});      // another batch's: ignored
  holder.Send(proto::Done{2, 100, {5, 7}});  // 6 and 8 dropped
  producer.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value()) << "the live holder was waited for";
  EXPECT_EQ(**got, 2u);
  EXPECT_EQ(indices[0], 5);
  EXPECT_EQ(indices[1], 7);
  EXPECT_EQ(dropped, (std::vector<int64_t>{6, 8}));
  EXPECT_GE(log.Count("host ring 1: its attached producer (pid " + std::to_string(getpid()) +
                      ") has not answered a batch for"),
            2)
      << log.text();
  EXPECT_TRUE(point->attached());
  EXPECT_EQ(point->holder_batches(), 1u);
}

TEST_F(AttachPointTest, ADoneNamingOtherSamplesDetachesTheHolder) {
  std::vector<int64_t> indices = {5, 6};
  const SlotGrant grant{0, 8, 2, indices.data()};
  Result<std::optional<uint32_t>> got = std::optional<uint32_t>(7);
  std::vector<int64_t> dropped;
  std::thread producer([&] { got = point->Delegate(grant, 0, ReadAhead{}, dropped); });
  ASSERT_TRUE(holder.Receive(nullptr));
  holder.Send(proto::Done{0, 8, {6, 5}});  // out of the slot's order
  producer.join();
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value()) << "the caller writes the slot";
  EXPECT_FALSE(point->attached());
  EXPECT_EQ(point->detached_count(), 1u);
  std::optional<proto::Message> m = holder.Receive(nullptr);
  ASSERT_TRUE(m && std::holds_alternative<proto::Error>(*m));
  EXPECT_EQ(indices, (std::vector<int64_t>{5, 6})) << "the slot's indices are untouched";
}

TEST_F(AttachPointTest, RefusalsAndLeaving) {
  FakeHolder second(endpoint);
  second.Send(proto::Attach{1, 1});
  std::optional<proto::Message> m = second.Receive(point.get());
  ASSERT_TRUE(m && std::holds_alternative<proto::Error>(*m));
  EXPECT_EQ(std::get<proto::Error>(*m).code, StatusCode::kResourceExhausted);
  FakeHolder wrong(endpoint);
  wrong.Send(proto::Attach{0, 1});
  m = wrong.Receive(point.get());
  ASSERT_TRUE(m && std::holds_alternative<proto::Error>(*m));
  EXPECT_NE(std::get<proto::Error>(*m).message.find("not of ring 0"), std::string::npos);
  // BYE: answered, and the ring is free for the next.
  holder.Send(proto::Bye{});
  m = holder.Receive(point.get());
  ASSERT_TRUE(m && std::holds_alternative<proto::Bye>(*m));
  EXPECT_FALSE(point->attached());
  EXPECT_EQ(point->holder_pid(), 0u);
  ASSERT_NO_FATAL_FAILURE(Attach(point.get(), second));
  // Cancel: a Delegate returns Cancelled (the server stops).
  point->Cancel();
  std::vector<int64_t> indices = {1};
  std::vector<int64_t> dropped;
  EXPECT_EQ(
      point->Delegate(SlotGrant{0, 0, 1, indices.data()}, 0, ReadAhead{}, dropped).status().code(),
      StatusCode::kCancelled);
}

}  // namespace
}  // namespace batchcast
