// Unit tests of Note [Consumer groups] (server/src/scheduler.h,
// consumer_group.h): the ranks of a group split each epoch into rounds of
// world_size chunks of B samples (chunk k to rank k mod world_size), all get
// the same number of batches (the last incomplete round is dropped), holes
// are skipped without breaking equal counts; other groups and ungrouped
// consumers get the whole stream. Formation (pins, timeout), refusals,
// departures, the spread bound, lag policies, the shard cap, stats.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "batchcast/server/server_options.h"
#include "scheduler_fixture.h"

namespace batchcast {
namespace {

using namespace scheduler_test;

class GroupsTest : public SchedulerTest {
 protected:
  // The producer writes `batches` batches, each read and released by `id`
  // at once (END_OF_EPOCH passed over).
  void ReadAlone(const std::string& id, int batches) {
    for (int i = 0; i < batches; ++i) {
      ASSERT_TRUE(Produce()) << i;
      std::vector<proto::Message> r = Next(id);
      if (!r.empty() && std::holds_alternative<proto::EndOfEpoch>(r[0])) r = Next(id);
      ASSERT_EQ(r.size(), 1u) << Describe(r);
      Release(id, std::get<proto::Batch>(r[0]));
    }
  }
  // What one consumer saw: the indices of each finished epoch, the batches
  // in each, and the error that ended its reading.
  struct Seen {
    std::vector<std::vector<int64_t>> epochs;
    std::vector<int> batches;
    std::vector<int64_t> current;
    int current_batches = 0;
    std::vector<uint32_t> batch_sizes;
    bool done = false;
    std::optional<proto::Error> error;
  };

  // Reads with every consumer in `ids` (one NEXT in flight each, every
  // batch released at once) until each has seen `epochs` END_OF_EPOCHs or an
  // error, producing whenever nobody can move; stops when stuck (false).
  bool Drive(const std::vector<std::string>& ids, size_t epochs, std::map<std::string, Seen>& seen,
             int max_turns = 3000) {
    std::map<std::string, bool> asked;
    for (int turn = 0; turn < max_turns; ++turn) {
      bool all_done = true;
      for (const std::string& id : ids) {
        Seen& s = seen[id];
        if (s.done || s.epochs.size() >= epochs) continue;
        all_done = false;
        if (!asked[id]) {
          s_->Next(id, ++request_id_);
          asked[id] = true;
        }
      }
      if (all_done) return true;
      bool progress = false;
      for (const std::string& id : ids) {
        for (const proto::Message& m : Replies(id)) {
          progress = true;
          asked[id] = false;
          Seen& s = seen[id];
          if (const auto* b = std::get_if<proto::Batch>(&m)) {
            s.current.insert(s.current.end(), b->indices.begin(), b->indices.end());
            s.batch_sizes.push_back(static_cast<uint32_t>(b->indices.size()));
            ++s.current_batches;
            Release(id, *b);
          } else if (std::holds_alternative<proto::EndOfEpoch>(m)) {
            s.epochs.push_back(std::exchange(s.current, {}));
            s.batches.push_back(std::exchange(s.current_batches, 0));
          } else if (const auto* e = std::get_if<proto::Error>(&m)) {
            s.error = *e;
            s.done = true;
          }
        }
      }
      if (!progress && Pump() == 0) return false;
    }
    return false;
  }

