// Unit tests of Note [Placement] (server/src/scheduler.h): one Scheduler for
// a server of several rings; the next producer batch goes round robin over
// the rings that have readers (or, by demand, by a plan whose shares follow
// their speeds), all to the one ring with readers, or to the ring of the group rank
// predicted to read it; placed batches committed out of order are published
// in order; counts (min/max consumers, groups) are the server's; per-ring
// stats.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../sources/log_capture.h"
#include "scheduler_fixture.h"

namespace batchcast {
namespace {

using namespace scheduler_test;

class PlacementTest : public SchedulerTest {
 protected:
  // Window 8 x batch 4, epochs of 16, `rings` rings.
  static TestConfig Rings(uint32_t rings) {
    TestConfig t;
    t.window = 8;
    t.rings = rings;
    t.sample_bytes = 10;
    return t;
  }
  // Two rings and a stream of `samples` samples.
  static TestConfig TwoRingsOf(uint64_t samples) {
    TestConfig t = Rings(2);
    t.stream_end = samples;
    return t;
  }
  // Makes the scheduler of four rings placing by `placement`, `per_ring`
  // slots per ring and long epochs, with reader "r<i>" on ring i: the
  // readers.
  std::vector<std::string> MakeFourRingsWithReaders(Placement placement, uint32_t per_ring) {
    TestConfig t = Placed(Rings(4), placement);
    t.window = per_ring * 4;
    t.epoch_len = 100000;
    Make(t);
    std::vector<std::string> readers;
    for (uint32_t r = 0; r < 4; ++r) {
      readers.push_back("r" + std::to_string(r));
      MustJoin(readers.back(), On(r));
    }
    return readers;
  }
  // Makes the scheduler of `t` with reader "a" on ring 0 and "b" on ring 1.
  void MakeWithTwoReaders(const TestConfig& t) {
    Make(t);
    MustJoin("a", On(0));
    MustJoin("b", On(1));
  }
  // Two rings taking the stream's batches (of 4 seqs) in turn, `window`
  // slots, long epochs, a reader on each ring.
  void MakeTwoRingsInTurn(uint32_t window) {
    TestConfig t = Placed(Rings(2), Placement::kRoundRobin);
    t.epoch_len = 1000;
    t.window = window;
    MakeWithTwoReaders(t);
  }
  double TurnWait(uint32_t ring) { return Stats()["rings"][ring]["turn_wait_s"].get<double>(); }
  // With MakeTwoRingsInTurn(8), Note [Begun ahead]: ring 1 begins seq 4 (and
  // seq 8 for ring 0, busy with seq 0); ring 0 writes seqs 0, 8 and 16 in
  // 10 ms each (seq 12 begun for ring 1 meanwhile), then waits for its turn:
  // seq 20 is ring 1's, which still writes seq 4. Returns that grant
  // (nullopt, a failure added, where a step went otherwise).
  std::optional<SlotGrant> RingZeroWaitsForItsTurn() {
    const std::optional<SlotGrant> b0 = Begin(0);
    const std::optional<SlotGrant> b1 = Begin(1);
    if (!b0 || !b1) {
      ADD_FAILURE() << "the rings' first batches were not granted";
      return std::nullopt;
    }
    EXPECT_EQ(s_->PredictNextBatch(0), std::optional<uint64_t>(8)) << "begun for it";
    EXPECT_EQ(Stats()["slots"]["writing"], 3);
    env_.now += 10ms;
    EXPECT_TRUE(s_->Commit(b0->slot).ok());
    for (uint64_t seq : {8, 16}) {
      const std::optional<SlotGrant> b = Begin(0);
      if (!b) {
        ADD_FAILURE() << "seq " << seq << " was not granted to ring 0";
        return std::nullopt;
      }
      EXPECT_EQ(b->first_seq, seq);
      env_.now += 10ms;
      EXPECT_TRUE(s_->Commit(b->slot).ok());
    }
    EXPECT_FALSE(Begin(0)) << "seq 20 is ring 1's, which has seq 12 begun ahead already";
    return b1;
  }
  // With MakeTwoRingsInTurn(2): each ring begins a batch, ring 0 finishes
  // its batch in 10 ms, and then no slot is free (the readers read neither)
  // for 10 ms more.
  void FillTheWindow() {
    const std::optional<SlotGrant> c0 = Begin(0);
    if (!c0 || !Begin(1)) {
      ADD_FAILURE() << "the rings' first batches were not granted";
      return;
    }
    env_.now += 10ms;
    EXPECT_TRUE(s_->Commit(c0->slot).ok());
    EXPECT_FALSE(Begin(0)) << "no slot free: both hold batches the readers have not read";
    env_.now += 10ms;
  }

  JoinOptions On(uint32_t ring) {
    JoinOptions o;
    o.ring = ring;
    return o;
  }
  // Rank `rank` of group "g" on ring `ring`.
  JoinOptions Rank(uint32_t rank, uint32_t ring, uint32_t batch = 4, uint32_t world = 2) {
    JoinOptions o = SchedulerTest::Rank("g", rank, world, batch);
    o.ring = ring;
    return o;
  }

