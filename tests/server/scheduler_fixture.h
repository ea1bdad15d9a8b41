// The Scheduler test fixture (tests/server/scheduler_test.cc,
// scheduler_holes_test.cc): a fake clock and fake processes, a test producer
// (TryBeginBatch + Commit, optionally dropping samples: Note [Holes]) and
// helpers that send NEXT and read the outbox.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "server/src/scheduler.h"

namespace batchcast::scheduler_test {

using namespace std::chrono_literals;

class FakeEnv : public SchedulerEnv {
 public:
  Clock::time_point Now() const override { return now; }
  bool ProcessAlive(int pid) const override { return dead.count(pid) == 0; }

  Clock::time_point now = Clock::time_point{} + 1h;
  std::set<int> dead;
};

// The dataset index the test producer writes for stream seq `seq`.
inline int64_t IndexOf(uint64_t seq) { return 1000 + static_cast<int64_t>(seq); }

// The scheduler's config with test defaults: window 4 x batch 4, epochs of
// 16, and heartbeats that never expire unless a test says so (time moves
// only when a test moves it). Fields in SchedulerConfig's order.
struct TestConfig {
  uint32_t window = 4;
  uint32_t batch_size = 4;
  uint64_t epoch_len = 16;
  uint64_t stream_end = UINT64_MAX;
  LagPolicy lag_policy = LagPolicy::kBlock;
  std::chrono::milliseconds lag_timeout{100};
  std::chrono::milliseconds heartbeat_timeout = 1h;
  uint32_t min_consumers = 1;
  uint32_t max_consumers = 256;
  uint32_t max_leases = 16;
  std::chrono::milliseconds group_timeout = 10s;
  uint64_t group_epoch_len = 0;
  uint32_t rings = 1;  // Note [Placement]
  uint64_t sample_bytes = 0;
  Placement placement = Placement::kRoundRobin;
  bool begin_ahead = true;  // Note [Begun ahead]
};

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(const TestConfig& t) {
    config_ = SchedulerConfig{
        t.window,        t.batch_size,        t.epoch_len,     t.stream_end,    t.lag_policy,
        t.lag_timeout,   t.heartbeat_timeout, t.min_consumers, t.max_consumers, t.max_leases,
        t.group_timeout, t.group_epoch_len,   t.rings,         t.sample_bytes};
    // Note [Placement]: several rings are the built-in producers' (BeginWork).
    config_.replay = t.rings > 1;
    config_.placement = t.placement;
    config_.begin_ahead = t.begin_ahead;
    s_ = std::make_unique<Scheduler>(config_, &env_);
    produced_ = 0;  // a test may make a second scheduler
    placements.clear();
  }

  struct JoinOptions {
    uint32_t batch = 4;
    JoinPolicy join = JoinPolicy::kImmediate;
    bool drop_last = true;
    uint16_t prefetch = 2;
    uint32_t pid = 0;
    bool same_host = false;
    // Note [Consumer groups]: world_size 0 = no group.
    std::string group;
    uint32_t rank = 0;
    uint32_t world_size = 0;
    // As the client does: a HEARTBEAT as soon as WELCOME comes (Note
    // [Unconfirmed consumers]); false leaves it unconfirmed.
    bool confirm = true;
    uint32_t ring = 0;  // its home ring (Note [Placement])
  };
  Result<Scheduler::Admission> Join(const std::string& id, JoinOptions o) {
    proto::Hello h{id,         o.pid, o.batch, o.drop_last, o.join,
                   o.prefetch, "",    o.group, o.rank,      o.world_size};
    Result<Scheduler::Admission> a = s_->AddConsumer(id, h, o.same_host, o.ring);
    if (a.ok() && o.confirm) s_->Touch(id);
    return a;
  }
  void MustJoin(const std::string& id, JoinOptions o) { ASSERT_TRUE(Join(id, o).ok()); }
  // Rank `rank` of group `group` of `world` ranks, batch `batch`.
  static JoinOptions Rank(const std::string& group, uint32_t rank, uint32_t world,
                          uint32_t batch = 4) {
    JoinOptions o;
    o.group = group;
    o.rank = rank;
    o.world_size = world;
    o.batch = batch;
    return o;
  }
  // Make(t); the consumers `ids` join with the default JoinOptions; the
  // producer fills the ring (Pump).
  void MakeAndFill(const TestConfig& t, std::initializer_list<const char*> ids = {"a"}) {
    Make(t);
    for (const char* id : ids) MustJoin(id, {});
    Pump();
  }

