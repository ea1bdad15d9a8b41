// End-to-end tests of the sharing engine, once per ring device (`cpu`,
// `cuda:0`): a real server process (or an in-process Server) with its ring on
// that device, consumers in separate processes or threads, every byte checked
// against the synthetic formula (device batches copied to the host on their
// delivery stream) and the order against the sampler's. The cuda:0 instances
// skip without a usable GPU; the checks only a device ring has are in
// tests/gpu/gpu_engine_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "batchcast/client/consumer.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/server/server.h"
#include "core/src/protocol.h"
#include "core/src/runtime_dir.h"
#include "core/src/sampler.h"
#include "ring_device.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using testing::ForEachBatchOfEpoch;
using testing::NowMs;
using testing::Process;
using testing::ReadJson;
using testing::Record;
using testing::Stats;
using testing::TempDir;
using testing::UniqueName;

class Engine : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (ring_.is_cuda()) BC_REQUIRE_GPU();
  }

  // The lag-policy scenarios: a server with an endless synthetic stream of
  // `size`-pixel images in batches of 16 in `window` slots, which waits for
  // two consumers and applies `policy` to one that blocks it for
  // `lag_timeout` seconds; and those two consumers (batch 16, joined at
  // once): `fast` reads on, `slow` falls behind or holds a batch.
  struct LagScenario {
    std::unique_ptr<Process> server;
    std::unique_ptr<Consumer> fast;
    std::unique_ptr<Consumer> slow;
  };
  // A fatal failure when a consumer cannot connect (call it in
  // ASSERT_NO_FATAL_FAILURE).
  void StartLagScenario(const std::string& name, const std::string& size, const std::string& window,
                        const std::string& policy, const std::string& lag_timeout,
                        LagScenario* out) const {
    out->server = ring_.StartServer(
        name, {"--synthetic", "100000", "--size", size, "--batch-size", "16", "--window", window,
               "--min-consumers", "2", "--lag-policy", policy, "--lag-timeout", lag_timeout});
    out->fast = ring_.Connect(name, 16, JoinPolicy::kImmediate);
    out->slow = ring_.Connect(name, 16, JoinPolicy::kImmediate);
    ASSERT_TRUE(out->fast && out->slow);
  }
  const testing::Ring ring_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Ring, Engine, ::testing::Values(Device::Cpu(), Device::Cuda(0)),
                         testing::RingName);

// 1. Exactly once, in the producer's order, every byte right: three batch
// sizes (zero-copy and gathered batches), three consumer processes (on a
// device ring, each on its own CUDA stream).
TEST_P(Engine, ExactlyOnceThreeBatchSizesNextEpoch) {
  const std::string name = UniqueName("once");
  const std::string dir = TempDir();
  auto server = ring_.StartServer(
      name, {"--synthetic", "1000", "--size", "16", "--batch-size", "64", "--window", "4",
             "--min-consumers", "3", "--epochs", "2", "--seed", "7"});
  std::vector<uint32_t> sizes = {32, 48, 100};
  std::vector<std::unique_ptr<Process>> consumers;
  for (uint32_t b : sizes) {
    consumers.push_back(ring_.StartConsumer(name, dir + "/c" + std::to_string(b) + ".json",
                                            {"--batch-size", std::to_string(b), "--join",
                                             "next_epoch", "--epochs", "2", "--no-drop-last"}));
  }
  auto sampler = Sampler::Make(1000, SamplerOptions{7, true, 0, 1});
  ASSERT_TRUE(sampler.ok());
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int rc = consumers[k]->Wait(ring_.Pick(60s, 120s));
    nlohmann::json r = ReadJson(dir + "/c" + std::to_string(sizes[k]) + ".json");
    ASSERT_EQ(rc, 0) << "consumer " << sizes[k] << ": " << r.dump().substr(0, 2000);
    ASSERT_FALSE(r.contains("error")) << r["error"];
    EXPECT_EQ(r["mismatches"], 0) << "bytes differ from the formula";
    EXPECT_EQ(r["cuda_errors"], 0);
    EXPECT_EQ(r["device"], ring_.device().index);
    ASSERT_EQ(r["epochs"].size(), 2u);
    for (uint64_t e = 0; e < 2; ++e) {
      std::vector<int64_t> got = r["epochs"][e].get<std::vector<int64_t>>();
      EXPECT_EQ(got, sampler->EpochOrder(e)) << "batch " << sizes[k] << " epoch " << e;
      std::set<int64_t> unique(got.begin(), got.end());
      EXPECT_EQ(unique.size(), 1000u);
    }
    EXPECT_EQ(r["batches_per_epoch"], (1000 + sizes[k] - 1) / sizes[k]);
    if (sizes[k] != 32) {
      EXPECT_GT(r["gathered"].get<int>(), 0) << "no multi-slot batch tested";
    }
    if (sizes[k] <= 64) {
      EXPECT_GT(r["zero_copy"].get<int>(), 0);
    }
  }
  // The stream ended and every consumer left: the server exits by itself.
  EXPECT_EQ(server->Wait(ring_.Pick(10s, 20s)), 0);
}