  // The indices of seqs [from, to) that are not in `dropped`.
  std::vector<int64_t> Samples(uint64_t from, uint64_t to) const {
    std::vector<int64_t> out;
    for (uint64_t q = from; q < to; ++q) {
      if (dropped.count(q) == 0) out.push_back(IndexOf(q));
    }
    return out;
  }
  // Rank `rank`'s share of an epoch's `samples`: chunks rank, rank + W, ...
  // of B samples, over the first `rounds` rounds.
  static std::vector<int64_t> Share(const std::vector<int64_t>& samples, uint32_t world,
                                    uint32_t batch, uint32_t rank, size_t rounds) {
    std::vector<int64_t> out;
    for (size_t r = 0; r < rounds; ++r) {
      const size_t at = (r * world + rank) * batch;
      out.insert(out.end(), samples.begin() + at, samples.begin() + at + batch);
    }
    return out;
  }
  // A batch for `id`, producing as needed.
  proto::Batch NextBatchProducing(const std::string& id) {
    std::vector<proto::Message> r = Next(id);
    while (r.empty() && Pump() > 0) r = Replies(id);
    if (r.size() != 1 || !std::holds_alternative<proto::Batch>(r[0])) {
      ADD_FAILURE() << "expected one BATCH for " << id << ", got " << Describe(r);
      return proto::Batch{};
    }
    return std::get<proto::Batch>(r[0]);
  }
  nlohmann::json GroupStats(const std::string& name) {
    const nlohmann::json stats = Stats();
    for (const auto& g : stats["groups"]) {
      if (g["name"] == name) return g;
    }
    return nullptr;
  }
};

// Chunk k of each group epoch goes to rank k mod W; every rank gets
// floor(L / (W*B)) batches; the remainder (here 2 of 20) is dropped for all.
TEST_F(GroupsTest, ChunksGoRoundRobinAndEveryRankGetsTheSameCount) {
  Make({.window = 8, .epoch_len = 20, .stream_end = 40});
  for (uint32_t r = 0; r < 3; ++r) {
    auto a = Join("r" + std::to_string(r), Rank("g", r, 3, 2));
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->batches_per_epoch, 3u) << "floor(20 / (3 x 2))";
  }
  std::map<std::string, Seen> seen;
  ASSERT_TRUE(Drive({"r0", "r1", "r2"}, 2, seen));
  for (uint32_t r = 0; r < 3; ++r) {
    const Seen& s = seen["r" + std::to_string(r)];
    ASSERT_EQ(s.epochs.size(), 2u);
    for (uint64_t e = 0; e < 2; ++e) {
      EXPECT_EQ(s.epochs[e], Share(Samples(20 * e, 20 * e + 20), 3, 2, r, 3)) << r << " " << e;
      EXPECT_EQ(s.batches[e], 3);
    }
    for (uint32_t n : s.batch_sizes) EXPECT_EQ(n, 2u);
  }
  EXPECT_EQ(Describe(Next("r1")), "ERR(OutOfRange)");
}

// Two groups and an ungrouped consumer read one stream: each group splits it,
// the ungrouped consumer gets all of it.
TEST_F(GroupsTest, TwoGroupsAndAnUngroupedConsumerShareOneStream) {
  Make({.window = 8, .epoch_len = 20, .stream_end = 40});
  for (uint32_t r = 0; r < 3; ++r) MustJoin("a" + std::to_string(r), Rank("a", r, 3, 2));
  for (uint32_t r = 0; r < 2; ++r) MustJoin("b" + std::to_string(r), Rank("b", r, 2, 3));
  MustJoin("u", {.batch = 4});
  std::map<std::string, Seen> seen;
  ASSERT_TRUE(Drive({"a0", "a1", "a2", "b0", "b1", "u"}, 2, seen));
  for (uint64_t e = 0; e < 2; ++e) {
    const std::vector<int64_t> all = Samples(20 * e, 20 * e + 20);
    for (uint32_t r = 0; r < 3; ++r) {
      EXPECT_EQ(seen["a" + std::to_string(r)].epochs[e], Share(all, 3, 2, r, 3));
    }
    for (uint32_t r = 0; r < 2; ++r) {
      EXPECT_EQ(seen["b" + std::to_string(r)].epochs[e], Share(all, 2, 3, r, 3));
    }
    EXPECT_EQ(seen["u"].epochs[e], all);
    EXPECT_EQ(seen["u"].batches[e], 5);
  }
  const nlohmann::json b1 = ConsumerStats("b1");
  EXPECT_EQ(b1["group"], "b");
  EXPECT_EQ(b1["rank"], 1);
  EXPECT_EQ(b1["world_size"], 2);
  EXPECT_FALSE(ConsumerStats("u").contains("group"));
  EXPECT_EQ(GroupStats("a")["state"], "running");
  EXPECT_EQ(GroupStats("a")["batches_per_epoch"], 3);
  EXPECT_EQ(Stats()["groups"].size(), 2u);
}

// Note [Holes]: chunks are B samples, holes skipped; an epoch whose holes
// leave fewer rounds gives every rank one batch fewer, never only some.
TEST_F(GroupsTest, HolesAreSkippedAndCountsStayEqual) {
  Make({.window = 8, .epoch_len = 20, .stream_end = 40});
  dropped = {1,  7,  8,  15,       // epoch 0: 16 samples = 2 whole rounds of 2 x 4
             21, 27, 28, 35, 39};  // epoch 1: 15 samples = 1 round, 7 dropped
  MustJoin("r0", Rank("g", 0, 2));
  MustJoin("r1", Rank("g", 1, 2));
  std::map<std::string, Seen> seen;
  ASSERT_TRUE(Drive({"r0", "r1"}, 2, seen));
  for (uint32_t r = 0; r < 2; ++r) {
    const Seen& s = seen["r" + std::to_string(r)];
    EXPECT_EQ(s.epochs[0], Share(Samples(0, 20), 2, 4, r, 2));
    EXPECT_EQ(s.epochs[1], Share(Samples(20, 40), 2, 4, r, 1));
    EXPECT_EQ(s.batches, (std::vector<int>{2, 1}));
  }
  EXPECT_EQ(seen["r0"].epochs[0],
            (std::vector<int64_t>{1000, 1002, 1003, 1004, 1011, 1012, 1013, 1014}));
}

// A round is handed out once all of it is published, so that no rank gets a
// batch of a round its peers might not get.
TEST_F(GroupsTest, ARoundIsServedOnlyOnceWholeRoundIsPublished) {
  Make({.stream_end = 16});
  MustJoin("r0", Rank("g", 0, 2));
  MustJoin("r1", Rank("g", 1, 2));
  ASSERT_TRUE(Produce());
  EXPECT_EQ(Describe(Next("r0")), "(nothing)") << "its chunk is there, the round is not";
  ASSERT_TRUE(Produce());
  EXPECT_EQ(Describe(Replies("r0")), "0+4");
  EXPECT_EQ(Describe(Next("r1")), "4+4");
}

TEST_F(GroupsTest, JoinsThatDoNotMatchTheGroupAreRefused) {
  Make({.window = 8});  // max batch (and round) 16
  MustJoin("r0", Rank("g", 0, 2));
  auto expect = [&](Result<Scheduler::Admission> a, const std::string& text) {
    ASSERT_FALSE(a.ok()) << text;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find(text), std::string::npos) << a.status().message();
  };
  expect(Join("x1", Rank("g", 1, 2, 8)), "same batch size");
  expect(Join("x2", Rank("g", 1, 3)), "world_size 2");
  JoinOptions next_epoch = Rank("g", 1, 2);
  next_epoch.join = JoinPolicy::kNextEpoch;
  expect(Join("x3", next_epoch), "same join policy");
  expect(Join("x4", Rank("g", 0, 2)), "rank 0 of group 'g' is already connected");
  JoinOptions keep_last = Rank("h", 0, 2);
  keep_last.drop_last = false;
  expect(Join("x5", keep_last), "drop_last=false cannot be used in a group");
  expect(Join("x6", Rank("h", 0, 5, 4)), "must fit half the ring");
  expect(Join("x7", Rank("h", 2, 2)), "bad group fields");
  expect(Join("x8", Rank("", 0, 2)), "bad group fields");
  MustJoin("r1", Rank("g", 1, 2));  // the right one still joins
  EXPECT_EQ(GroupStats("g")["state"], "running");
}