  // What each consumer read: its batches (first seq, the ring of each
  // segment) and its dataset indices, until every one of `ids` got
  // OutOfRange or nothing moves.
  struct Read {
    std::vector<proto::Batch> batches;
    std::vector<int64_t> indices;
    bool ended = false;
  };
  std::map<std::string, Read> DriveToEnd(const std::vector<std::string>& ids) {
    std::map<std::string, Read> read;
    std::map<std::string, bool> asked;
    for (int turn = 0; turn < 2000; ++turn) {
      bool moved = false;
      bool all_ended = true;
      for (const std::string& id : ids) {
        Read& r = read[id];
        if (r.ended) continue;
        all_ended = false;
        if (!asked[id]) {
          s_->Next(id, ++request_id_);
          asked[id] = true;
        }
        for (const proto::Message& m : Replies(id)) {
          moved = true;
          asked[id] = false;
          if (const auto* b = std::get_if<proto::Batch>(&m)) {
            r.batches.push_back(*b);
            r.indices.insert(r.indices.end(), b->indices.begin(), b->indices.end());
            Release(id, *b);
          } else if (const auto* e = std::get_if<proto::Error>(&m)) {
            EXPECT_EQ(e->code, StatusCode::kOutOfRange) << id << ": " << e->message;
            r.ended = true;
          }
        }
      }
      if (all_ended) break;
      if (!moved && Pump() == 0) {
        ADD_FAILURE() << "stuck";
        break;
      }
    }
    return read;
  }
  // Ring `ring`'s producer begins the work it is given, writing its seqs'
  // indices; nullopt when it would wait.
  std::optional<SlotGrant> Begin(uint32_t ring) {
    Result<std::optional<Scheduler::Work>> w = s_->TryBeginWork(ring);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok() || !w->has_value()) return std::nullopt;
    const SlotGrant g = (*w)->grant;
    for (uint32_t i = 0; i < g.count; ++i) g.indices[i] = IndexOf(g.first_seq + i);
    return g;
  }
  // `t` placing batches by `placement`.
  static TestConfig Placed(TestConfig t, Placement placement = Placement::kDemand) {
    t.placement = placement;
    return t;
  }
  // What Simulate saw: the batches each ring wrote, and the read-ahead
  // hints that missed (the batch a ring got after it was told another).
  struct Simulated {
    std::vector<uint64_t> written;  // per ring
    std::vector<uint32_t> order;    // the ring of each batch of the stream's written part
    uint64_t batches = 0;
    uint64_t misses = 0;
  };
  // Runs the producers of the rings for `span` of the fake clock, ring r
  // taking `took[r]` per batch, each batch time off by up to `jitter` of it
  // either way (uniformly, from a fixed seed), while the consumers `readers`
  // read every batch at once. As the producer loop does, each ring asks for
  // its read-ahead hint when it begins a batch, and asks for work again at
  // once when another ring began one (the producers' wake-up).
  Simulated Simulate(const std::vector<Clock::duration>& took, Clock::duration span,
                     const std::vector<std::string>& readers, double jitter = 0) {
    return Simulate({Phase{took, span}}, readers, jitter);
  }
  // The same through `phases` in turn: the rings' batch times change.
  struct Phase {
    std::vector<Clock::duration> took;
    Clock::duration span;
  };
  Simulated Simulate(const std::vector<Phase>& phases, const std::vector<std::string>& readers,
                     double jitter = 0) {
    const std::vector<Clock::duration>& first = phases.front().took;
    Simulated out;
    out.written.assign(first.size(), 0);
    const Clock::time_point start = env_.now;
    Clock::time_point end = start;
    for (const Phase& p : phases) end += p.span;
    std::mt19937 random(1);
    std::uniform_real_distribution<double> off(-jitter, jitter);
    const auto took = [&](uint32_t ring) {
      Clock::time_point until = start;
      Clock::duration mean = phases.back().took[ring];
      for (const Phase& p : phases) {
        until += p.span;
        if (env_.now < until) {
          mean = p.took[ring];
          break;
        }
      }
      return std::chrono::duration_cast<Clock::duration>(mean * (1 + off(random)));
    };
    std::vector<std::optional<std::pair<Clock::time_point, uint32_t>>> busy(first.size());
    std::vector<std::optional<uint64_t>> hint(first.size());
    std::map<std::string, bool> asked;
    std::map<uint64_t, std::pair<uint32_t, uint32_t>> taken;  // first seq: ring, count
    while (env_.now < end) {
      // The producers begin what they may and the readers take what is
      // published, until neither moves (a released slot wakes the producers).
      for (bool moved = true; moved;) {
        moved = false;
        for (uint32_t r = 0; r < first.size(); ++r) {
          if (busy[r]) continue;
          const std::optional<SlotGrant> g = Begin(r);
          if (!g) continue;
          out.misses += hint[r].has_value() && *hint[r] != g->first_seq;
          hint[r] = s_->PredictNextBatch(r);
          busy[r] = std::make_pair(env_.now + took(r), g->slot);
          ++out.written[r];
          ++out.batches;
          taken[g->first_seq] = {r, g->count};
          moved = true;
        }
        for (const std::string& id : readers) {
          if (!asked[id]) s_->Next(id, ++request_id_);
          asked[id] = true;
          for (const proto::Message& m : Replies(id)) {
            asked[id] = false;
            const auto* b = std::get_if<proto::Batch>(&m);
            if (b == nullptr) continue;
            Release(id, *b);
            moved = true;
          }
        }
      }
      // The next commit.
      std::optional<uint32_t> next;
      for (uint32_t r = 0; r < first.size(); ++r) {
        if (busy[r] && (!next || busy[r]->first < busy[*next]->first)) next = r;
      }
      if (!next) {
        ADD_FAILURE() << "no ring is writing";
        break;
      }
      env_.now = busy[*next]->first;
      EXPECT_TRUE(s_->Commit(busy[*next]->second).ok());
      busy[*next].reset();
    }
    // Up to the first batch begun ahead for a ring that had not taken it
    // when the span ended (Note [Begun ahead]).
    uint64_t seq = taken.empty() ? 0 : taken.begin()->first;
    for (const auto& [first, ring_count] : taken) {
      if (first != seq) break;
      out.order.push_back(ring_count.first);
      seq = first + ring_count.second;
    }
    return out;
  }
  // Every segment of `r`'s batches lies on `ring`.
  static bool AllOn(const Read& r, uint32_t ring) {
    for (const proto::Batch& b : r.batches) {
      for (const Segment& s : b.segments) {
        if (s.ring != ring) return false;
      }
    }
    return true;
  }
};

TEST_F(PlacementTest, RoundRobinOverTheRingsWithReaders) {
  Make(Rings(3));
  MustJoin("a", On(0));
  MustJoin("c", On(2));
  EXPECT_EQ(Pump(), 8);
  EXPECT_EQ(placements, (std::vector<uint32_t>{0, 2, 0, 2, 0, 2, 0, 2}));
  // Each consumer reads the whole stream: half zero-copy from its own ring.
  const proto::Batch b0 = NextBatch("a");
  const proto::Batch b1 = NextBatch("a");
  ASSERT_EQ(b0.segments.size(), 1u);
  EXPECT_EQ(b0.segments[0].ring, 0u);
  EXPECT_EQ(b1.segments[0].ring, 2u);
  const nlohmann::json rings = Stats()["rings"];
  ASSERT_EQ(rings.size(), 3u);
  EXPECT_EQ(rings[0]["batches_written"], 4);
  EXPECT_EQ(rings[1]["batches_written"], 0);
  EXPECT_EQ(rings[2]["batches_written"], 4);
  EXPECT_EQ(rings[0]["samples_decoded"], 16);
  EXPECT_EQ(rings[0]["batches_local"], 1);
  EXPECT_EQ(rings[0]["batches_from_peers"], 1);
  EXPECT_EQ(rings[0]["peer_bytes"], 4 * 10);
  EXPECT_EQ(ConsumerStats("c")["ring"], 2);
}

TEST_F(PlacementTest, AProducersReadAheadIsItsOwnRingsNextBatch) {
  MakeWithTwoReaders(Rings(2));
  // Batches of 4: the stream's next is ring 0's (seq 0), then ring 1's (4).
  EXPECT_EQ(s_->PredictNextBatch(0), std::optional<uint64_t>(0));
  EXPECT_EQ(s_->PredictNextBatch(1), std::optional<uint64_t>(4));
  ASSERT_TRUE(Produce().has_value());  // seq 0 on ring 0
  EXPECT_EQ(s_->PredictNextBatch(0), std::optional<uint64_t>(8));
  EXPECT_EQ(s_->PredictNextBatch(1), std::optional<uint64_t>(4));
  // With readers on ring 1 only, ring 0 has no batch in sight.
  Make(Rings(2));
  MustJoin("b", On(1));
  EXPECT_EQ(s_->PredictNextBatch(0), std::nullopt);
  EXPECT_EQ(s_->PredictNextBatch(1), std::optional<uint64_t>(0));
  // A reader comes to ring 0, which takes seq 0: ring 1's hint missed (its
  // producer read seq 0's files for nothing), and the stats count it.
  MustJoin("a", On(0));
  ASSERT_TRUE(Begin(0));
  const std::optional<SlotGrant> b = Begin(1);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->first_seq, 4u);
  EXPECT_EQ(s_->PredictNextBatch(1), std::optional<uint64_t>(12));
  ASSERT_TRUE(Begin(0));
  ASSERT_TRUE(Begin(1));
  EXPECT_EQ(Stats()["rings"][0]["read_ahead_misses"], 0) << "ring 0 had no hint";
  EXPECT_EQ(Stats()["rings"][1]["read_ahead_misses"], 1);
}