// A consumer is heard from its WELCOME on: on a CUDA ring, mapping the ring
// creates the consumer process's context on the device (hundreds of ms, and
// seconds while other processes start theirs), longer than this server's
// heartbeat timeout; its heartbeats run meanwhile, so it is not dropped as
// silent before its first batch.
TEST_P(Engine, ConsumerIsHeardWhileItMapsTheRing) {
  if (!ring_.is_cuda()) GTEST_SKIP() << "a host ring maps at once";
  const std::string name = UniqueName("mapping");
  const std::string dir = TempDir();
  auto server = ring_.StartServer(name, {"--synthetic", "1000", "--size", "16", "--batch-size",
                                         "16", "--window", "4", "--heartbeat-timeout", "0.1"});
  auto c = ring_.StartConsumer(name, dir + "/c.json", {"--batch-size", "16", "--batches", "20"});
  const int rc = c->Wait(60s);
  const nlohmann::json r = ReadJson(dir + "/c.json");
  ASSERT_EQ(rc, 0) << r.dump().substr(0, 2000);
  EXPECT_FALSE(r.contains("error")) << r["error"];
  EXPECT_EQ(r["mismatches"], 0);
  EXPECT_EQ(Stats(name)["consumers_lost"].get<int>(), 0);
}

// drop_last: floor(L/B) full batches per epoch, then end of epoch.
TEST_P(Engine, DropLastGivesFullBatchesOnly) {
  const std::string name = UniqueName("droplast");
  auto server = ring_.StartServer(name, {"--synthetic", "250", "--size", "8", "--batch-size", "16",
                                         "--window", "8", "--epochs", "2"});
  auto c = ring_.Connect(name, 48, JoinPolicy::kNextEpoch);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->batches_per_epoch(), 250u / 48);
  for (int epoch = 0; epoch < 2; ++epoch) {
    uint64_t batches = 0;
    ASSERT_NO_FATAL_FAILURE(ForEachBatchOfEpoch(c.get(), [&](const Batch& b) {
      EXPECT_EQ(b.size(), 48u);
      EXPECT_EQ(b.epoch(), static_cast<uint32_t>(epoch));
      EXPECT_TRUE(ring_.BatchMatchesFormula(b));
      ++batches;
    }));
    EXPECT_EQ(batches, c->batches_per_epoch());
  }
  auto end = c->Next();
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), StatusCode::kOutOfRange) << end.status().ToString();
  c.reset();
  EXPECT_EQ(server->Wait(ring_.Pick(10s, 20s)), 0);
}