// A rank whose previous process died (unnoticed so far) may connect again:
// the old group ended with it, and the new rank starts a new group.
TEST_F(GroupsTest, ARankWhosePreviousProcessDiedStartsANewGroup) {
  Make({});
  JoinOptions old = Rank("g", 0, 2);
  old.pid = 77;
  old.same_host = true;
  MustJoin("old", old);
  env_.dead.insert(77);
  MustJoin("new", Rank("g", 0, 2));
  EXPECT_EQ(ConsumerStats("old"), nullptr);
  ASSERT_EQ(Stats()["groups"].size(), 1u);
  EXPECT_EQ(GroupStats("g")["state"], "forming");
  EXPECT_EQ(GroupStats("g")["ranks"], "0");
}

// A forming group pins its start: the rank that comes late still gets its
// chunks from the group's start; the others read what the ring allows.
TEST_F(GroupsTest, AFormingGroupLosesNoSampleWhileItsRanksConnect) {
  Make({.stream_end = 32});
  MustJoin("r0", Rank("g", 0, 2));
  MustJoin("u", {});
  std::map<std::string, Seen> seen;
  EXPECT_FALSE(Drive({"r0", "u"}, 2, seen)) << "stuck: rank 1's chunks pin the ring";
  EXPECT_LT(produced_, 32u);
  MustJoin("r1", Rank("g", 1, 2));
  ASSERT_TRUE(Drive({"r0", "r1", "u"}, 2, seen));
  for (uint32_t r = 0; r < 2; ++r) {
    for (uint64_t e = 0; e < 2; ++e) {
      EXPECT_EQ(seen["r" + std::to_string(r)].epochs[e],
                Share(Samples(16 * e, 16 * e + 16), 2, 4, r, 2));
    }
  }
  EXPECT_EQ(seen["u"].epochs[1], Samples(16, 32));
}