// Round robin: the rings take the batches in turn, so a ring three times as
// slow as the other paces both. By demand the plan gives each ring a share
// of the stream that follows its speed once the batch times are measured
// (one cycle), so the node writes about twice as much; the read-ahead hints
// come true but for the batches that the first redrawn plan moved.
TEST_F(PlacementTest, ByDemandTheSharesFollowTheRingsSpeeds) {
  std::map<Placement, Simulated> runs;
  for (const Placement placement : {Placement::kRoundRobin, Placement::kDemand}) {
    SCOPED_TRACE(std::string(PlacementName(placement)));
    TestConfig t = Placed(Rings(2), placement);
    t.epoch_len = 1000;
    MakeWithTwoReaders(t);
    runs[placement] = Simulate({30ms, 10ms}, 3s, {"a", "b"});
    // Every batch begun but those still being written was committed.
    EXPECT_GE(Stats()["batches_written"].get<uint64_t>() + 2, runs[placement].batches);
  }
  const Simulated& rr = runs[Placement::kRoundRobin];
  const Simulated& demand = runs[Placement::kDemand];
  EXPECT_EQ(rr.misses, 0u);
  EXPECT_NEAR(static_cast<double>(rr.written[0]), static_cast<double>(rr.written[1]), 1);
  EXPECT_NEAR(static_cast<double>(rr.batches), 3000.0 / 30 * 2, 4);  // ring 0's pace
  // Rates 1/30 + 1/10 per ms; shares 4 and 12 of a cycle of 16.
  EXPECT_GE(demand.batches, 3000 / 30 + 3000 / 10 - 16);
  EXPECT_GE(demand.written[1], 2.8 * static_cast<double>(demand.written[0]));
  EXPECT_LE(demand.misses, 2u);
  const nlohmann::json rings = Stats()["rings"];
  EXPECT_EQ(
      rings[0]["read_ahead_misses"].get<uint64_t>() + rings[1]["read_ahead_misses"].get<uint64_t>(),
      demand.misses);
}