// 2a. block: the fastest never gets more than `window` slots ahead of the slowest.
TEST_P(Engine, WindowBoundsTheFastestUnderBlock) {
  const std::string name = UniqueName("window");
  const int window = 4, producer_batch = 16, slow_batch = 16;
  auto server = ring_.StartServer(
      name, {"--synthetic", "100000", "--size", "8", "--batch-size", std::to_string(producer_batch),
             "--window", std::to_string(window), "--min-consumers", "2"});
  auto fast = ring_.Connect(name, 16, JoinPolicy::kImmediate);
  auto slow = ring_.Connect(name, slow_batch, JoinPolicy::kImmediate);
  ASSERT_TRUE(fast && slow);
  std::mutex mu;
  std::vector<Record> f, s;
  std::thread tf([&] { ring_.ReadBatches(fast.get(), 150, 0ms, &f, &mu); });
  std::thread ts([&] { ring_.ReadBatches(slow.get(), 40, 10ms, &s, &mu); });
  ts.join();
  slow.reset();  // the fast one may now run free
  tf.join();
  // For every batch the fast consumer got, compare with what the slow one had
  // received by then. The server-side cursor of the slow one may be ahead of
  // what it received by its requests in flight (prefetch 2, plus one top-up).
  const uint64_t bound = uint64_t{window} * producer_batch + 3 * slow_batch;
  uint64_t worst = 0;
  for (const Record& r : f) {
    if (s.empty() || r.t > s.back().t) break;  // the slow one is gone or done
    uint64_t slow_end = 0;
    for (const Record& q : s) {
      if (q.t <= r.t) slow_end = q.end;
    }
    if (r.end > slow_end) worst = std::max(worst, r.end - slow_end);
  }
  EXPECT_LE(worst, bound) << "fast consumer ran ahead of the window";
  EXPECT_GT(worst, 0u);
}

// 2b. skip: the others are not slowed beyond lag_timeout; the laggard's skip is reported.
TEST_P(Engine, SkipPolicyKeepsOthersGoing) {
  const std::string name = UniqueName("skip");
  // The laggard may pin prefetch + 1 slots with leases (which skip never
  // breaks), so the window leaves room for the fast one beyond that.
  LagScenario lag;
  ASSERT_NO_FATAL_FAILURE(StartLagScenario(name, "8", "8", "skip", "0.2", &lag));
  std::mutex mu;
  std::vector<Record> f, s;
  std::thread ts([&] {
    // Sleeps 600 ms per batch: far slower than lag_timeout.
    for (int i = 0; i < 5; ++i) {
      auto b = lag.slow->Next();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      if (b->end_of_epoch()) continue;
      EXPECT_TRUE(ring_.BatchMatchesFormula(*b));
      {
        std::lock_guard lock(mu);
        s.push_back({NowMs(), b->skipped()});
      }
      std::this_thread::sleep_for(600ms);
    }
  });
  ring_.ReadBatches(lag.fast.get(), 300, 1ms, &f, &mu);
  ts.join();
  double max_gap = 0;
  for (size_t i = 1; i < f.size(); ++i) max_gap = std::max(max_gap, f[i].t - f[i - 1].t);
  EXPECT_LT(max_gap, 200 + 400) << "the fast consumer was held past lag_timeout";
  ASSERT_FALSE(s.empty());
  EXPECT_GT(s.back().end, 0u) << "the slow consumer's skipped count was not reported";
  auto st = Stats(name);
  EXPECT_GT(st["skip_events"].get<int>(), 0);
}

// 2c. evict: the laggard gets a clear error; the others go on.
TEST_P(Engine, EvictPolicyDisconnectsLaggard) {
  const std::string name = UniqueName("evict");
  LagScenario lag;
  ASSERT_NO_FATAL_FAILURE(StartLagScenario(name, "8", "4", "evict", "0.2", &lag));
  auto first = lag.slow->Next();
  ASSERT_TRUE(first.ok());
  first = Batch();  // release; then stop reading for a while
  std::mutex mu;
  std::vector<Record> f;
  ring_.ReadBatches(lag.fast.get(), 200, 0ms, &f, &mu);
  EXPECT_EQ(f.size(), 200u);
  Status error;
  for (int i = 0; i < 20 && error.ok(); ++i) {
    auto b = lag.slow->Next();
    if (!b.ok()) error = b.status();
  }
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(error.message().find("evicted"), std::string::npos) << error.message();
  EXPECT_GE(Stats(name)["consumers_evicted"].get<int>(), 1);
}