// A group that does not form within group_timeout fails its joined ranks
// clearly; its name is free again, and the others go on.
TEST_F(GroupsTest, AGroupThatDoesNotFormInTimeFailsItsRanks) {
  Make({.group_timeout = 10s});
  MustJoin("r0", Rank("g", 0, 3, 2));
  MustJoin("r2", Rank("g", 2, 3, 2));
  MustJoin("u", {});
  Pump();
  TickAfter(9s);
  EXPECT_TRUE(Replies("r0").empty());
  TickAfter(1s);
  std::vector<proto::Message> r = Replies("r0");
  ExpectOneError(r, StatusCode::kDeadlineExceeded, "only ranks 0, 2 of 3 connected within 10 s");
  EXPECT_EQ(std::get<proto::Error>(r[0]).request_id, 0u) << "fatal for the consumer";
  EXPECT_NE(std::get<proto::Error>(r[0]).message.find("missing: 1 "), std::string::npos);
  ExpectOneError(Replies("r2"), StatusCode::kDeadlineExceeded, "did not form");
  EXPECT_EQ(Stats()["groups"].size(), 0u);
  MustJoin("again", Rank("g", 0, 3, 2));
  EXPECT_EQ(GroupStats("g")["state"], "forming");
  EXPECT_EQ(ReadToEnd("u", 8).substr(0, 15), "0+4 4+4 8+4 12+") << "not held by the group";
}

