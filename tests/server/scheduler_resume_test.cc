// Unit tests of Note [Resume] (server/src/scheduler.h, lane.h): RESUME puts
// a consumer (a group) exactly at a saved place: in the stream it reads on
// from there; outside it (behind the ring, ahead of it) the stream moves
// there when nobody else reads it, else the lane is filled for it from
// spare capacity only (and one batch in kLaneShare when there is none),
// never pinning the ring, until it merges. Refusals name what is wrong.
// The built-in producer's side is TryBeginWork (config.replay).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "scheduler_fixture.h"

namespace batchcast {
namespace {

using namespace scheduler_test;

constexpr char kStream[] = "source=test;seed=1;epoch_len=16";

class ResumeTest : public SchedulerTest {
 protected:
  // The fixture's defaults (window 4 x batch 4, epochs of 16) with the
  // built-in producer's replay and `lane_slots` resume slots.
  void MakeReplay(uint32_t lane_slots = 4, TestConfig t = {}) {
    Make(t);
    config_.stream = kStream;
    config_.replay = true;
    config_.resume_slots = lane_slots;
    s_ = std::make_unique<Scheduler>(config_, &env_);
  }

  // The built-in producer's next batch (indices IndexOf(seq)), committed:
  // "S<first>" for a shared batch, "L<first>" for the lane's, "" when it
  // would wait. With several rings (Note [Placement]) each ring's producer
  // asks in turn; the first that gets work writes it.
  std::string Work() {
    Result<std::optional<Scheduler::Work>> w = BeginOnAnyRing();
    if (!w.ok() || !w->has_value()) return "";
    const SlotGrant& g = (*w)->grant;
    EXPECT_EQ((*w)->epoch, g.first_seq / config_.epoch_len);
    uint32_t valid = 0;
    for (uint32_t i = 0; i < g.count; ++i) {
      if (dropped.count(g.first_seq + i) == 0) g.indices[valid++] = IndexOf(g.first_seq + i);
    }
    EXPECT_TRUE(s_->Commit(g.slot, valid).ok());
    return ((*w)->lane ? "L" : "S") + std::to_string(g.first_seq);
  }
  // Work() until the producer would wait; the batches written.
  std::vector<std::string> Fill(int max = 64) {
    std::vector<std::string> out;
    for (std::string w = Work(); !w.empty() && max-- > 0; w = Work()) out.push_back(w);
    return out;
  }

  // One reply as "e<epoch>/<step>:<first seq>+<n>" (its indices checked to
  // be IndexOf of consecutive seqs) or "E<epoch>", or Describe's text.
  static std::string Text(const proto::Message& m) {
    if (const auto* b = std::get_if<proto::Batch>(&m)) {
      for (size_t i = 0; i < b->indices.size(); ++i) {
        EXPECT_EQ(b->indices[i], IndexOf(b->first_seq + i));
      }
      return "e" + std::to_string(b->epoch) + "/" + std::to_string(b->step) + ":" +
             std::to_string(b->first_seq) + "+" + std::to_string(b->indices.size());
    }
    if (const auto* e = std::get_if<proto::EndOfEpoch>(&m)) return "E" + std::to_string(e->epoch);
    return Describe(m);
  }

  // A place of kStream.
  static proto::Resume Place(uint32_t epoch, uint32_t step, uint64_t epoch_start,
                             uint64_t next_seq) {
    return proto::Resume{kStream, epoch, step, epoch_start, next_seq, 0, 0};
  }

  // The place after a reply, as the client computes it (Consumer::Next).
  static proto::Resume PlaceAfter(const proto::Message& m, uint32_t world_size = 0) {
    proto::Resume r;
    r.stream = kStream;
    r.world_size = world_size;
    if (const auto* b = std::get_if<proto::Batch>(&m)) {
      r.epoch = b->epoch;
      r.step = b->step + 1;
      r.epoch_start = b->epoch_start;
      r.next_seq = b->next_seq;
      r.skipped = b->skipped;
    } else if (const auto* e = std::get_if<proto::EndOfEpoch>(&m)) {
      r.epoch = e->epoch + 1;
      r.epoch_start = e->next_epoch_start;
      r.next_seq = e->next_seq;
      r.skipped = e->skipped;
    }
    return r;
  }