// 3. Leases: a held batch never changes while the others (and its own
// consumer) run far past it.
TEST_P(Engine, HeldBatchNeverChanges) {
  for (const char* policy : {"block", "skip"}) {
    SCOPED_TRACE(policy);
    const std::string name = UniqueName("lease");
    // `slow` holds its first batch; `fast` runs far past it.
    LagScenario lag;
    ASSERT_NO_FATAL_FAILURE(StartLagScenario(name, "16", "4", policy, "0.1", &lag));
    Batch held;
    FieldView image;
    ASSERT_NO_FATAL_FAILURE(ring_.HoldNext(lag.slow.get(), &held, &image));
    const std::vector<uint8_t> copy = testing::HostBytes(image);
    std::atomic<bool> done{false};
    std::mutex mu;
    std::vector<Record> o;
    std::thread t([&] {
      ring_.ReadBatches(lag.fast.get(), 400, 0ms, &o, &mu);
      done = true;
    });
    // block: `slow` keeps reading (its cursor moves on) but keeps batch 0.
    // skip: `slow` stops reading entirely; the producer skips it.
    const auto until = std::chrono::steady_clock::now() + ring_.Pick(2s, 3s);
    while (std::chrono::steady_clock::now() < until && !done) {
      if (std::string(policy) == "block") {
        auto b = lag.slow->Next();
        ASSERT_TRUE(b.ok());
      } else {
        std::this_thread::sleep_for(10ms);
      }
      ASSERT_EQ(copy, testing::HostBytes(image)) << "held batch changed";
    }
    t.join();
    EXPECT_EQ(o.size(), 400u);
    EXPECT_GT(o.back().end, 4u * 16 * 4) << "the others did not run far past the held slot";
    EXPECT_EQ(copy, testing::HostBytes(image));
    EXPECT_TRUE(ring_.BatchMatchesFormula(held));
  }
}

// 4. Late join with `immediate`: the first batch comes at once, and its epoch
// has batches_per_epoch batches.
TEST_P(Engine, LateImmediateJoin) {
  const std::string name = UniqueName("late");
  auto server = ring_.StartServer(
      name, {"--synthetic", "640", "--size", "8", "--batch-size", "32", "--window", "4"});
  auto first = ring_.Connect(name, 32, JoinPolicy::kImmediate);
  ASSERT_TRUE(first);
  std::atomic<bool> stop{false};
  std::thread t([&] {
    while (!stop) {
      auto b = first->Next();
      if (!b.ok()) return;
      std::this_thread::sleep_for(1ms);
    }
  });
  std::this_thread::sleep_for(300ms);  // the stream is well under way
  const auto t0 = std::chrono::steady_clock::now();
  auto late = ring_.Connect(name, 40, JoinPolicy::kImmediate);
  ASSERT_TRUE(late);
  auto b = late->Next();
  const auto wait = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(b.ok());
  EXPECT_LT(wait, 200ms) << "an immediate joiner waited for the producer";
  EXPECT_GT(b->first_seq(), 0u);
  uint64_t batches = 1, samples = b->size();
  ASSERT_NO_FATAL_FAILURE(ForEachBatchOfEpoch(late.get(), [&](const Batch& n) {
    EXPECT_TRUE(ring_.BatchMatchesFormula(n));
    ++batches;
    samples += n.size();
  }));
  EXPECT_EQ(batches, late->batches_per_epoch());
  EXPECT_EQ(samples, late->batches_per_epoch() * 40);
  stop = true;
  t.join();
}