// A departed rank: its peers get every batch it got, then Cancelled instead
// of one it did not get; other consumers go on.
TEST_F(GroupsTest, ADeadRanksPeersGetItsBatchesThenAnError) {
  Make({.window = 8, .epoch_len = 64});
  JoinOptions r0 = Rank("g", 0, 2), r1 = Rank("g", 1, 2);
  r1.pid = 51;
  r1.same_host = true;
  MustJoin("r0", r0);
  MustJoin("r1", r1);
  MustJoin("u", {});
  for (int i = 0; i < 3; ++i) Release("r1", NextBatchProducing("r1"));
  Release("r0", NextBatchProducing("r0"));
  env_.dead.insert(51);
  TickAfter(100ms);
  EXPECT_EQ(ConsumerStats("r1"), nullptr);
  EXPECT_EQ(GroupStats("g")["state"], "broken");
  for (const char* expected : {"8+4", "16+4"}) {  // rounds 1 and 2, which rank 1 got
    proto::Batch b = NextBatchProducing("r0");
    EXPECT_EQ(Describe(b), expected);
    Release("r0", b);
  }
  std::vector<proto::Message> r = Next("r0");
  ExpectOneError(r, StatusCode::kCancelled,
                 "group 'g' is broken: rank 1 (consumer 2 'r1', pid 51)");
  EXPECT_NE(std::get<proto::Error>(r[0]).message.find("left after 3 batches"), std::string::npos);
  EXPECT_NE(std::get<proto::Error>(r[0]).message.find("exited"), std::string::npos);
  EXPECT_EQ(ConsumerStats("r0"), nullptr) << "detached and without leases: gone";
  EXPECT_EQ(Stats()["groups"].size(), 0u);
  EXPECT_EQ(ReadToEnd("u", 20).substr(0, 11), "0+4 4+4 8+4");
}

// Under skip and evict a broken group whose remaining rank holds the
// producer up (it still owes a batch its leaver got, but asks for nothing:
// it may wait in a collective for the dead rank) ends after lag_timeout:
// its rank gets the Cancelled it would get after that batch, and the others
// go on. Under block it paces everyone, as any consumer does.
TEST_F(GroupsTest, ABrokenGroupThatHoldsTheProducerEndsUnderSkipAndEvict) {
  for (LagPolicy policy : {LagPolicy::kSkip, LagPolicy::kEvict, LagPolicy::kBlock}) {
    SCOPED_TRACE(std::string(LagPolicyName(policy)));
    Make({.epoch_len = 100, .lag_policy = policy});
    MustJoin("r0", Rank("g", 0, 2));
    MustJoin("r1", Rank("g", 1, 2));
    MustJoin("u", {});
    Pump();                          // [0,16)
    Release("r1", NextBatch("r1"));  // round 0: r1 [4,8); r0's [0,4) still owed
    s_->Bye("r1", {});
    for (int i = 0; i < 4; ++i) Release("u", NextBatch("u"));
    Pump();
    Release("u", NextBatch("u"));
    ASSERT_EQ(Pump(), 0) << "r0's chunk and the group's frontier pin the ring";
    TickAfter(100ms);
    if (policy == LagPolicy::kBlock) {
      EXPECT_TRUE(Replies("r0").empty());
      EXPECT_EQ(Pump(), 0);
      continue;
    }
    ExpectOneError(Replies("r0"), StatusCode::kCancelled, "group 'g' is broken: rank 1");
    EXPECT_GT(Pump(), 0) << "the others go on";
    EXPECT_EQ(Stats()["groups"].size(), 0u);
  }
}

// A group that breaks while still forming: a rank that was waiting for its
// peers (ahead of the absent rank by its prefetch) gets Cancelled, never a
// hang, though the absent rank will never join it.
TEST_F(GroupsTest, ARankWaitingForPeersInAGroupThatBreaksWhileFormingGetsAnError) {
  Make({.window = 8, .epoch_len = 100});
  MustJoin("r0", Rank("g", 0, 3, 2));
  MustJoin("r1", Rank("g", 1, 3, 2));  // rank 2 never joins
  Pump();                              // [0,32): four rounds of 6 and more
  for (int i = 0; i < 4; ++i) Release("r0", NextBatch("r0"));
  EXPECT_TRUE(Next("r0").empty()) << "four rounds ahead of rank 2: it waits for its peers";
  s_->Bye("r1", {});
  TickAfter(100ms);
  ExpectOneError(Replies("r0"), StatusCode::kCancelled, "group 'g' is broken: rank 1");
}