  // Begins and commits the next producer batch (batch_size samples, cut at
  // the producer-epoch end). The slot it went to, or nullopt when the
  // producer would have to wait. The samples of the seqs in `dropped` are
  // dropped as a source drops a bad file's (Note [Holes]): the others are
  // compacted to the front of the slot's indices and the slot is committed
  // with their count.
  // Note [Placement]: each ring's producer asks for work in turn; the first
  // that gets some (its ring in `*ring` when given), or none when every one
  // would wait.
  Result<std::optional<Scheduler::Work>> BeginOnAnyRing(uint32_t* ring = nullptr) {
    Result<std::optional<Scheduler::Work>> work = std::optional<Scheduler::Work>();
    for (uint32_t r = 0; r < config_.rings; ++r) {
      work = s_->TryBeginWork(r);
      EXPECT_TRUE(work.ok()) << work.status().ToString();
      if (ring != nullptr) *ring = r;
      if (!work.ok() || work->has_value()) break;
    }
    return work;
  }

  std::optional<uint32_t> Produce() {
    const uint64_t L = config_.epoch_len;
    const uint64_t seq = produced_;
    const uint64_t n = std::min<uint64_t>(config_.batch_size, L - seq % L);
    std::vector<int64_t> idx;
    for (uint64_t i = 0; i < n; ++i) idx.push_back(IndexOf(seq + i));
    Result<std::optional<SlotGrant>> grant = std::optional<SlotGrant>();
    if (config_.rings > 1) {
      // Only the ring the batch is placed on gets it (the others would wait).
      uint32_t ring = 0;
      Result<std::optional<Scheduler::Work>> work = BeginOnAnyRing(&ring);
      if (!work.ok() || !work->has_value()) return std::nullopt;
      EXPECT_FALSE((*work)->lane);
      EXPECT_EQ((*work)->grant.count, n);
      grant = std::optional<SlotGrant>((*work)->grant);
      placements.push_back(ring);
    } else {
      grant = s_->TryBeginBatch(static_cast<uint32_t>(seq / L), idx);
    }
    EXPECT_TRUE(grant.ok()) << grant.status().ToString();
    if (!grant.ok() || !grant->has_value()) return std::nullopt;
    EXPECT_EQ((*grant)->first_seq, seq);
    uint32_t valid = 0;
    for (uint64_t i = 0; i < n; ++i) {
      if (dropped.count(seq + i) == 0) (*grant)->indices[valid++] = IndexOf(seq + i);
    }
    EXPECT_TRUE(s_->Commit((*grant)->slot, valid).ok());
    produced_ += n;
    return (*grant)->slot;
  }
  // Seqs whose samples Produce drops.
  std::set<uint64_t> dropped;
  // With several rings: the ring of each batch Produce wrote, in order.
  std::vector<uint32_t> placements;
  // Produces until the producer would wait; returns how many batches. With
  // no reads in between, at most `window` batches can be written.
  int Pump() {
    int n = 0;
    while (n < static_cast<int>(config_.window) && produced_ < config_.stream_end && Produce()) {
      ++n;
    }
    return n;
  }