  // Reads `n` replies as `id` (one NEXT in flight, batches released at
  // once), producing with Work() whenever it waits; their Texts. `last`
  // gets the last reply.
  std::vector<std::string> Read(const std::string& id, int n, proto::Message* last = nullptr) {
    std::vector<std::string> out;
    for (int turn = 0; turn < 400 && static_cast<int>(out.size()) < n; ++turn) {
      std::vector<proto::Message> r = Next(id);
      while (r.empty()) {
        if (Work().empty()) return out;  // stuck
        r = Replies(id);
      }
      for (const proto::Message& m : r) {
        out.push_back(Text(m));
        if (const auto* b = std::get_if<proto::Batch>(&m)) Release(id, *b);
        if (last != nullptr) *last = m;
      }
    }
    return out;
  }

  // On the rings of `t` (replay, 4 resume slots): reader b on ring 1 reads
  // 3 batches and is killed, then reader a (ring 0) reads 30 replies, so b's
  // place is behind the ring. b's last reply.
  proto::Message ReaderOfRingOneKilledBehind(const TestConfig& t) {
    MakeReplay(4, t);
    MustJoin("a", {});
    MustJoin("b", {.ring = 1});
    proto::Message last;
    EXPECT_EQ(Read("b", 3, &last), Expected(4, 0, 3));
    s_->Remove("b", "killed");
    EXPECT_EQ(Read("a", 30), Expected(4, 0, 30));
    return last;
  }

  // What a consumer of batch `b` joined at seq 0 reads, from its `skip`-th
  // reply on, `n` replies (drop_last; epochs of 16).
  static std::vector<std::string> Expected(uint32_t b, int skip, int n) {
    std::vector<std::string> all;
    for (uint32_t e = 0; static_cast<int>(all.size()) < skip + n; ++e) {
      for (uint32_t s = 0; s < 16 / b; ++s) {
        all.push_back("e" + std::to_string(e) + "/" + std::to_string(s) + ":" +
                      std::to_string(16 * e + s * b) + "+" + std::to_string(b));
      }
      all.push_back("E" + std::to_string(e));
    }
    return std::vector<std::string>(all.begin() + skip, all.begin() + skip + n);
  }

  Status Resume(const std::string& id, const proto::Resume& place) { return s_->Resume(id, place); }