// A rank that says goodbye at the end of its reading: its peers still get
// the end of the epoch (not a batch), and the stream's end.
TEST_F(GroupsTest, AByeAtTheEndLetsThePeersFinishTheirEpoch) {
  Make({.stream_end = 16});
  MustJoin("r0", Rank("g", 0, 2));
  MustJoin("r1", Rank("g", 1, 2));
  std::map<std::string, Seen> seen;
  ASSERT_TRUE(Drive({"r0"}, 1, seen));
  Release("r1", NextBatchProducing("r1"));
  Release("r1", NextBatchProducing("r1"));
  s_->Bye("r0", {});
  EXPECT_EQ(Describe(Next("r1")), "E0/2");
  EXPECT_EQ(Describe(Next("r1")), "ERR(OutOfRange)");
}

// A rank may be at most max_ahead (prefetch + 2) entries ahead of its
// slowest peer, so that a stalled rank pins few chunks; it goes on as soon
// as the slow one reads.
TEST_F(GroupsTest, ARankWaitsForAPeerThatFellFarBehind) {
  Make({.window = 8, .epoch_len = 64});
  MustJoin("r0", Rank("g", 0, 2));  // prefetch 2: max_ahead 4
  MustJoin("r1", Rank("g", 1, 2));
  for (int i = 0; i < 4; ++i) Release("r0", NextBatchProducing("r0"));
  EXPECT_EQ(Describe(Next("r0")), "(nothing)");
  EXPECT_EQ(Pump(), 4) << "rank 0's slots are rewritten, rank 1's chunks stay";
  EXPECT_TRUE(Replies("r0").empty()) << "still 4 rounds ahead of rank 1";
  Release("r1", NextBatchProducing("r1"));
  EXPECT_EQ(Describe(Replies("r0")), "32+4") << "served as soon as rank 1 read";
}

// lag_policy=skip moves a lagging group as a whole: every rank still gets
// the same rounds (and one END_OF_EPOCH per epoch crossed).
TEST_F(GroupsTest, SkipMovesTheWholeGroup) {
  Make({.epoch_len = 8, .lag_policy = LagPolicy::kSkip});
  MustJoin("r0", Rank("g", 0, 2));
  MustJoin("r1", Rank("g", 1, 2));
  MustJoin("u", {});
  std::map<std::string, Seen> seen;
  ASSERT_TRUE(Drive({"u"}, 2, seen));
  EXPECT_EQ(Pump(), 0);
  TickAfter(100ms);
  EXPECT_EQ(Stats()["skip_events"], 1);
  EXPECT_EQ(GroupStats("g")["skipped"], 16);
  ASSERT_TRUE(Drive({"r0", "r1", "u"}, 3, seen));
  for (const char* r : {"r0", "r1"}) {
    EXPECT_EQ(seen[r].batches, (std::vector<int>{0, 0, 1})) << r << ": two epochs skipped";
  }
  EXPECT_EQ(seen["r0"].epochs[2], Samples(16, 20));
  EXPECT_EQ(seen["r1"].epochs[2], Samples(20, 24));
  EXPECT_EQ(ConsumerStats("r1")["skipped"], 16);
}