// Why the default window is 4 slots per ring: by demand a slow ring's
// batches take long and must be begun well ahead of their turn. Four rings,
// one three times as slow: with 2 slots per ring the producers wait for a
// slot a tenth of the time; with 4 hardly ever. The node writes over 90 %
// of what the rings could with either.
TEST_F(PlacementTest, ByDemandASlowRingNeedsSlotsAhead) {
  std::map<uint32_t, Simulated> runs;
  std::map<uint32_t, double> blocked_s;
  for (const uint32_t per_ring : {2u, 4u}) {
    const std::vector<std::string> readers = MakeFourRingsWithReaders(Placement::kDemand, per_ring);
    runs[per_ring] = Simulate({10ms, 10ms, 10ms, 30ms}, 3s, readers);
    blocked_s[per_ring] = Stats()["producer_blocked_s"].get<double>();
  }
  constexpr double kIdeal = 3000.0 / 10 * 3 + 3000.0 / 30;  // every ring busy
  EXPECT_GT(blocked_s[2], 0.2);
  EXPECT_LT(blocked_s[4], 0.05);
  EXPECT_GT(static_cast<double>(runs[2].batches), 0.9 * kIdeal);
  EXPECT_GT(static_cast<double>(runs[4].batches), 0.9 * kIdeal);
}

// Note [Begun ahead]: four rings of equal speed whose batch times vary by
// up to 40 % either way write over 95 % of what four rings on their own
// would (about 90 % when each ring's batch was begun only when it asked),
// and wait for their turn under 5 % of the time (8-10 % so).
TEST_F(PlacementTest, RingsWhoseBatchTimesVaryDoNotHoldEachOtherBack) {
  for (const Placement placement : {Placement::kRoundRobin, Placement::kDemand}) {
    SCOPED_TRACE(std::string(PlacementName(placement)));
    const std::vector<std::string> readers = MakeFourRingsWithReaders(placement, 4);
    const Simulated s = Simulate({10ms, 10ms, 10ms, 10ms}, 10s, readers, /*jitter=*/0.4);
    EXPECT_GT(static_cast<double>(s.batches), 0.95 * 4000);
    for (uint32_t r = 0; r < 4; ++r) {
      EXPECT_LT(Stats()["rings"][r]["turn_wait_s"].get<double>(), 0.05 * 10) << "ring " << r;
    }
  }
}

// By demand, rings of equal speed are placed as by round robin, and the
// hints never miss; so are rings whose batch times are not measured yet,
// and rings whose shares lie less than kPlanHysteresis from the round
// robin's (10 and 12 ms a batch: 8.7 and 7.3 of a cycle of 16).
TEST_F(PlacementTest, ByDemandEqualRingsAreTheRoundRobin) {
  MakeWithTwoReaders(Placed(Rings(3)));
  EXPECT_EQ(s_->PredictNextBatch(0), std::optional<uint64_t>(0));
  EXPECT_EQ(s_->PredictNextBatch(1), std::optional<uint64_t>(4));
  EXPECT_EQ(s_->PredictNextBatch(2), std::nullopt) << "ring 2 has no readers";
  TestConfig t = Placed(Rings(2));
  t.epoch_len = 1000;
  MakeWithTwoReaders(t);
  const Simulated equal = Simulate({10ms, 10ms}, 1s, {"a", "b"});
  EXPECT_EQ(equal.misses, 0u);
  EXPECT_NEAR(static_cast<double>(equal.batches), 200, 2);
  EXPECT_EQ(Stats()["placement"], "demand");
  for (size_t i = 0; i < equal.order.size(); ++i) EXPECT_EQ(equal.order[i], i % 2) << i;
  MakeWithTwoReaders(t);
  const Simulated close = Simulate({10ms, 12ms}, 1s, {"a", "b"});
  EXPECT_EQ(close.misses, 0u);
  for (size_t i = 0; i < close.order.size(); ++i) EXPECT_EQ(close.order[i], i % 2) << i;
}

