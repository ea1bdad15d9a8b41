// Unit tests of Note [Holes] (server/src/slot_table.h) and its part of Note
// [Consumer epochs] (server/src/scheduler.h): slots whose sources dropped
// samples (a file that failed to decode) carry fewer samples than seqs; a
// consumer batch is the next B samples of its epoch, holes skipped, never
// crossing the epoch end; holes pin nothing; joins, skips and the stream end
// keep their seq arithmetic. The test producer drops the samples of the seqs
// in `dropped` (scheduler_fixture.h).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "scheduler_fixture.h"
#include "server/src/consumer_cursor.h"

namespace batchcast {
namespace {

using namespace scheduler_test;

class HolesTest : public SchedulerTest {
 protected:
  // "[1000 1002 1003 | 1004]" for a batch's indices, one "|" between
  // segments.
  static std::string Samples(const proto::Batch& b) {
    std::string s = "[";
    size_t at = 0;
    for (size_t k = 0; k < b.segments.size(); ++k) {
      if (k > 0) s += " |";
      for (uint32_t i = 0; i < b.segments[k].count; ++i, ++at) {
        s += (s.size() > 1 ? " " : "") + std::to_string(b.indices[at]);
      }
    }
    return s + "]";
  }
};

// Slots [0,4) and [4,8) lost seqs 1, 5 and 6: a batch of 4 takes the next 4
// samples, across holes and slots, as segments over the slots' compacted
// sample offsets; the epoch's last batch is short (without drop_last).
TEST_F(HolesTest, ABatchIsTheNextBSamplesSkippingHoles) {
  Make({.stream_end = 16});
  dropped = {1, 5, 6};
  MustJoin("a", {.drop_last = false});
  Pump();
  EXPECT_EQ(Stats()["holes"], 3);
  proto::Batch b1 = NextBatch("a");
  EXPECT_EQ(Samples(b1), "[1000 1002 1003 | 1004]");
  ASSERT_EQ(b1.segments.size(), 2u);
  EXPECT_EQ(b1.segments[0].offset, 0u);
  EXPECT_EQ(b1.segments[0].count, 3u);
  EXPECT_EQ(b1.segments[1].offset, 0u);
  EXPECT_EQ(b1.segments[1].count, 1u);
  proto::Batch b2 = NextBatch("a");
  EXPECT_EQ(Samples(b2), "[1007 | 1008 1009 1010]");
  EXPECT_EQ(b2.segments[0].slot, b1.segments[1].slot);
  EXPECT_EQ(b2.segments[0].offset, 1u) << "1007 is the slot's second sample";
  EXPECT_EQ(b2.first_seq, 5u) << "the seq of 1007 in the compacted slot";
  EXPECT_EQ(Samples(NextBatch("a")), "[1011 | 1012 1013 1014]");
  EXPECT_EQ(Samples(NextBatch("a")), "[1015]") << "the short last batch";
  EXPECT_EQ(Describe(Next("a")), "E0/4");
  EXPECT_EQ(ConsumerStats("a")["samples"], 13);
}

// An epoch whose last samples were dropped: without drop_last it ends with
// what is left (here one sample); with drop_last the remainder, known to be
// short once its slots are published, is passed over at once.
TEST_F(HolesTest, AnEpochEndingInHolesWithoutDropLast) {
  Make({.stream_end = 32});
  dropped = {13, 14, 15, 28, 29, 30, 31};  // epoch 1 ends in a slot of holes only
  MustJoin("a", {.drop_last = false});
  EXPECT_EQ(ReadToEnd("a", 200, Samples),
            "[1000 1001 1002 1003] [1004 1005 1006 1007] [1008 1009 1010 1011] [1012] E0/4 "
            "[1016 1017 1018 1019] [1020 1021 1022 1023] [1024 1025 1026 1027] E1/3 "
            "ERR(OutOfRange)");
}

TEST_F(HolesTest, AnEpochEndingInHolesWithDropLastPassesOverTheShortRemainder) {
  Make({.epoch_len = 16});
  dropped = {13, 14, 15};
  MustJoin("a", {});
  ASSERT_EQ(Pump(), 4);  // [0,16), the last slot holds one sample
  NextBatch("a");
  NextBatch("a");
  EXPECT_EQ(Samples(NextBatch("a")), "[1008 1009 1010 1011]");
  EXPECT_EQ(ConsumerStats("a")["cursor"], 16) << "one sample left: passed over, it pins nothing";
  EXPECT_EQ(Describe(Next("a")), "E0/3");
}

// The remainder is passed over only once it is known to be short: 4 seqs
// with holes may still hold B samples until they are published.
TEST_F(HolesTest, DropLastWaitsForARemainderThatMayHoldABatch) {
  Make({.epoch_len = 16});
  dropped = {13};
  MustJoin("a", {});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Produce());  // [0,12)
  for (int i = 0; i < 3; ++i) Release("a", NextBatch("a"));
  EXPECT_EQ(ConsumerStats("a")["cursor"], 12) << "[12,16) is not written yet";
  EXPECT_TRUE(Next("a").empty());
  ASSERT_TRUE(Produce());  // [12,16) with 3 samples
  EXPECT_EQ(Describe(Replies("a")), "E0/3");
}

// A slot whose samples were all dropped is passed over: its seqs pin
// nothing, so it may be rewritten as soon as the cursors are past its
// neighbours, and the batch after it reads one slot (zero-copy).
TEST_F(HolesTest, AFullyHoledSlotIsPassedOver) {
  Make({});
  dropped = {4, 5, 6, 7};
  MustJoin("a", {});
  ASSERT_EQ(Pump(), 4);
  Release("a", NextBatch("a"));
  EXPECT_EQ(ConsumerStats("a")["cursor"], 8) << "over the holes of [4,8)";
  EXPECT_TRUE(Produce()) << "[0,4) may be rewritten";
  EXPECT_TRUE(Produce()) << "so may the slot of holes [4,8)";
  EXPECT_FALSE(Produce()) << "a's cursor pins [8,12)";
  proto::Batch b = NextBatch("a");
  EXPECT_EQ(Samples(b), "[1008 1009 1010 1011]");
  EXPECT_EQ(b.segments.size(), 1u);
}

// next_epoch joiners of different batch sizes, with and without drop_last,
// over several epochs with holes in many slots: in each consumer epoch every
// index of its producer epoch that was not dropped arrives exactly once, in
// stream order (with drop_last: all but fewer than B at the end), no dropped
// one ever, and the epoch has at least announced - dropped batches.
TEST_F(HolesTest, EveryConsumerEpochIsItsProducerEpochMinusTheDroppedSamples) {
  const uint64_t L = 24, epochs = 3;
  Make({.window = 4, .batch_size = 4, .epoch_len = L, .stream_end = epochs * L});
  for (uint64_t seq = 0; seq < epochs * L; ++seq) {
    if (seq % 7 == 3 || seq % 11 == 5 || (seq >= 40 && seq < 44)) dropped.insert(seq);
  }
  struct Reader {
    std::string id;
    uint32_t batch;
    bool drop_last;
    uint64_t announced = 0;
    std::vector<std::vector<int64_t>> epochs{1};
    std::vector<uint32_t> batches;
    bool done = false;
  };
  std::vector<Reader> readers = {
      {"b1", 1, true}, {"b3", 3, false}, {"b5", 5, true}, {"b5n", 5, false}, {"b8", 8, true}};
  for (Reader& r : readers) {
    auto a =
        Join(r.id, {.batch = r.batch, .join = JoinPolicy::kNextEpoch, .drop_last = r.drop_last});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    r.announced = a->batches_per_epoch;
  }
  for (Reader& r : readers) s_->Next(r.id, ++request_id_);
  for (int turn = 0; turn < 2000; ++turn) {
    bool any = false, all_done = true;
    for (Reader& r : readers) {
      for (const proto::Message& m : Replies(r.id)) {
        any = true;
        if (auto* b = std::get_if<proto::Batch>(&m)) {
          r.epochs.back().insert(r.epochs.back().end(), b->indices.begin(), b->indices.end());
          EXPECT_LE(b->indices.size(), r.batch);
          if (r.drop_last) {
            EXPECT_EQ(b->indices.size(), r.batch);
          }
          Release(r.id, *b);
        } else if (auto* e = std::get_if<proto::EndOfEpoch>(&m)) {
          r.batches.push_back(e->batches);
          r.epochs.emplace_back();
        } else {
          r.done = true;
          EXPECT_EQ(Describe(m), "ERR(OutOfRange)");
        }
        if (!r.done) s_->Next(r.id, ++request_id_);
      }
      all_done = all_done && r.done;
    }
    if (all_done) break;
    if (!any) {
      ASSERT_GT(Pump(), 0) << "stuck";
    }
  }
  for (const Reader& r : readers) {
    SCOPED_TRACE(r.id);
    ASSERT_TRUE(r.done);
    ASSERT_EQ(r.batches.size(), epochs);
    for (uint64_t e = 0; e < epochs; ++e) {
      std::vector<int64_t> expected;
      uint64_t lost = 0;
      for (uint64_t seq = e * L; seq < (e + 1) * L; ++seq) {
        if (dropped.count(seq)) {
          ++lost;
        } else {
          expected.push_back(IndexOf(seq));
        }
      }
      const std::vector<int64_t>& got = r.epochs[e];
      ASSERT_LE(got.size(), expected.size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin())) << "epoch " << e;
      EXPECT_EQ(got.size(), r.drop_last ? expected.size() / r.batch * r.batch : expected.size());
      EXPECT_GE(r.batches[e] + lost, r.announced) << "epoch " << e;
      EXPECT_LE(r.batches[e], r.announced);
    }
  }
  EXPECT_EQ(Stats()["holes"], dropped.size());
}