// A round's batches carry the skipped count of when the round was cut, not
// of when each rank fetched its chunk: ranks served one round on either side
// of a skip report the same count, so the states they save after that step
// are the same (Note [Resume]).
TEST_F(GroupsTest, ARoundsRanksReportTheSameSkippedCountWhenASkipFallsBetweenThem) {
  Make({.epoch_len = 100, .lag_policy = LagPolicy::kSkip});
  MustJoin("r0", Rank("g", 0, 2));
  MustJoin("r1", Rank("g", 1, 2));
  MustJoin("u", {});
  Pump();                                       // [0,16)
  const proto::Batch first0 = NextBatch("r0");  // round 0: r0 [0,4), r1 [4,8)
  Release("r0", first0);
  for (int i = 0; i < 4; ++i) Release("u", NextBatch("u"));
  Pump();  // [16,20) where r0's chunk was; r1's chunk pins [4,8)
  TickAfter(100ms);
  ASSERT_EQ(Stats()["skip_events"], 1);
  const uint64_t skipped = GroupStats("g")["skipped"].get<uint64_t>();
  ASSERT_GT(skipped, 0u);
  const proto::Batch first1 = NextBatch("r1");
  EXPECT_EQ(first1.step, first0.step);
  EXPECT_EQ(first1.skipped, first0.skipped) << "the same round, cut before the skip";
  EXPECT_EQ(first1.skipped, 0u);
  Pump();
  const proto::Batch second0 = NextBatch("r0");
  const proto::Batch second1 = NextBatch("r1");
  EXPECT_EQ(second0.skipped, skipped) << "the round cut after it";
  EXPECT_EQ(second1.skipped, skipped);
}

// lag_policy=evict evicts every rank of a lagging group.
TEST_F(GroupsTest, EvictEvictsEveryRank) {
  Make({.lag_policy = LagPolicy::kEvict});
  MustJoin("r0", Rank("g", 0, 2));
  MustJoin("r1", Rank("g", 1, 2));
  MustJoin("u", {});
  Pump();
  for (int i = 0; i < 4; ++i) Release("u", NextBatch("u"));
  EXPECT_EQ(Pump(), 0);
  TickAfter(100ms);
  for (const char* r : {"r0", "r1"}) {
    ExpectOneError(Replies(r), StatusCode::kResourceExhausted, "a group is evicted as a whole");
  }
  EXPECT_EQ(Stats()["consumers_evicted"], 2);
  EXPECT_EQ(Pump(), 4);
}

// Several nodes: the rounds per epoch come from the smallest shard, so a
// larger shard's ranks get no more batches than the others'.
TEST_F(GroupsTest, RoundsPerEpochComeFromTheSmallestShard) {
  Make({.epoch_len = 16, .stream_end = 16, .group_epoch_len = 15});
  auto a = Join("r0", Rank("g", 0, 2));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->batches_per_epoch, 1u) << "floor(15 / 8), not floor(16 / 8)";
  MustJoin("r1", Rank("g", 1, 2));
  std::map<std::string, Seen> seen;
  ASSERT_TRUE(Drive({"r0", "r1"}, 1, seen));
  EXPECT_EQ(seen["r0"].epochs[0], Samples(0, 4));
  EXPECT_EQ(seen["r1"].epochs[0], Samples(4, 8));
}

// A ring whose seqs past the group's frontier hold fewer samples than a round
// (more than half of them holes): the group passes over them (Note
// [Consumer epochs]) instead of waiting forever.
TEST_F(GroupsTest, AStarvedRoundIsPassedOverByTheWholeGroup) {
  Make({.epoch_len = 64, .stream_end = 64});
  dropped = {1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15};  // 4 samples in the ring's 16 seqs
  MustJoin("r0", Rank("g", 0, 2));
  MustJoin("r1", Rank("g", 1, 2));
  std::map<std::string, Seen> seen;
  ASSERT_TRUE(Drive({"r0", "r1"}, 1, seen));
  EXPECT_EQ(GroupStats("g")["samples_passed_over"], 4);
  EXPECT_EQ(seen["r0"].epochs[0], Share(Samples(16, 64), 2, 4, 0, 6));
  EXPECT_EQ(seen["r1"].epochs[0], Share(Samples(16, 64), 2, 4, 1, 6));
}