// By demand a plan drawn for rings of unequal speed goes back to equal
// shares once their speeds are equal again: the plan follows the shares the
// rates give within a batch of its cycle (10 and 7.7 ms a batch: 7 and 9
// of 16; then 10 and 10: 8 and 8), however it got there.
TEST_F(PlacementTest, ByDemandAPlanReturnsToEqualSharesWhenTheSpeedsDo) {
  TestConfig t = Placed(Rings(2));
  t.epoch_len = 100000;
  MakeWithTwoReaders(t);
  const Simulated s =
      Simulate({{{10ms, 5ms}, 1s}, {{10ms, 7700us}, 2s}, {{10ms, 10ms}, 3s}}, {"a", "b"});
  ASSERT_GE(s.order.size(), 160u);
  const auto tail = s.order.end() - 160;  // the last ten cycles
  EXPECT_EQ(std::count(tail, s.order.end(), 0u), 80) << "ring 0's share of the last 160";
}

// By demand a ring without readers decodes nothing, and a group's batches
// still go to the ring of the rank that reads them.
TEST_F(PlacementTest, ByDemandKeepsDecodeWithReadersAndGroupsOnTheirRanksRings) {
  Make(Placed(Rings(2)));
  MustJoin("a", On(1));
  EXPECT_EQ(Pump(), 8);
  EXPECT_EQ(placements, std::vector<uint32_t>(8, 1));
  Make(Placed(TwoRingsOf(48)));
  MustJoin("r0", Rank(0, 0));
  MustJoin("r1", Rank(1, 1));
  std::map<std::string, Read> read = DriveToEnd({"r0", "r1"});
  EXPECT_TRUE(AllOn(read["r0"], 0));
  EXPECT_TRUE(AllOn(read["r1"], 1));
  EXPECT_EQ(Stats()["rings"][0]["samples_decoded"], 24);
  EXPECT_EQ(Stats()["rings"][1]["samples_decoded"], 24);
}

TEST_F(PlacementTest, DecodeFollowsReadersOnOneRing) {
  Make(Rings(2));
  MustJoin("a", On(1));
  MustJoin("b", On(1));
  EXPECT_EQ(Pump(), 8);
  EXPECT_EQ(placements, std::vector<uint32_t>(8, 1));
  // The producer of ring 0 waits: the next batch is ring 1's.
  Result<std::optional<Scheduler::Work>> w = s_->TryBeginWork(0);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_FALSE(w->has_value());
  const proto::Batch b = NextBatch("a");
  ASSERT_EQ(b.segments.size(), 1u);
  EXPECT_EQ(b.segments[0].ring, 1u);
  EXPECT_EQ(Stats()["rings"][1]["batches_local"], 1);
  EXPECT_EQ(Stats()["rings"][1]["peer_bytes"], 0);
}

TEST_F(PlacementTest, EverySampleOnceAndEveryConsumerGetsTheWholeStream) {
  for (const Placement placement : {Placement::kRoundRobin, Placement::kDemand}) {
    SCOPED_TRACE(std::string(PlacementName(placement)));
    MakeWithTwoReaders(Placed(TwoRingsOf(32), placement));
    std::map<std::string, Read> read = DriveToEnd({"a", "b"});
    std::vector<int64_t> want;
    for (uint64_t seq = 0; seq < 32; ++seq) want.push_back(IndexOf(seq));
    EXPECT_EQ(read["a"].indices, want);
    EXPECT_EQ(read["b"].indices, want);
    const nlohmann::json rings = Stats()["rings"];
    EXPECT_EQ(
        rings[0]["samples_decoded"].get<uint64_t>() + rings[1]["samples_decoded"].get<uint64_t>(),
        32u);
    // An equal share: by demand too, since the fake clock stands still here
    // (no ring is faster).
    EXPECT_EQ(rings[0]["samples_decoded"], 16);
    EXPECT_EQ(Stats()["batches_written"], 8);
  }
}

// Batches the placed producers commit out of order are published in order.
TEST_F(PlacementTest, OutOfOrderCommitsPublishInOrder) {
  MakeWithTwoReaders(Rings(2));
  Result<std::optional<Scheduler::Work>> w0 = s_->TryBeginWork(0);
  ASSERT_TRUE(w0.ok() && w0->has_value()) << w0.status().ToString();
  Result<std::optional<Scheduler::Work>> w1 = s_->TryBeginWork(1);
  ASSERT_TRUE(w1.ok() && w1->has_value()) << w1.status().ToString();
  const SlotGrant* first = &(*w0)->grant;
  const SlotGrant* second = &(*w1)->grant;
  EXPECT_EQ(first->first_seq, 0u);
  EXPECT_EQ(second->first_seq, 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    first->indices[i] = IndexOf(i);
    second->indices[i] = IndexOf(4 + i);
  }
  ASSERT_TRUE(s_->Commit(second->slot).ok());
  EXPECT_TRUE(Next("a").empty()) << "seq 0 is not published yet";
  ASSERT_TRUE(s_->Commit(first->slot).ok());
  std::vector<proto::Message> r = Replies("a");
  ASSERT_EQ(r.size(), 1u) << Describe(r);
  EXPECT_EQ(Describe(r), "0+4");
  EXPECT_EQ(Describe(NextBatch("a")), "4+4");
  EXPECT_TRUE(Next("a").empty()) << "nothing beyond seq 8 yet";
}

