// End-to-end tests of attached producers (Note [Attached producers],
// server/src/attach_point.h) on host rings standing in for GPUs: a process
// holding a ring fills its slots with what the server would have written
// (every byte checked against the synthetic formula), and the server takes
// the ring back, without losing or repeating a sample, when the holder stops
// or is killed mid-stream.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/server/attached_producer.h"
#include "core/src/endpoint.h"
#include "core/src/runtime_dir.h"
#include "process.h"
#include "rings_harness.h"

namespace batchcast {
namespace {

using nlohmann::json;
using testing::All;
using testing::kSamples;
using testing::ReadAll;
using testing::Reader;
using testing::StartRings;
using testing::UniqueName;

constexpr uint64_t kEpochs = 3;

// Two readers, one per ring, batch sizes that do and do not divide the
// producer batch.
std::vector<Reader> ReaderPerRing() {
  std::vector<Reader> readers(2);
  readers[0].device = "cpu:0";
  readers[1].device = "cpu:1";
  readers[1].batch = 10;
  return readers;
}

// Every reader read every epoch exactly, every byte as the formula says.
void ExpectExactEpochs(const std::vector<Reader>& readers) {
  for (const Reader& r : readers) {
    SCOPED_TRACE(r.device);
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.mismatches, 0);
    ASSERT_EQ(r.epochs.size(), kEpochs);
    for (const std::vector<int64_t>& e : r.epochs) {
      EXPECT_EQ(std::set<int64_t>(e.begin(), e.end()), All());
      EXPECT_EQ(e.size(), kSamples);
    }
  }
}

uint64_t Decoded(const json& stats) {
  uint64_t n = 0;
  for (const json& r : stats["rings"]) n += r["samples_decoded"].get<uint64_t>();
  return n;
}

TEST(AttachedProducer, FillsItsRingAsTheServerWould) {
  const std::string name = UniqueName("attach");
  auto server = StartRings(name, kEpochs, 2, 2, Placement::kRoundRobin);
  ASSERT_TRUE(server);
  auto holder = AttachedProducer::Start(name, 1);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  EXPECT_EQ((*holder)->device(), -1);
  // The attach socket is this user's alone, as the control socket.
  Result<std::string> endpoint = AttachEndpoint(name, 1);
  ASSERT_TRUE(endpoint.ok());
  struct stat st {};
  ASSERT_EQ(stat(IpcPath(*endpoint).c_str(), &st), 0) << *endpoint;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::vector<Reader> readers = ReaderPerRing();
  ASSERT_NO_FATAL_FAILURE(ReadAll(name, readers));
  ExpectExactEpochs(readers);
  const json stats = json::parse(server->StatsJson());
  const json& ring1 = stats["rings"][1];
  EXPECT_EQ(ring1["attached_pid"].get<uint32_t>(), static_cast<uint32_t>(getpid()));
  EXPECT_EQ(ring1["attached_batches"].get<uint64_t>(), (*holder)->batches());
  EXPECT_EQ(ring1["attached_detached"].get<uint64_t>(), 0u);
  // Round robin: ring 1 wrote half of every epoch, all of it here.
  EXPECT_EQ((*holder)->samples(), kEpochs * kSamples / 2);
  EXPECT_EQ(ring1["samples_decoded"].get<uint64_t>(), (*holder)->samples());
  EXPECT_EQ(Decoded(stats), kEpochs * kSamples) << "each sample decoded once";
  EXPECT_TRUE((*holder)->running());
  (*holder)->Stop();
  EXPECT_TRUE((*holder)->status().ok()) << (*holder)->status().ToString();
  server.reset();
  EXPECT_NE(stat(IpcPath(*endpoint).c_str(), &st), 0) << "the attach socket is removed";
}

// Stopped mid-stream: the server decodes the ring again, from the next batch.
TEST(AttachedProducer, AStoppedHolderGivesTheRingBack) {
  const std::string name = UniqueName("attachstop");
  auto server = StartRings(name, kEpochs, 2, 2, Placement::kRoundRobin);
  ASSERT_TRUE(server);
  auto holder = AttachedProducer::Start(name, 1);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  std::atomic<bool> done{false};
  std::thread stopper([&] {
    while (!done && (*holder)->batches() < 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    (*holder)->Stop();
  });
  std::vector<Reader> readers = ReaderPerRing();
  ReadAll(name, readers);
  done = true;
  stopper.join();
  ExpectExactEpochs(readers);
  const json stats = json::parse(server->StatsJson());
  const json& ring1 = stats["rings"][1];
  EXPECT_EQ(ring1["attached_pid"].get<uint32_t>(), 0u);
  EXPECT_EQ(ring1["attached_detached"].get<uint64_t>(), 1u);
  EXPECT_GE((*holder)->batches(), 10u);
  EXPECT_LT((*holder)->samples(), ring1["samples_decoded"].get<uint64_t>())
      << "the server wrote the rest of the ring's share";
  EXPECT_EQ(Decoded(stats), kEpochs * kSamples);
}

// Killed mid-stream (SIGKILL, a batch in hand or not): nothing lost or repeated.
TEST(AttachedProducer, AKilledHolderLosesNothing) {
  const std::string name = UniqueName("attachkill");
  auto server = StartRings(name, kEpochs, 2, 2, Placement::kRoundRobin);
  ASSERT_TRUE(server);
  testing::Process holder({BC_ATTACH_BIN, name, "1"});
  ASSERT_TRUE(holder.WaitForLine("ATTACHED", std::chrono::seconds(30)));
  std::thread killer([&] {
    for (int i = 0; i < 3000; ++i) {
      const json s = json::parse(server->StatsJson());
      if (s["rings"][1]["attached_batches"].get<uint64_t>() >= 5) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    holder.Kill(SIGKILL);
  });
  std::vector<Reader> readers = ReaderPerRing();
  ReadAll(name, readers);
  killer.join();
  ExpectExactEpochs(readers);
  const json stats = json::parse(server->StatsJson());
  const json& ring1 = stats["rings"][1];
  EXPECT_EQ(ring1["attached_pid"].get<uint32_t>(), 0u);
  EXPECT_EQ(ring1["attached_detached"].get<uint64_t>(), 1u);
  EXPECT_GE(ring1["attached_batches"].get<uint64_t>(), 5u);
  EXPECT_EQ(Decoded(stats), kEpochs * kSamples);
}

// What cannot be attached is an error naming why, at once.
TEST(AttachedProducer, RefusalsNameWhy) {
  const std::string name = UniqueName("attachno");
  auto server = StartRings(name, kEpochs, 2, 2);
  ASSERT_TRUE(server);
  auto first = AttachedProducer::Start(name, 0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = AttachedProducer::Start(name, 0);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(second.status().message().find("already has an attached producer (pid " +
                                           std::to_string(getpid()) + ")"),
            std::string::npos)
      << second.status().ToString();
  auto no_ring = AttachedProducer::Start(name, 2);
  ASSERT_FALSE(no_ring.ok());
  EXPECT_EQ(no_ring.status().code(), StatusCode::kNotFound) << no_ring.status().ToString();
  auto no_server = AttachedProducer::Start(UniqueName("nobody"), 0);
  EXPECT_EQ(no_server.status().code(), StatusCode::kNotFound) << no_server.status().ToString();
  (*first)->Stop();
  // Once the first left, the ring may be held again.
  auto again = AttachedProducer::Start(name, 0);
  EXPECT_TRUE(again.ok()) << again.status().ToString();

  ServerOptions o;
  o.name = UniqueName("noattach");
  o.attach = false;
  o.source.synthetic = kSamples;
  auto closed = Server::Start(o);
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  auto refused = AttachedProducer::Start(o.name, 0);
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("--no-attach"), std::string::npos);
}

}  // namespace
}  // namespace batchcast