  // Every reply queued so far, for `id`.
  std::vector<proto::Message> Replies(const std::string& id) {
    std::vector<Outgoing> out;
    s_->TakeOutbox(out);
    for (Outgoing& o : out) pending_[o.identity].push_back(std::move(o.message));
    std::vector<proto::Message> mine = std::move(pending_[id]);
    pending_.erase(id);
    return mine;
  }
  // Sends NEXT and returns the replies it got at once (none if it waits).
  std::vector<proto::Message> Next(const std::string& id) {
    s_->Next(id, ++request_id_);
    return Replies(id);
  }
  // NEXT that must be answered with a batch.
  proto::Batch NextBatch(const std::string& id) {
    std::vector<proto::Message> r = Next(id);
    if (r.size() != 1 || !std::holds_alternative<proto::Batch>(r[0])) {
      ADD_FAILURE() << "expected one BATCH for " << id << ", got " << Describe(r);
      return proto::Batch{};
    }
    return std::get<proto::Batch>(r[0]);
  }
  void Release(const std::string& id, const proto::Batch& b) { s_->Release(id, {b.lease_id}); }
  // `r` is one ERROR with `code` whose message contains `text`.
  static void ExpectOneError(const std::vector<proto::Message>& r, StatusCode code,
                             std::string_view text) {
    ASSERT_EQ(r.size(), 1u) << Describe(r);
    const auto* e = std::get_if<proto::Error>(&r[0]);
    ASSERT_NE(e, nullptr) << Describe(r);
    EXPECT_EQ(e->code, code) << e->message;
    EXPECT_NE(e->message.find(text), std::string::npos) << e->message;
  }

  // "4+3" for a batch of 3 samples from seq 4, "E0/2" for the END_OF_EPOCH
  // of epoch 0 after 2 batches, "ERR(code)".
  static std::string Describe(const proto::Message& m) {
    if (auto* b = std::get_if<proto::Batch>(&m)) {
      return std::to_string(b->first_seq) + "+" + std::to_string(b->indices.size());
    }
    if (auto* e = std::get_if<proto::EndOfEpoch>(&m)) {
      return "E" + std::to_string(e->epoch) + "/" + std::to_string(e->batches);
    }
    if (auto* e = std::get_if<proto::Error>(&m)) {
      return "ERR(" + std::string(StatusCodeName(e->code)) + ")";
    }
    return std::string(proto::MessageName(m));
  }
  static std::string Describe(const std::vector<proto::Message>& ms) {
    std::string s;
    for (const proto::Message& m : ms) s += (s.empty() ? "" : " ") + Describe(m);
    return s.empty() ? "(nothing)" : s;
  }

  // Reads as `id` until OutOfRange (or `max_turns`), releasing every batch
  // at once and producing whenever the consumer waits: the transcript, each
  // reply as Describe writes it, or a batch as `batch_text` does.
  std::string ReadToEnd(const std::string& id, int max_turns = 200,
                        std::string (*batch_text)(const proto::Batch&) = nullptr) {
    std::string transcript;
    s_->Next(id, ++request_id_);
    for (int turn = 0; turn < max_turns; ++turn) {
      std::vector<proto::Message> r = Replies(id);
      if (r.empty()) {
        if (Pump() == 0) return transcript + " (stuck)";
        continue;
      }
      for (const proto::Message& m : r) {
        const auto* b = std::get_if<proto::Batch>(&m);
        transcript += (transcript.empty() ? "" : " ") +
                      (b != nullptr && batch_text != nullptr ? batch_text(*b) : Describe(m));
        if (b != nullptr) Release(id, *b);
        if (auto* e = std::get_if<proto::Error>(&m)) {
          if (e->code == StatusCode::kOutOfRange) return transcript;
        }
      }
      s_->Next(id, ++request_id_);
    }
    return transcript;
  }

  // Moves the fake clock by `d`, then lets the control thread's Tick run.
  void TickAfter(Clock::duration d) {
    env_.now += d;
    s_->Tick();
  }

  nlohmann::json Stats() { return s_->Stats(); }
  nlohmann::json ConsumerStats(const std::string& name) {
    const nlohmann::json stats = Stats();
    for (const auto& c : stats["consumers"]) {
      if (c["name"] == name) return c;
    }
    return nullptr;
  }
  int Leased() { return Stats()["slots"]["leased"].get<int>(); }

  FakeEnv env_;
  SchedulerConfig config_;
  std::unique_ptr<Scheduler> s_;
  uint64_t produced_ = 0;
  uint64_t request_id_ = 0;
  std::map<std::string, std::vector<proto::Message>> pending_;
};

}  // namespace batchcast::scheduler_test