// Note [Begun ahead]: when a ring asks for work, the stream's next batches
// placed on busy rings are begun for them, one each; the ring takes its own
// first when it asks, and its read-ahead hint is that batch. A ring still
// waits for its turn behind one two batches late: the wait is its
// turn_wait_s (a wait in progress included). A wait for a free slot is not
// one (producer_blocked_s).
TEST_F(PlacementTest, BusyRingsBatchesAreBegunAheadAndATurnWaitIsCounted) {
  MakeTwoRingsInTurn(8);
  // Ring 0 writes a batch in 10 ms, ring 1 in 40.
  const std::optional<SlotGrant> b1 = RingZeroWaitsForItsTurn();
  ASSERT_TRUE(b1);
  env_.now += 5ms;
  EXPECT_DOUBLE_EQ(TurnWait(0), 0.005) << "the wait so far";
  env_.now += 5ms;
  ASSERT_TRUE(s_->Commit(b1->slot).ok());
  const std::optional<SlotGrant> b3 = Begin(1);
  ASSERT_TRUE(b3);
  EXPECT_EQ(b3->first_seq, 12u);
  const std::optional<SlotGrant> b6 = Begin(0);  // seq 20 begun for ring 1 first
  ASSERT_TRUE(b6);
  EXPECT_EQ(b6->first_seq, 24u);
  env_.now += 1s;
  EXPECT_DOUBLE_EQ(TurnWait(0), 0.010);
  EXPECT_DOUBLE_EQ(TurnWait(1), 0.0);
  EXPECT_EQ(Stats()["rings"][1]["read_ahead_misses"], 0);

  // A ring without readers never has a turn: it does not wait for one.
  TestConfig t = Placed(Rings(2), Placement::kRoundRobin);
  t.epoch_len = 1000;
  Make(t);
  MustJoin("b", On(1));
  EXPECT_FALSE(Begin(0));
  env_.now += 1s;
  EXPECT_DOUBLE_EQ(TurnWait(0), 0.0);

  MakeTwoRingsInTurn(2);
  FillTheWindow();
  EXPECT_DOUBLE_EQ(TurnWait(0), 0.0);
  EXPECT_GT(Stats()["producer_blocked_s"].get<double>(), 0.0);
}

// A stopped server's producers wait for nothing: the waits in progress
// end at Stop, and neither turn_wait_s nor producer_blocked_s grows after it.
// Note [Lag policy]: a ring still writing the stream's next batch, with the
// batches after it filling the window (they publish in order), holds the
// producer up; the consumers waiting for that batch do not. No policy
// applies to them, and the log names the ring, not a consumer.
TEST_F(PlacementTest, ASlowRingIsNotBlamedOnTheConsumers) {
  for (LagPolicy policy : {LagPolicy::kSkip, LagPolicy::kEvict}) {
    SCOPED_TRACE(policy == LagPolicy::kSkip ? "skip" : "evict");
    TestConfig t = Placed(Rings(2), Placement::kRoundRobin);
    t.epoch_len = 1000;
    t.window = 2;
    t.lag_policy = policy;
    t.lag_timeout = 100ms;
    MakeWithTwoReaders(t);
    const std::optional<SlotGrant> slow = Begin(0);  // seq 0, not finished
    const std::optional<SlotGrant> b1 = Begin(1);    // seq 4
    ASSERT_TRUE(slow && b1);
    ASSERT_TRUE(s_->Commit(b1->slot).ok());
    EXPECT_TRUE(Next("a").empty()) << "seq 0 is not written yet";
    EXPECT_TRUE(Next("b").empty());
    EXPECT_FALSE(Begin(1)) << "no slot free";
    testing::LogCapture log;
    TickAfter(150ms);
    EXPECT_EQ(Stats()["skip_events"], 0);
    EXPECT_EQ(Stats()["consumers_evicted"], 0);
    EXPECT_EQ(log.Count("a consumer holds batches"), 0) << log.text();
    EXPECT_EQ(log.Count("ring 0 still writes seqs [0, 4)"), 1) << log.text();
    ASSERT_TRUE(s_->Commit(slow->slot).ok());
    EXPECT_EQ(Describe(Replies("a")), "0+4") << "each gets the batch it waited for";
    EXPECT_EQ(Describe(Replies("b")), "0+4");
  }
}

TEST_F(PlacementTest, WaitsEndWhenTheServerStops) {
  MakeTwoRingsInTurn(8);
  ASSERT_TRUE(RingZeroWaitsForItsTurn());
  env_.now += 5ms;
  s_->Stop();
  EXPECT_DOUBLE_EQ(TurnWait(0), 0.005);
  env_.now += 1s;
  EXPECT_DOUBLE_EQ(TurnWait(0), 0.005);

  MakeTwoRingsInTurn(2);
  FillTheWindow();
  s_->Stop();
  EXPECT_DOUBLE_EQ(Stats()["producer_blocked_s"].get<double>(), 0.010);
  env_.now += 1s;
  EXPECT_DOUBLE_EQ(Stats()["producer_blocked_s"].get<double>(), 0.010);
}