// 5a. kill -9 of a consumer holding a batch: the others go on within 2 s and
// the ring is fully reclaimed.
TEST_P(Engine, KilledConsumerIsReclaimed) {
  const std::string name = UniqueName("killc");
  const std::string dir = TempDir();
  auto server = ring_.StartServer(name, {"--synthetic", "100000", "--size", "8", "--batch-size",
                                         "16", "--window", "4", "--min-consumers", "2"});
  auto victim = ring_.StartConsumer(
      name, dir + "/victim.json",
      {"--batch-size", "16", "--hold-at", "3", "--hold-ms", "60000", "--epochs", "1000"});
  auto survivor = ring_.Connect(name, 16, JoinPolicy::kImmediate);
  ASSERT_TRUE(survivor);
  std::mutex mu;
  std::vector<Record> before;
  ring_.ReadBatches(survivor.get(), 2, 0ms, &before, &mu);
  ASSERT_TRUE(victim->WaitForLine("HOLDING", ring_.Pick(10s, 20s)));
  // The victim holds a lease and its cursor pins the ring (block): the
  // survivor stalls until the victim dies.
  victim->Kill(SIGKILL);
  const double killed = NowMs();
  std::vector<Record> after;
  ring_.ReadBatches(survivor.get(), 50, 0ms, &after, &mu);
  ASSERT_EQ(after.size(), 50u);
  EXPECT_LT(after.front().t - killed, 2000) << "survivor resumed too late";
  auto st = Stats(name);
  ASSERT_EQ(st["consumers"].size(), 1u);
  EXPECT_EQ(st["consumers_lost"].get<int>(), 1);
  // prefetch (2) + the last batch, whose release rides on the next NEXT; on a
  // device ring also the one before it while its event is polled (Note
  // [Device leases] in client/src/lease_ledger.h: released within 10 ms).
  EXPECT_LE(st["consumers"][0]["leases"].get<int>(), ring_.Pick(3, 4));
  survivor.reset();
  std::this_thread::sleep_for(ring_.Pick(100ms, 200ms));
  st = Stats(name);
  EXPECT_EQ(st["slots"]["leased"].get<int>(), 0) << st.dump();
  EXPECT_EQ(st["consumers"].size(), 0u);
}