// An immediate joiner whose join floor is a slot of holes starts at the next
// sample; a next_epoch joiner whose epoch begins with holes gets its epoch's
// first sample first.
TEST_F(HolesTest, JoinsLandOnTheFirstSample) {
  Make({.window = 2, .epoch_len = 8});
  dropped = {8, 9, 10, 11, 12};
  MustJoin("a", {});
  Pump();  // [0,4) [4,8)
  Release("a", NextBatch("a"));
  Release("a", NextBatch("a"));
  ASSERT_TRUE(Produce());  // [8,12): holes only
  ASSERT_TRUE(Produce());  // [12,16): 13, 14, 15
  MustJoin("now", {.batch = 3});
  MustJoin("next", {.batch = 3, .join = JoinPolicy::kNextEpoch});
  EXPECT_EQ(ConsumerStats("now")["cursor"], 8);
  EXPECT_EQ(Samples(NextBatch("now")), "[1013 1014 1015]");
  proto::Batch b = NextBatch("next");
  EXPECT_EQ(Samples(b), "[1013 1014 1015]");
  EXPECT_EQ(b.first_seq, 12u);
  EXPECT_EQ(b.epoch, 0u);
}

// The lag policy's skip jumps over seqs as before, but counts only the
// samples it passed over, not the holes.
TEST_F(HolesTest, SkipCountsSamplesNotHoles) {
  Make({.window = 2, .epoch_len = 4, .lag_policy = LagPolicy::kSkip, .lag_timeout = 100ms});
  dropped = {1, 2, 6};
  MustJoin("fast", {.batch = 1});
  MustJoin("slow", {.batch = 1});
  Pump();  // [0,4) with 2 samples, [4,8) with 3
  for (int e = 0; e < 2; ++e) {
    for (int i = 0; i < (e == 0 ? 2 : 3); ++i) Release("fast", NextBatch("fast"));
    ASSERT_EQ(Describe(Next("fast")), "E" + std::to_string(e) + "/" + (e == 0 ? "2" : "3"));
  }
  ASSERT_FALSE(Produce()) << "slow pins [0,4)";
  TickAfter(100ms);
  EXPECT_EQ(ConsumerStats("slow")["cursor"], 8);
  EXPECT_EQ(ConsumerStats("slow")["skipped"], 5) << "8 seqs, 3 of them holes";
}