// Note [Begun ahead]: not where the rings read one sequential reader
// (SchedulerConfig::begin_ahead false, tar shards): each ring begins its own
// batches, in the stream's order.
TEST_F(PlacementTest, NothingIsBegunAheadWhereTheRingsReadInStreamOrder) {
  TestConfig t = Placed(Rings(2), Placement::kRoundRobin);
  t.epoch_len = 1000;
  t.begin_ahead = false;
  MakeWithTwoReaders(t);
  const std::optional<SlotGrant> b0 = Begin(0);
  const std::optional<SlotGrant> b1 = Begin(1);
  ASSERT_TRUE(b0 && b1);
  EXPECT_EQ(Stats()["slots"]["writing"], 2) << "seq 8 not begun for ring 0";
  EXPECT_EQ(s_->PredictNextBatch(0), std::optional<uint64_t>(8));
  ASSERT_TRUE(s_->Commit(b1->slot).ok());
  EXPECT_FALSE(Begin(1)) << "seq 8 is ring 0's, which has not begun it";
  ASSERT_TRUE(s_->Commit(b0->slot).ok());
  const std::optional<SlotGrant> b2 = Begin(0);
  ASSERT_TRUE(b2);
  EXPECT_EQ(b2->first_seq, 8u);
  const std::optional<SlotGrant> b3 = Begin(1);
  ASSERT_TRUE(b3);
  EXPECT_EQ(b3->first_seq, 12u);
}

// Note [Begun ahead]: a ring's producer waiting for its turn behind a ring
// that has a batch begun ahead is woken when that ring takes it: the ring
// is busy again, so the waiting ring begins the ring's next batch ahead for
// it, then its own. Without that wake-up it would sleep until its deadline.
TEST_F(PlacementTest, AProducerWaitingForItsTurnIsWokenWhenTheRingAheadTakesItsBatch) {
  TestConfig t = Placed(Rings(2), Placement::kRoundRobin);
  t.epoch_len = 1000;
  MakeWithTwoReaders(t);
  // As in BusyRingsBatchesAreBegunAheadAndATurnWaitIsCounted: ring 1 writes
  // seq 4 and has seq 12 begun ahead; ring 0 has written 0, 8 and 16.
  const std::optional<SlotGrant> b1 = [&] {
    const std::optional<SlotGrant> b0 = Begin(0);
    std::optional<SlotGrant> b = Begin(1);
    EXPECT_TRUE(b0 && s_->Commit(b0->slot).ok());
    for (uint64_t seq : {8u, 16u}) {
      const std::optional<SlotGrant> g = Begin(0);
      EXPECT_TRUE(g && g->first_seq == seq && s_->Commit(g->slot).ok());
    }
    return b;
  }();
  ASSERT_TRUE(b1);
  const auto waited_again = [&](uint64_t waits) {
    const Clock::time_point give_up = Clock::now() + 10s;
    while (s_->ProducerWaitsForTesting() == waits && Clock::now() < give_up) {
      std::this_thread::yield();
    }
    return s_->ProducerWaitsForTesting() > waits;
  };
  const uint64_t waits = s_->ProducerWaitsForTesting();
  Result<Scheduler::Work> got = InternalError("not yet");
  const Clock::time_point deadline = Clock::now() + 10s;
  Clock::time_point returned;
  std::thread ring0([&] {
    got = s_->BeginWork(0, deadline);
    returned = Clock::now();
  });
  ASSERT_TRUE(waited_again(waits)) << "seq 20 is ring 1's, which has seq 12 begun ahead";
  const uint64_t before_commit = s_->ProducerWaitsForTesting();
  ASSERT_TRUE(s_->Commit(b1->slot).ok());
  ASSERT_TRUE(waited_again(before_commit)) << "woken by the commit, still not its turn";
  const std::optional<SlotGrant> b3 = Begin(1);
  ASSERT_TRUE(b3);
  EXPECT_EQ(b3->first_seq, 12u);
  ring0.join();
  EXPECT_LT(returned, deadline - 5s) << "woken, not granted once its wait timed out";
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->grant.first_seq, 24u) << "seq 20 begun ahead for ring 1 first";
  EXPECT_EQ(s_->PredictNextBatch(1), std::optional<uint64_t>(20));
}