  // "a" and "b" join; b reads `b_batches` and is killed; a reads `a_batches`
  // (the ring moves beyond b's place); "b2" joins and resumes at b's place,
  // behind the ring.
  void ResumeBehindTheRing(int b_batches, int a_batches) {
    MustJoin("a", {});
    MustJoin("b", {});
    proto::Message last;
    Read("b", b_batches, &last);
    s_->Remove("b", "killed");
    Read("a", a_batches);
    MustJoin("b2", {.confirm = false});
    ASSERT_TRUE(Resume("b2", PlaceAfter(last)).ok());
  }
  nlohmann::json Lane() { return Stats()["resume_lane"]; }
};

TEST_F(ResumeTest, InTheRingItReadsOnFromItsPlace) {
  MakeReplay();
  MustJoin("b", {.batch = 3});
  proto::Message last;
  EXPECT_EQ(Read("b", 3, &last), Expected(3, 0, 3));  // b dies here
  s_->Remove("b", "killed");
  MustJoin("b2", {.batch = 3, .confirm = false});
  ASSERT_TRUE(Resume("b2", PlaceAfter(last)).ok());
  EXPECT_EQ(Read("b2", 8), Expected(3, 3, 8));  // the rest of epoch 0, then epoch 1
  EXPECT_EQ(Lane()["owners"], 0);
}

TEST_F(ResumeTest, BehindTheRingTheLaneCatchesUpFromSpareCapacityAndMerges) {
  MakeReplay();
  MustJoin("a", {});
  MustJoin("b", {});
  proto::Message last;
  EXPECT_EQ(Read("b", 3, &last), Expected(4, 0, 3));
  s_->Remove("b", "killed");
  // `a` reads on: the ring moves beyond b's place.
  EXPECT_EQ(Read("a", 30), Expected(4, 0, 30));
  MustJoin("b2", {.confirm = false});
  ASSERT_TRUE(Resume("b2", PlaceAfter(last)).ok());
  EXPECT_EQ(ConsumerStats("b2")["resumed"], "lane");
  // The shared stream is written while it may be (up to the window ahead of
  // `a`); then the producer would wait, so it fills the lane for b2 from its
  // place (seq 12) on, as far as b2's pins allow (4 slots).
  std::vector<std::string> filled = Fill();
  ASSERT_GE(filled.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(filled.end() - 4, filled.end()),
            (std::vector<std::string>{"L12", "L16", "L20", "L24"}));
  for (size_t i = 0; i + 4 < filled.size(); ++i) EXPECT_EQ(filled[i][0], 'S') << filled[i];
  // b2 reads its past exactly, then merges where `a` stands (seq 96).
  EXPECT_EQ(Read("b2", 30), Expected(4, 3, 30));
  EXPECT_EQ(Lane()["merges"], 1);
  EXPECT_EQ(ConsumerStats("b2")["resumed"], "stream");
  // Both now read the one stream: the window holds them together.
  EXPECT_EQ(Read("a", 5), Expected(4, 30, 5));
  EXPECT_EQ(Read("b2", 5), Expected(4, 33, 5));
}

// On two rings placing batches by demand the lane is still filled for the
// resumed reader's ring from spare capacity, and the reader merges exactly.
TEST_F(ResumeTest, ByDemandOnTwoRingsTheLaneCatchesUpAndMerges) {
  TestConfig t;
  t.rings = 2;
  t.placement = Placement::kDemand;
  const proto::Message last = ReaderOfRingOneKilledBehind(t);
  MustJoin("b2", {.confirm = false, .ring = 1});
  ASSERT_TRUE(Resume("b2", PlaceAfter(last)).ok());
  EXPECT_EQ(ConsumerStats("b2")["resumed"], "lane");
  EXPECT_EQ(Read("b2", 30), Expected(4, 3, 30));
  EXPECT_EQ(Lane()["merges"], 1);
  EXPECT_EQ(Read("a", 5), Expected(4, 30, 5));
  EXPECT_EQ(Read("b2", 5), Expected(4, 33, 5));
  EXPECT_GT(Stats()["rings"][1]["batches_written"].get<int>(), 0) << "the lane's, on b2's ring";
}

// Note [Begun ahead]: a ring's producer that waited for its turn stops
// counting the wait (its stats' turn_wait_s) once it begins the lane's work.
TEST_F(ResumeTest, ARingThatWaitedForItsTurnStopsWaitingWhenItBeginsLaneWork) {
  TestConfig t;
  t.rings = 2;
  const proto::Message last = ReaderOfRingOneKilledBehind(t);
  MustJoin("c", {.ring = 1});  // ring 1 has a reader again, so turns
  EXPECT_EQ(Read("c", 3).size(), 3u);
  const auto turn_wait = [&] { return Stats()["rings"][1]["turn_wait_s"].get<double>(); };
  Result<std::optional<Scheduler::Work>> none = s_->TryBeginWork(1);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value()) << "the stream's next batch is ring 0's";
  env_.now += std::chrono::milliseconds(10);
  EXPECT_DOUBLE_EQ(turn_wait(), 0.010);
  MustJoin("b2", {.confirm = false, .ring = 1});
  ASSERT_TRUE(Resume("b2", PlaceAfter(last)).ok());
  ASSERT_EQ(ConsumerStats("b2")["resumed"], "lane");
  Result<std::optional<Scheduler::Work>> lane = s_->TryBeginWork(1);
  ASSERT_TRUE(lane.ok() && lane->has_value());
  EXPECT_TRUE((*lane)->lane);
  EXPECT_EQ((*lane)->grant.first_seq, 12u) << "b2's place";
  env_.now += std::chrono::seconds(1);
  EXPECT_DOUBLE_EQ(turn_wait(), 0.010) << "its wait ended when it began the lane's batch";
}

// The lane has one owner at a time; the next resumed reader behind the ring
// waits in line. When the owner leaves mid-catch-up (killed again), the
// lane goes to the next, which reads its own past exactly; the reader of
// the shared stream never notices.
TEST_F(ResumeTest, WhenTheLaneOwnerLeavesTheNextInLineCatchesUpExactly) {
  MakeReplay();
  MustJoin("a", {});
  MustJoin("b", {});
  MustJoin("c", {});
  proto::Message b_last, c_last;
  EXPECT_EQ(Read("b", 2, &b_last), Expected(4, 0, 2));
  EXPECT_EQ(Read("c", 3, &c_last), Expected(4, 0, 3));
  s_->Remove("b", "killed");
  s_->Remove("c", "killed");
  EXPECT_EQ(Read("a", 30), Expected(4, 0, 30));
  MustJoin("b2", {.confirm = false});
  MustJoin("c2", {.confirm = false});
  ASSERT_TRUE(Resume("b2", PlaceAfter(b_last)).ok());
  ASSERT_TRUE(Resume("c2", PlaceAfter(c_last)).ok());
  EXPECT_EQ(ConsumerStats("b2")["resumed"], "lane");
  EXPECT_EQ(ConsumerStats("c2")["resumed"], "waiting");
  EXPECT_EQ(Read("b2", 3), Expected(4, 2, 3));
  s_->Remove("b2", "killed again");
  EXPECT_EQ(Read("c2", 30), Expected(4, 3, 30)) << "its own past, then the stream";
  EXPECT_EQ(ConsumerStats("c2")["resumed"], "stream");
  EXPECT_EQ(Lane()["owners"], 2);
  EXPECT_EQ(Lane()["merges"], 1);
  EXPECT_EQ(Read("a", 5), Expected(4, 30, 5));
}

// A reader in the lane pins no slot of the ring, so a lag policy never
// holds the shared stream for it, nor skips or evicts it: while the policy
// acts on the reader of the shared stream that fills the window and stops,
// the resumed reader still gets its past exactly.
TEST_F(ResumeTest, TheLagPolicyNeverSkipsOrEvictsAReaderInTheLane) {
  for (LagPolicy policy : {LagPolicy::kSkip, LagPolicy::kEvict}) {
    SCOPED_TRACE(policy == LagPolicy::kSkip ? "skip" : "evict");
    MakeReplay(4, {.lag_policy = policy});
    ASSERT_NO_FATAL_FAILURE(ResumeBehindTheRing(2, 30));
    // `a` stops; the producer fills the window ahead of it and waits past
    // lag_timeout, so the policy acts on `a`.
    Fill();
    TickAfter(config_.lag_timeout);
    TickAfter(config_.lag_timeout);
    EXPECT_EQ(Stats()["skip_events"].get<int>() + Stats()["consumers_evicted"].get<int>(), 1);
    // With skip, `a` reads on from the stream's head and b2 stays in the
    // lane; with evict nobody else reads, so the stream moves to b2.
    EXPECT_EQ(ConsumerStats("b2")["resumed"], policy == LagPolicy::kSkip ? "lane" : "stream");
    // b2 sits there, asking nothing, through more of lag_timeout.
    for (int i = 0; i < 5; ++i) TickAfter(config_.lag_timeout);
    EXPECT_EQ(Read("b2", 12), Expected(4, 2, 12));
    EXPECT_TRUE(s_->HasConsumer("b2"));
    EXPECT_EQ(Stats()["skip_events"].get<int>() + Stats()["consumers_evicted"].get<int>(), 1)
        << "nothing more: not the reader in the lane";
  }
}

TEST_F(ResumeTest, TheLaneNeverPinsTheRingAndTakesOnlyOneBatchInLaneShareWhenNoneIsSpare) {
  MakeReplay();
  ASSERT_NO_FATAL_FAILURE(ResumeBehindTheRing(1, 20));
  // b2 asks and waits; `a` reads without pause: the producer writes the
  // shared stream whenever it may, the lane only once per kLaneShare
  // shared batches while the lane wants one.
  s_->Next("b2", ++request_id_);
  int shared = 0, lane = 0;
  for (int i = 0; i < 34; ++i) {
    std::vector<proto::Message> r = Next("a");
    while (r.empty()) {
      const std::string w = Work();
      ASSERT_FALSE(w.empty());
      (w[0] == 'S' ? shared : lane) += 1;
      r = Replies("a");
    }
    for (const proto::Message& m : r) {
      if (const auto* b = std::get_if<proto::Batch>(&m)) Release("a", *b);
    }
    for (const proto::Message& m : Replies("b2")) {
      if (const auto* b = std::get_if<proto::Batch>(&m)) Release("b2", *b);
      s_->Next("b2", ++request_id_);
    }
  }
  EXPECT_GE(shared, 25);
  EXPECT_GE(lane, 1);
  EXPECT_LE(lane, shared / static_cast<int>(Scheduler::kLaneShare) + 1);
}

TEST_F(ResumeTest, NobodyElseReadsSoTheStreamMovesToTheResumedPlace) {
  // A restarted server: nothing written yet; a job resumes in epoch 2.
  MakeReplay();
  MustJoin("b", {.confirm = false});
  ASSERT_TRUE(Resume("b", Place(2, 1, 32, 36)).ok());
  EXPECT_EQ(ConsumerStats("b")["resumed"], "stream");
  EXPECT_EQ(Stats()["stream_moves"], 1);
  EXPECT_EQ(Work(), "S36");
  EXPECT_EQ(Read("b", 6), Expected(4, 2 * 5 + 1, 6));
  EXPECT_EQ(Lane()["owners"], 0);
}

TEST_F(ResumeTest, AResumeRightAfterAnEpochEndAndOneInTheLastBatch) {
  MakeReplay();
  MustJoin("a", {});
  MustJoin("b", {});
  MustJoin("c", {});
  proto::Message after_end, in_last;
  EXPECT_EQ(Read("b", 5, &after_end), Expected(4, 0, 5));  // ... e0/3, E0
  EXPECT_EQ(Read("c", 4, &in_last), Expected(4, 0, 4));    // ... e0/3 (the last batch)
  s_->Remove("b", "killed");
  s_->Remove("c", "killed");
  Read("a", 25);
  MustJoin("b2", {.confirm = false});
  MustJoin("c2", {.confirm = false});
  ASSERT_TRUE(Resume("b2", PlaceAfter(after_end)).ok());
  ASSERT_TRUE(Resume("c2", PlaceAfter(in_last)).ok());
  // One after the other from the lane: b2 (first in line) until it merges
  // where `a` stands (seq 80), then c2, whose END_OF_EPOCH comes first.
  EXPECT_EQ(Read("b2", 21), Expected(4, 5, 21));
  EXPECT_EQ(Lane()["merges"], 1);
  EXPECT_EQ(Read("c2", 6), Expected(4, 4, 6));
}

TEST_F(ResumeTest, AnotherBatchSizeContinuesFromTheSameSample) {
  MakeReplay();
  MustJoin("b", {});
  proto::Message last;
  Read("b", 2, &last);  // seqs 0..7
  s_->Remove("b", "killed");
  MustJoin("b2", {.batch = 3, .confirm = false});
  ASSERT_TRUE(Resume("b2", PlaceAfter(last)).ok());
  EXPECT_EQ(Read("b2", 4), (std::vector<std::string>{"e0/2:8+3", "e0/3:11+3", "E0", "e1/0:16+3"}));
}

// A group saved after two rounds of batch 2 (epochs of 16, two ranks) and
// resumed with batch 4 gets the rest of the interrupted epoch in rounds of
// the new size (one: seqs 8..15), its batch numbers going on from the saved
// count, then the next epoch.
TEST_F(ResumeTest, AGroupResumedWithALargerBatchGetsTheRestOfItsEpoch) {
  MakeReplay();
  MustJoin("a", {});
  MustJoin("r0", Rank("job", 0, 2, 2));
  MustJoin("r1", Rank("job", 1, 2, 2));
  proto::Message last0, last1;
  Read("r0", 2, &last0);
  Read("r1", 2, &last1);
  proto::Resume place = PlaceAfter(last0, 2);
  place.batch_size = 2;
  ASSERT_EQ(place.step, 2u);
  ASSERT_EQ(place.next_seq, 8u);
  s_->Remove("r0", "killed");
  s_->Remove("r1", "killed");
  for (uint32_t r = 0; r < 2; ++r) {
    JoinOptions o = Rank("job2", r, 2, 4);
    o.confirm = false;
    MustJoin("n" + std::to_string(r), o);
    ASSERT_TRUE(Resume("n" + std::to_string(r), place).ok());
  }
  EXPECT_EQ(Read("n0", 2), (std::vector<std::string>{"e0/2:8+4", "E0"}));
  EXPECT_EQ(Read("n1", 2), (std::vector<std::string>{"e0/2:12+4", "E0"}));
  Read("a", 10);
  EXPECT_EQ(Read("n0", 1), (std::vector<std::string>{"e1/0:16+4"}));
  EXPECT_EQ(Read("n1", 1), (std::vector<std::string>{"e1/0:20+4"}));
}

TEST_F(ResumeTest, AGroupResumesEveryRankAtItsSavedRound) {
  MakeReplay();
  auto rank = [](uint32_t r) { return Rank("job", r, 2, 2); };
  MustJoin("a", {});
  MustJoin("r0", rank(0));
  MustJoin("r1", rank(1));
  proto::Message last0, last1;
  EXPECT_EQ(Read("r0", 3, &last0), (std::vector<std::string>{"e0/0:0+2", "e0/1:4+2", "e0/2:8+2"}));
  EXPECT_EQ(Read("r1", 3, &last1), (std::vector<std::string>{"e0/0:2+2", "e0/1:6+2", "e0/2:10+2"}));
  EXPECT_EQ(PlaceAfter(last0, 2), PlaceAfter(last1, 2));  // the group's place
  s_->Remove("r0", "killed");
  s_->Remove("r1", "killed");
  Read("a", 25);
  for (uint32_t r = 0; r < 2; ++r) {
    JoinOptions o = rank(r);
    o.group = "job2";
    o.confirm = false;
    MustJoin("n" + std::to_string(r), o);
  }
  ASSERT_TRUE(Resume("n1", PlaceAfter(last1, 2)).ok());
  // A rank that brings another place is refused, naming both.
  proto::Resume other = PlaceAfter(last0, 2);
  other.step -= 1;
  other.next_seq -= 4;
  const Status refused = Resume("n0", other);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("every rank must load the state saved at the same step"),
            std::string::npos)
      << refused.message();
  ASSERT_TRUE(Resume("n0", PlaceAfter(last0, 2)).ok());
  EXPECT_EQ(Read("n0", 3), (std::vector<std::string>{"e0/3:12+2", "E0", "e1/0:16+2"}));
  EXPECT_EQ(Read("n1", 3), (std::vector<std::string>{"e0/3:14+2", "E0", "e1/0:18+2"}));
}