// 5b/c. kill -9 of the server: every consumer's Next() fails within 2 s; a
// restarted server with the same name starts cleanly.
TEST_P(Engine, KilledServerFailsConsumersAndRestarts) {
  const std::string name = UniqueName("kills");
  const std::string dir = TempDir();
  auto server = ring_.StartServer(name, {"--synthetic", "100000", "--size", "8", "--batch-size",
                                         "16", "--window", "4", "--min-consumers", "2"});
  std::vector<std::unique_ptr<Process>> consumers;
  for (int i = 0; i < 2; ++i) {
    consumers.push_back(
        ring_.StartConsumer(name, dir + "/c" + std::to_string(i) + ".json",
                            {"--batch-size", "16", "--epochs", "100000", "--sleep-ms", "2"}));
  }
  ASSERT_TRUE(consumers[0]->WaitForLine("READY", ring_.Pick(10s, 20s)));
  ASSERT_TRUE(consumers[1]->WaitForLine("READY", ring_.Pick(10s, 20s)));
  server->Kill(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  for (auto& c : consumers) {
    EXPECT_EQ(c->Wait(ring_.Pick(5s, 10s)), 4) << "consumer did not fail";
  }
  EXPECT_LT(std::chrono::steady_clock::now() - killed, ring_.Pick(2500ms, 3000ms));
  for (int i = 0; i < 2; ++i) {
    auto r = ReadJson(dir + "/c" + std::to_string(i) + ".json");
    EXPECT_EQ(r["error_code"], "Unavailable") << r.dump();
    EXPECT_EQ(r["mismatches"], 0);
    EXPECT_EQ(r["cuda_errors"], 0);
  }
  // Restart with the same name: stale socket, lock and shared memory are cleaned up.
  auto again = ring_.StartServer(
      name, {"--synthetic", "1000", "--size", "8", "--batch-size", "16", "--window", "4"});
  auto c = ring_.Connect(name, 16, JoinPolicy::kImmediate);
  ASSERT_TRUE(c);
  auto b = c->Next();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(ring_.BatchMatchesFormula(*b));
}

// A second server with the same name is refused with a clear message.
TEST_P(Engine, SecondServerWithSameNameIsRefused) {
  const std::string name = UniqueName("dup");
  auto server = ring_.StartServer(name, {"--synthetic", "100", "--size", "8"});
  Process second({BC_SERVER_BIN, "serve", "--synthetic", "100", "--name", name});
  EXPECT_EQ(second.Wait(10s), 1);
}

// 6. Hostile peers: garbage never disturbs the server or the others.
TEST_P(Engine, HostilePeersDoNotDisturbOthers) {
  const std::string name = UniqueName("hostile");
  const std::string dir = TempDir();
  auto server = ring_.StartServer(name,
                                  {"--synthetic", "100000", "--size", "8", "--batch-size", "16",
                                   "--window", "8", "--max-leases", "4"},
                                  dir + "/server.log");
  auto good = ring_.Connect(name, 16, JoinPolicy::kImmediate);
  ASSERT_TRUE(good);
  std::mutex mu;
  std::vector<Record> got;
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop) {
      auto b = good->Next();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      if (b->end_of_epoch()) continue;
      ASSERT_TRUE(ring_.BatchMatchesFormula(*b));
      std::lock_guard lock(mu);
      got.push_back({NowMs(), b->first_seq() + b->size()});
    }
  });

  auto endpoint = ResolveEndpoint(name);
  ASSERT_TRUE(endpoint.ok());
  zmq::context_t ctx;
  auto send_all = [&](zmq::socket_t& s, const std::vector<std::string>& frames) {
    for (const std::string& f : frames) s.send(zmq::buffer(f), zmq::send_flags::dontwait);
  };
  std::string next = proto::Encode(proto::Next{1});
  std::string hello =
      proto::Encode(proto::Hello{"hostile", 1, 16, true, JoinPolicy::kImmediate, 2, ""});
  std::vector<std::string> garbage = {"", "B", "BC", "xxxxxxxxxxxxxxxx", next.substr(0, 9)};
  std::string wrong_version = next;
  wrong_version[2] = 99;
  garbage.push_back(wrong_version);
  std::string huge = proto::Encode(proto::Release{{1, 2, 3}});
  huge[6] = '\xff';
  huge[7] = '\xff';
  huge[8] = '\xff';
  huge[9] = '\x7f';  // 2^31 lease ids in a 30-byte message
  garbage.push_back(huge);
  std::string bad_hello =
      proto::Encode(proto::Hello{"zero", 1, 0, true, JoinPolicy::kImmediate, 2, ""});
  garbage.push_back(bad_hello);
  garbage.push_back(proto::Encode(proto::Welcome{}));  // a message only servers send
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    std::string r(rng() % 200, '\0');
    for (char& ch : r) ch = static_cast<char>(rng());
    if (i % 2 == 0 && r.size() >= 6) {  // valid header, random body
      r[0] = 'B';
      r[1] = 'C';
      r[2] = 1;
      r[3] = 0;
      r[4] = static_cast<char>(1 + rng() % 11);
    }
    garbage.push_back(r);
  }
  {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(*endpoint);
    send_all(s, {next});  // NEXT before HELLO
    send_all(s, garbage);
    // Multi-frame message.
    s.send(zmq::buffer(next), zmq::send_flags::sndmore);
    s.send(zmq::buffer(next), zmq::send_flags::none);
    std::this_thread::sleep_for(300ms);
  }
  // A consumer that takes batches and never releases them (nor heartbeats):
  // it hits the lease limit and is dropped after the heartbeat timeout.
  {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(*endpoint);
    send_all(s, {hello});
    for (uint64_t i = 1; i <= 20; ++i) send_all(s, {proto::Encode(proto::Next{i})});
    std::this_thread::sleep_for(3500ms);
  }
  std::this_thread::sleep_for(300ms);
  stop = true;
  reader.join();
  ASSERT_FALSE(got.empty());
  double max_gap = 0;
  for (size_t i = 1; i < got.size(); ++i) max_gap = std::max(max_gap, got[i].t - got[i - 1].t);
  EXPECT_LT(max_gap, 2600) << "the good consumer was stalled";
  EXPECT_GT(got.size(), 100u);
  auto st = Stats(name);
  EXPECT_EQ(st["consumers"].size(), 1u) << st.dump();
  EXPECT_EQ(st["consumers_lost"].get<int>(), 1);
  good.reset();
  server->Kill(SIGTERM);
  EXPECT_EQ(server->Wait(ring_.Pick(10s, 20s)), 0);
  const std::string text = testing::ReadText(dir + "/server.log");
  EXPECT_NE(text.find("protocol version mismatch"), std::string::npos) << text;
  EXPECT_NE(text.find("no heartbeat for"), std::string::npos) << text;
  EXPECT_NE(text.find("refused consumer 'zero'"), std::string::npos) << text;
}