// A batch pins exactly the slots it reads; holes between them add none.
TEST_F(HolesTest, LeasesPinOnlyTheSlotsABatchReads) {
  Make({.epoch_len = 100});
  dropped = {2, 3, 4, 5, 6, 7, 9};
  MustJoin("a", {.batch = 4});
  Pump();
  proto::Batch b = NextBatch("a");
  EXPECT_EQ(Samples(b), "[1000 1001 | 1008 1010]");
  EXPECT_EQ(Leased(), 2) << "[0,4) and [8,12); the slot of holes [4,8) is not leased";
  EXPECT_EQ(ConsumerStats("a")["cursor"], 10) << "at 1011, the slot's third sample";
  Release("a", b);
  EXPECT_EQ(Leased(), 0);
}

// When the ring is full of seqs a waiting consumer still needs and holds
// fewer than B of its samples, only that consumer can move: it gets them as
// a short batch (without drop_last) ...
TEST_F(HolesTest, AStarvedConsumerGetsAShortBatch) {
  Make({.window = 2, .epoch_len = 100});
  dropped = {1, 2, 3, 4, 5, 6};
  MustJoin("a", {.batch = 4, .drop_last = false});
  ASSERT_TRUE(Produce());  // [0,4): 1000
  EXPECT_TRUE(Next("a").empty()) << "a slot is free: the producer may still write";
  ASSERT_TRUE(Produce());  // [4,8): 1007; the ring is full
  std::vector<proto::Message> r = Replies("a");
  ASSERT_EQ(r.size(), 1u) << Describe(r);
  const proto::Batch& short_batch = std::get<proto::Batch>(r[0]);
  EXPECT_EQ(Samples(short_batch), "[1000 | 1007]");
  EXPECT_EQ(ConsumerStats("a")["cursor"], 8);
  Release("a", short_batch);
  ASSERT_TRUE(Produce());  // [8,12)
  EXPECT_EQ(Samples(NextBatch("a")), "[1008 1009 1010 1011]");
}