// Note [Unconfirmed consumers]: a group whose ranks are all unconfirmed
// pins nothing; once one speaks, the group starts where the ring is and
// pins from there.
TEST_F(GroupsTest, AGroupOfUnconfirmedRanksPinsNothing) {
  Make({});
  JoinOptions r0 = Rank("g", 0, 2);
  r0.confirm = false;
  MustJoin("r0", r0);
  MustJoin("u", {});
  ReadAlone("u", 8);  // the ring is [16,20) ... [28,32)
  s_->Touch("r0");
  EXPECT_EQ(GroupStats("g")["frontier"], 16) << "the newest unbroken run starts at 16";
  EXPECT_FALSE(Produce()) << "the group pins its start now";
}

// Under skip and evict a forming group holds the producer at most
// lag_timeout; then its frontier skips ahead (it is not evicted), and the
// rank that joins later starts there too: counts stay equal.
TEST_F(GroupsTest, AFormingGroupHoldsTheProducerAtMostLagTimeoutUnderSkipAndEvict) {
  for (LagPolicy policy : {LagPolicy::kSkip, LagPolicy::kEvict}) {
    SCOPED_TRACE(std::string(LagPolicyName(policy)));
    Make({.lag_policy = policy, .lag_timeout = 100ms});
    MustJoin("r0", Rank("g", 0, 2));
    MustJoin("u", {});
    Pump();
    for (int i = 0; i < 4; ++i) Release("u", NextBatch("u"));
    EXPECT_EQ(Pump(), 0) << "the forming group pins its start";
    TickAfter(99ms);
    EXPECT_EQ(Pump(), 0);
    TickAfter(1ms);
    EXPECT_TRUE(Replies("r0").empty()) << "not evicted";
    EXPECT_EQ(GroupStats("g")["frontier"], 16);
    EXPECT_EQ(Pump(), 4) << "the producer goes on";
    MustJoin("r1", Rank("g", 1, 2));
    std::map<std::string, Seen> seen;
    ASSERT_TRUE(Drive({"r0", "r1"}, 1, seen));
    EXPECT_EQ(seen["r0"].batches, seen["r1"].batches);
    produced_ = 0;
  }
}

// Every rank of a group is welcomed at the same start, also when the group
// skipped or restarted before its last rank joined: the places its ranks
// save before their first batch are the same, so the group resumes from
// them (Note [Resume]).
TEST_F(GroupsTest, EveryRankIsWelcomedAtTheSameStart) {
  Make({.lag_policy = LagPolicy::kSkip, .lag_timeout = 100ms});
  Result<Scheduler::Admission> r0 = Join("r0", Rank("g", 0, 2));
  ASSERT_TRUE(r0.ok());
  MustJoin("u", {});
  Pump();
  for (int i = 0; i < 4; ++i) Release("u", NextBatch("u"));
  EXPECT_EQ(Pump(), 0) << "the forming group pins its start";
  TickAfter(100ms);
  ASSERT_EQ(GroupStats("g")["frontier"], 16) << "the forming group skipped";
  Result<Scheduler::Admission> r1 = Join("r1", Rank("g", 1, 2));
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->start, r0->start);

  Make({});
  JoinOptions silent = Rank("g", 0, 2);
  silent.confirm = false;
  r0 = Join("r0", silent);
  ASSERT_TRUE(r0.ok());
  MustJoin("u", {});
  ReadAlone("u", 8);
  s_->Touch("r0");
  ASSERT_EQ(GroupStats("g")["frontier"], 16) << "the group restarted where the ring is";
  r1 = Join("r1", Rank("g", 1, 2));
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->start, r0->start);
}

// Under block a forming group is exempt: it may hold the producer until
// group_timeout.
TEST_F(GroupsTest, AFormingGroupHoldsTheProducerUnderBlock) {
  Make({.lag_timeout = 100ms, .group_timeout = 10s});
  MustJoin("r0", Rank("g", 0, 2));
  MustJoin("u", {});
  Pump();
  for (int i = 0; i < 4; ++i) Release("u", NextBatch("u"));
  TickAfter(5s);
  EXPECT_EQ(Pump(), 0);
  EXPECT_EQ(GroupStats("g")["frontier"], 0);
}

}  // namespace
}  // namespace batchcast