TEST_F(ResumeTest, WrongPlacesAreRefusedNamingWhatIsWrongAndNothingMoves) {
  MakeReplay();
  MustJoin("a", {});
  Read("a", 2);
  MustJoin("b", {.confirm = false});
  const proto::Resume good = Place(0, 1, 0, 4);
  auto refused = [&](proto::Resume place, std::string_view text) {
    const Status s = Resume("b", place);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
  };
  proto::Resume p = good;
  p.stream = "source=test;seed=2;epoch_len=16";
  refused(p, "seed: saved 2, here 1");
  p.stream = "garbage";
  refused(p, "not a key=value");
  p = good;
  p.world_size = 2;
  refused(p, "a rank of a group of 2");
  p = good;
  p.next_seq = 40;  // not in epoch 0
  refused(p, "is not in the epoch");
  p = good;
  p.epoch = 3;  // epoch 3 cannot start at seq 0
  refused(p, "epoch 3 cannot start at seq 0");
  // Nothing moved: b reads from its join point.
  EXPECT_EQ(Read("b", 1), (std::vector<std::string>{"e0/0:0+4"}));
  // After its first batch it cannot resume.
  refused(good, "before its first batch");
}

TEST_F(ResumeTest, APlaceTheServerCannotServeIsRefused) {
  // No lane, and `a` reads: a place behind the ring cannot be served.
  MakeReplay(/*lane_slots=*/0);
  MustJoin("a", {});
  Read("a", 30);
  MustJoin("b", {.confirm = false});
  const proto::Resume place = Place(0, 1, 0, 4);
  Status s = Resume("b", place);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--resume-slots 0"), std::string::npos) << s.message();
  // A lane too small for the batch: the slots it needs are named.
  MakeReplay(/*lane_slots=*/2);
  MustJoin("a", {});
  Read("a", 30);
  MustJoin("b", {.batch = 4, .confirm = false});
  s = Resume("b", place);
  EXPECT_NE(s.message().find("needs 3 resume slots"), std::string::npos) << s.message();
}