// A consumer whose own unreleased batches pin every slot is told so at once
// instead of waiting forever for a batch the producer can never write.
TEST_P(Engine, HoldingEverySlotIsAnErrorNotAHang) {
  const std::string name = UniqueName("hoard");
  auto server = ring_.StartServer(
      name, {"--synthetic", "100000", "--size", "8", "--batch-size", "16", "--window", "4"});
  auto c = ring_.Connect(name, 16, JoinPolicy::kImmediate, 1);
  ASSERT_TRUE(c);
  std::vector<Batch> hoard;
  Status error;
  for (int i = 0; i < 8 && error.ok(); ++i) {
    auto b = c->Next();
    if (b.ok()) {
      hoard.push_back(std::move(*b));
    } else {
      error = b.status();
    }
  }
  EXPECT_EQ(hoard.size(), 4u);
  EXPECT_EQ(error.code(), StatusCode::kResourceExhausted) << error.ToString();
  EXPECT_NE(error.message().find("pin all 4 ring slots"), std::string::npos) << error.message();
  hoard.clear();  // released: the stream goes on
  auto b = c->Next();
  EXPECT_TRUE(b.ok()) << b.status().ToString();
}

// The in-process Server with an external producer (what batchcast.Producer
// uses). On a device ring the producer copies into the slot on its own stream
// and CommitBatch records the slot event there; the consumer, in the server's
// process, maps the ring without CUDA IPC.
TEST_P(Engine, ExternalProducer) {
  ServerOptions o;
  o.name = UniqueName("external");
  o.batch_size = 10;
  o.window = 4;
  o.source.device = ring_.device();
  std::vector<FieldSpec> fields = {{"x", DType::kInt64, {2}, MemoryKind::kHost}};
  auto server = Server::StartExternal(o, fields, 25);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::optional<cuda::Stream> pstream;
  if (ring_.is_cuda()) {
    auto s = cuda::Stream::Create(ring_.device().index);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    pstream.emplace(std::move(*s));
  }
  const CudaStreamRef ps = pstream ? pstream->ref() : CudaStreamRef();
  std::thread producer([&] {
    std::vector<int64_t> host(20);
    for (uint32_t epoch = 0; epoch < 2; ++epoch) {
      for (int64_t off = 0; off < 25; off += 10) {
        std::vector<int64_t> idx;
        for (int64_t i = off; i < std::min<int64_t>(25, off + 10); ++i) idx.push_back(i);
        auto slot = (*server)->BeginBatch(epoch, idx, 10s);
        ASSERT_TRUE(slot.ok()) << slot.status().ToString();
        ASSERT_EQ(slot->device.kind, ring_.device().kind);
        for (size_t i = 0; i < idx.size(); ++i) {
          host[2 * i] = idx[i];
          host[2 * i + 1] = epoch;
        }
        const size_t bytes = idx.size() * 2 * sizeof(int64_t);
        if (pstream) {
          ASSERT_TRUE(cuda::CopyAsync(slot->field_data[0], host.data(), bytes, ps).ok());
          ASSERT_TRUE(pstream->Synchronize().ok());  // `host` is reused
        } else {
          std::memcpy(slot->field_data[0], host.data(), bytes);
        }
        ASSERT_TRUE((*server)->CommitBatch(*slot, ps).ok());
      }
    }
    (*server)->EndStream();
  });
  auto c = ring_.Connect(o.name, 5, JoinPolicy::kNextEpoch);
  ASSERT_TRUE(c);
  for (int epoch = 0; epoch < 2; ++epoch) {
    int64_t expect = 0;
    ASSERT_NO_FATAL_FAILURE(ForEachBatchOfEpoch(c.get(), [&](const Batch& b) {
      auto x = b.field("x");
      ASSERT_TRUE(x.ok());
      ASSERT_EQ(x->device, ring_.device());
      const std::vector<uint8_t> bytes = testing::HostBytes(*x);
      const auto* v = reinterpret_cast<const int64_t*>(bytes.data());
      for (size_t i = 0; i < b.size(); ++i) {
        EXPECT_EQ(v[2 * i], expect++);
        EXPECT_EQ(v[2 * i + 1], epoch);
      }
    }));
    EXPECT_EQ(expect, 25);
  }
  EXPECT_EQ(c->Next().status().code(), StatusCode::kOutOfRange);
  producer.join();
  c.reset();
  EXPECT_TRUE((*server)->WaitFor(5s));
}

}  // namespace
}  // namespace batchcast