// ... or, with drop_last, passes over them (counted), and the next batch
// is a whole one again.
TEST_F(HolesTest, AStarvedDropLastConsumerPassesOver) {
  Make({.window = 2, .epoch_len = 100});
  dropped = {1, 2, 3, 4, 5, 6};
  MustJoin("a", {.batch = 4});
  ASSERT_EQ(Pump(), 2);
  EXPECT_TRUE(Next("a").empty());
  EXPECT_EQ(ConsumerStats("a")["samples_passed_over"], 2);
  EXPECT_EQ(ConsumerStats("a")["cursor"], 8);
  ASSERT_TRUE(Produce());  // [8,12)
  std::vector<proto::Message> r = Replies("a");
  ASSERT_EQ(r.size(), 1u) << Describe(r);
  EXPECT_EQ(Samples(std::get<proto::Batch>(r[0])), "[1008 1009 1010 1011]");
}

TEST_F(HolesTest, CommitChecksTheSampleCount) {
  Make({});
  MustJoin("a", {});
  std::vector<int64_t> idx(4, 0);
  auto grant = s_->TryBeginBatch(0, idx);
  ASSERT_TRUE(grant.ok() && grant->has_value());
  EXPECT_EQ(s_->Commit((*grant)->slot, 5).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(s_->Commit((*grant)->slot, 0).ok()) << "a slot of holes only";
  EXPECT_EQ(Stats()["holes"], 4);
}

TEST(ConsumerCursorTest, PlanWithHoles) {
  using Kind = ConsumerCursor::Plan::Kind;
  ConsumerCursor keep(0, 10, 4, /*drop_last=*/false);
  EXPECT_EQ(keep.PlanNext(UINT64_MAX, {4, false}).kind, Kind::kBatch);
  EXPECT_EQ(keep.PlanNext(UINT64_MAX, {3, false}).kind, Kind::kWait);
  ConsumerCursor::Plan p = keep.PlanNext(UINT64_MAX, {3, true});
  EXPECT_EQ(p.kind, Kind::kBatch);
  EXPECT_EQ(p.count, 3u);
  EXPECT_EQ(keep.PlanNext(UINT64_MAX, {0, true}).kind, Kind::kEndOfEpoch);
  ConsumerCursor drop(0, 10, 4, /*drop_last=*/true);
  EXPECT_EQ(drop.PlanNext(UINT64_MAX, {3, true}).kind, Kind::kEndOfEpoch);
  drop.Advance(5, UINT64_MAX);
  EXPECT_EQ(drop.position(), 5u) << "5 seqs left: they may hold a batch";
  drop.PassTo(99, UINT64_MAX);
  EXPECT_EQ(drop.position(), 10u) << "never beyond the epoch end";
}

}  // namespace
}  // namespace batchcast