// A place behind the ring is accepted while nobody else reads the stream,
// which then moves there once no batch is held. If another consumer starts
// reading first, the stream cannot move, and with no resume slots for the
// reader's batches it would wait as long as that consumer reads: it is told
// why instead.
TEST_F(ResumeTest, AResumerTheStreamCanNoLongerMoveToIsToldWhy) {
  MakeReplay(/*lane_slots=*/0);
  MustJoin("a", {});
  Read("a", 30);
  std::vector<proto::Message> r = Next("a");
  while (r.empty() && !Work().empty()) r = Replies("a");
  ASSERT_EQ(r.size(), 1u);
  const auto* held = std::get_if<proto::Batch>(&r[0]);
  ASSERT_NE(held, nullptr) << Describe(r);
  s_->Bye("a", {held->lease_id});  // a closed loader whose last batch is still in use
  MustJoin("b", {.confirm = false});
  ASSERT_TRUE(Resume("b", Place(0, 1, 0, 4)).ok()) << "nobody else reads: the stream will move";
  EXPECT_EQ(Stats()["stream_moves"], 0) << "not while a's batch is held";
  MustJoin("c", {});
  EXPECT_FALSE(Read("c", 2).empty());
  EXPECT_TRUE(Next("b").empty());
  TickAfter(100ms);
  ExpectOneError(Replies("b"), StatusCode::kInvalidArgument, "--resume-slots 0");
  EXPECT_EQ(ConsumerStats("b"), nullptr) << "detached and without leases: gone";
  EXPECT_FALSE(Read("c", 2).empty()) << "c reads on";
}

TEST_F(ResumeTest, AnExternalProducerCannotReplay) {
  Make({});
  config_.stream = kStream;
  s_ = std::make_unique<Scheduler>(config_, &env_);
  MustJoin("a", {});
  ReadToEnd("a", 40);
  MustJoin("b", {.confirm = false});
  const proto::Resume place = Place(0, 1, 0, 4);
  const Status s = Resume("b", place);
  EXPECT_NE(s.message().find("cannot write it again"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace batchcast