// A DDP job with a rank per GPU and B equal to the producer batch: one group
// for the server, an exact split with equal counts, and every rank fed only
// from its own ring.
TEST_F(PlacementTest, GroupRanksOnTwoRingsReadOnlyTheirOwnRing) {
  Make(TwoRingsOf(48));
  MustJoin("r0", Rank(0, 0));
  MustJoin("r1", Rank(1, 1));
  std::map<std::string, Read> read = DriveToEnd({"r0", "r1"});
  EXPECT_EQ(read["r0"].batches.size(), 6u);
  EXPECT_EQ(read["r1"].batches.size(), 6u);
  EXPECT_TRUE(AllOn(read["r0"], 0));
  EXPECT_TRUE(AllOn(read["r1"], 1));
  std::set<int64_t> all(read["r0"].indices.begin(), read["r0"].indices.end());
  all.insert(read["r1"].indices.begin(), read["r1"].indices.end());
  EXPECT_EQ(all.size(), 48u) << "the ranks split the stream exactly";
  const nlohmann::json rings = Stats()["rings"];
  EXPECT_EQ(rings[0]["batches_from_peers"], 0);
  EXPECT_EQ(rings[1]["batches_from_peers"], 0);
  EXPECT_EQ(rings[0]["peer_bytes"], 0);
  EXPECT_EQ(rings[0]["samples_decoded"], 24);
  EXPECT_EQ(rings[1]["samples_decoded"], 24);
}

// With B smaller than the producer batch a rank also reads from the other
// ring, through copies; the split stays exact.
TEST_F(PlacementTest, ARankNotJoinedYetHasItsBatchesOnItsExpectedRing) {
  Make(TwoRingsOf(48));
  // The producer starts with rank 0 alone (min_consumers 1): rank 1's
  // batches go to ring 1, where rank 1 of a rank-per-GPU job will be.
  MustJoin("r0", Rank(0, 0));
  EXPECT_EQ(Pump(), 8);
  EXPECT_EQ(placements, (std::vector<uint32_t>{0, 1, 0, 1, 0, 1, 0, 1}));
  MustJoin("r1", Rank(1, 1));
  std::map<std::string, Read> read = DriveToEnd({"r0", "r1"});
  EXPECT_TRUE(AllOn(read["r0"], 0));
  EXPECT_TRUE(AllOn(read["r1"], 1));
  EXPECT_EQ(Stats()["rings"][1]["peer_bytes"], 0);
}

TEST_F(PlacementTest, GroupWithSmallerBatchesStaysExact) {
  Make(TwoRingsOf(48));
  MustJoin("r0", Rank(0, 0, 2));
  MustJoin("r1", Rank(1, 1, 2));
  std::map<std::string, Read> read = DriveToEnd({"r0", "r1"});
  EXPECT_EQ(read["r0"].batches.size(), read["r1"].batches.size());
  std::vector<int64_t> all = read["r0"].indices;
  all.insert(all.end(), read["r1"].indices.begin(), read["r1"].indices.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want;
  for (uint64_t seq = 0; seq < 48; ++seq) want.push_back(IndexOf(seq));
  EXPECT_EQ(all, want);
}

// Two DDP jobs on the same two rings: each gets the whole stream, from one decode.
TEST_F(PlacementTest, TwoGroupsEachGetTheWholeStreamFromOneDecode) {
  Make(TwoRingsOf(32));
  MustJoin("a0", Rank(0, 0));
  MustJoin("a1", Rank(1, 1));
  JoinOptions b0 = Rank(0, 0);
  b0.group = "h";
  JoinOptions b1 = Rank(1, 1);
  b1.group = "h";
  MustJoin("b0", b0);
  MustJoin("b1", b1);
  std::map<std::string, Read> read = DriveToEnd({"a0", "a1", "b0", "b1"});
  for (const char* job : {"a", "b"}) {
    std::set<int64_t> all(read[std::string(job) + "0"].indices.begin(),
                          read[std::string(job) + "0"].indices.end());
    all.insert(read[std::string(job) + "1"].indices.begin(),
               read[std::string(job) + "1"].indices.end());
    EXPECT_EQ(all.size(), 32u) << job;
  }
  EXPECT_EQ(Stats()["batches_written"], 8) << "one decode for both jobs";
}

TEST_F(PlacementTest, MinConsumersCountsTheServersConsumers) {
  TestConfig t = Rings(2);
  t.min_consumers = 2;
  Make(t);
  MustJoin("a", On(0));
  EXPECT_EQ(Pump(), 0) << "one consumer of 2";
  MustJoin("b", On(1));
  EXPECT_EQ(Pump(), 8);
}

TEST_F(PlacementTest, MaxConsumersCountsTheServersConsumers) {
  TestConfig t = Rings(2);
  t.max_consumers = 2;
  MakeWithTwoReaders(t);
  Result<Scheduler::Admission> c = Join("c", On(0));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
}

TEST_F(PlacementTest, AGroupLargerThanMaxConsumersIsRefused) {
  TestConfig t = Rings(2);
  t.max_consumers = 2;
  Make(t);
  Result<Scheduler::Admission> a = Join("r0", Rank(0, 0, 1, 3));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("cannot form"), std::string::npos) << a.status().message();
}

TEST_F(PlacementTest, PlacedProducersStopAtTheStreamEnd) {
  Make(TwoRingsOf(16));
  MustJoin("a", On(0));
  EXPECT_EQ(Pump(), 4);
  // The stream is begun to its end: neither ring's producer has anything
  // of it to write (Note [Resume]: they stay, for a lane).
  for (uint32_t ring : {0u, 1u}) {
    Result<std::optional<Scheduler::Work>> w = s_->TryBeginWork(ring);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_FALSE(w->has_value());
  }
}

}  // namespace
}  // namespace batchcast
