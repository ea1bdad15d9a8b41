// Unit tests of the Scheduler's rules (Note [Leases], Note [Consumer epochs],
// Note [Lag policy], Note [Producer start and stream end] in
// server/src/scheduler.h), driven directly: a fake clock and fake processes,
// no sockets, no sleeps. The producer is the test itself (TryBeginBatch +
// Commit); replies are read from the outbox.
#include "server/src/scheduler.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "scheduler_fixture.h"
#include "server/src/consumer_cursor.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using namespace scheduler_test;

// ---- Note [Leases] ----

// A slot is rewritten only when no lease pins it and every attached consumer
// is past it.
TEST_F(SchedulerTest, SlotIsRewrittenOnlyWhenUnleasedAndEveryConsumerIsPast) {
  Make({.window = 2});
  MustJoin("a", {});
  MustJoin("b", {});
  const std::optional<uint32_t> first = Produce();
  ASSERT_TRUE(first);
  ASSERT_TRUE(Produce());
  EXPECT_FALSE(Produce()) << "the ring is full and nobody read";

  proto::Batch a0 = NextBatch("a");
  Release("a", a0);
  EXPECT_FALSE(Produce()) << "b's cursor is still at seq 0";
  proto::Batch b0 = NextBatch("b");
  EXPECT_FALSE(Produce()) << "b's lease pins the slot of seq 0";
  Release("b", b0);
  const std::optional<uint32_t> third = Produce();
  ASSERT_TRUE(third);
  EXPECT_EQ(*third, *first) << "the slot of seqs 0..3 is the one that may be rewritten";
}

// A lease is taken when a BATCH is sent and ends on RELEASE (only the named
// one; unknown ids are ignored).
TEST_F(SchedulerTest, LeaseIsTakenOnBatchAndEndsOnRelease) {
  MakeAndFill({});
  EXPECT_EQ(Leased(), 0);
  proto::Batch b1 = NextBatch("a");
  proto::Batch b2 = NextBatch("a");
  EXPECT_NE(b1.lease_id, 0u);
  EXPECT_NE(b1.lease_id, b2.lease_id);
  EXPECT_EQ(Leased(), 2);
  EXPECT_EQ(ConsumerStats("a")["leases"], 2);
  s_->Release("a", {b1.lease_id, 9999});
  EXPECT_EQ(Leased(), 1);
  s_->Release("a", {b1.lease_id});  // twice: nothing more
  EXPECT_EQ(Leased(), 1);
  Release("a", b2);
  EXPECT_EQ(Leased(), 0);
}

// A consumer removed (unreachable) loses its leases at once.
TEST_F(SchedulerTest, RemovalEndsLeases) {
  MakeAndFill({}, {"a", "b"});
  NextBatch("a");
  EXPECT_EQ(Leased(), 1);
  s_->Remove("a", "its connection is gone");
  EXPECT_EQ(Leased(), 0);
  EXPECT_EQ(Stats()["consumers_lost"], 1);
  EXPECT_FALSE(s_->HasConsumer("a"));
  s_->Remove("a", "again");  // already gone: not counted twice
  EXPECT_EQ(Stats()["consumers_lost"], 1);
}

// BYE detaches (the cursor pins nothing) but keeps the leases the client still
// holds; the others end. The consumer is removed once it released them.
TEST_F(SchedulerTest, ByeDetachesButKeepsHeldLeases) {
  MakeAndFill({.window = 3}, {"a", "b"});  // [0,4) [4,8) [8,12)
  for (int i = 0; i < 3; ++i) Release("b", NextBatch("b"));
  proto::Batch held = NextBatch("a");        // [0,4)
  proto::Batch prefetched = NextBatch("a");  // [4,8)
  EXPECT_FALSE(Produce()) << "a pins [0,4) and [4,8) by leases, [8,12) by its cursor";
  s_->Bye("a", {held.lease_id});
  EXPECT_EQ(Leased(), 1) << "the prefetched lease ended, the held one stays";
  EXPECT_EQ(ConsumerStats("a")["attached"], false);
  ASSERT_TRUE(Produce()) << "a's cursor no longer pins";
  ASSERT_TRUE(Produce());
  EXPECT_FALSE(Produce()) << "a's lease pins [0,4), b's cursor [12,16)";
  ExpectOneError(Next("a"), StatusCode::kCancelled, "left the stream");
  Release("a", held);
  EXPECT_FALSE(s_->HasConsumer("a")) << "left and released everything";
  EXPECT_EQ(Leased(), 0);
  EXPECT_EQ(Stats()["consumers_lost"], 0) << "a consumer that left is not lost";
  (void)prefetched;
}

// A consumer may hold at most max_leases unreleased batches.
TEST_F(SchedulerTest, MaxLeasesRefusesTheNextBatch) {
  MakeAndFill({.max_leases = 2});
  proto::Batch b1 = NextBatch("a");
  NextBatch("a");
  ExpectOneError(Next("a"), StatusCode::kResourceExhausted, "unreleased batches (limit 2)");
  Release("a", b1);
  EXPECT_EQ(NextBatch("a").first_seq, 8u) << "the refused NEXT did not move the cursor";
  // prefetch must fit the limit
  EXPECT_EQ(Join("b", {.prefetch = 3}).status().code(), StatusCode::kInvalidArgument);
}

// A consumer whose own leases pin every slot while it waits is answered with
// an error once that lasted kHoardTimeout (1 s), not before.
TEST_F(SchedulerTest, HoldingEverySlotIsAnErrorAfterOneSecond) {
  MakeAndFill({.window = 2});
  NextBatch("a");
  NextBatch("a");
  EXPECT_TRUE(Next("a").empty()) << "waits: the producer cannot write";
  TickAfter(Scheduler::kHoardTimeout - 1ms);
  EXPECT_TRUE(Replies("a").empty()) << "releases may still be on their way";
  TickAfter(1ms);
  ExpectOneError(Replies("a"), StatusCode::kResourceExhausted, "pin all 2 ring slots");
}

TEST_F(SchedulerTest, HoardingClockRestartsWhenALeaseIsReleased) {
  MakeAndFill({.window = 2});
  proto::Batch b1 = NextBatch("a");
  NextBatch("a");
  EXPECT_TRUE(Next("a").empty());
  TickAfter(900ms);
  s_->Release("a", {b1.lease_id}, /*wake_producer=*/true);
  ASSERT_TRUE(Produce());
  std::vector<proto::Message> r = Replies("a");
  ASSERT_EQ(r.size(), 1u) << Describe(r);
  EXPECT_EQ(std::get<proto::Batch>(r[0]).first_seq, 8u);
  // a pins every slot again and waits: its 1 s starts now.
  EXPECT_TRUE(Next("a").empty());
  TickAfter(900ms);
  EXPECT_TRUE(Replies("a").empty());
  TickAfter(100ms);
  ExpectOneError(Replies("a"), StatusCode::kResourceExhausted, "pin all 2 ring slots");
}

// ---- Note [Consumer epochs]: joining ----

// An immediate joiner starts at the first seq of the newest unbroken run of
// batches; older ones kept only by a lease are not offered.
TEST_F(SchedulerTest, ImmediateJoinStartsAtTheNewestUnbrokenRun) {
  MakeAndFill({.window = 3});          // [0,4) [4,8) [8,12)
  proto::Batch held = NextBatch("a");  // pins [0,4)
  Release("a", NextBatch("a"));
  Release("a", NextBatch("a"));
  ASSERT_TRUE(Produce());  // [12,16) replaces [4,8): the ring is [0,4) [8,12) [12,16)
  MustJoin("late", {});
  proto::Batch first = NextBatch("late");
  EXPECT_EQ(first.first_seq, 8u);
  EXPECT_EQ(first.epoch, 0u);
  EXPECT_EQ(ConsumerStats("late")["cursor"], 12);
  (void)held;
}

// A next_epoch joiner starts at the first producer-epoch start at or after
// the join floor...
TEST_F(SchedulerTest, NextEpochJoinStartsAtTheNextEpoch) {
  MakeAndFill({.window = 2, .epoch_len = 8});  // [0,4) [4,8)
  Release("a", NextBatch("a"));
  ASSERT_TRUE(Produce());  // [8,12): the ring is [4,8) [8,12)
  MustJoin("next", {.join = JoinPolicy::kNextEpoch});
  MustJoin("now", {.join = JoinPolicy::kImmediate});
  EXPECT_EQ(ConsumerStats("next")["cursor"], 8);
  EXPECT_EQ(ConsumerStats("now")["cursor"], 4);
  proto::Batch b = NextBatch("next");
  EXPECT_EQ(b.first_seq, 8u);
  EXPECT_EQ(b.epoch, 0u) << "the joiner's own first epoch";
  EXPECT_EQ(b.segments[0].producer_epoch, 1u);
}

// ... which is the current epoch when its start is still held.
TEST_F(SchedulerTest, NextEpochJoinTakesTheCurrentEpochWhileItsStartIsHeld) {
  MakeAndFill({.window = 2, .epoch_len = 8});  // [0,4) [4,8)
  MustJoin("next", {.join = JoinPolicy::kNextEpoch});
  EXPECT_EQ(NextBatch("next").first_seq, 0u);
}

TEST(ConsumerCursorTest, JoinArithmetic) {
  EXPECT_EQ(ConsumerCursor::JoinStart(JoinPolicy::kImmediate, 13, 8), 13u);
  EXPECT_EQ(ConsumerCursor::JoinStart(JoinPolicy::kNextEpoch, 13, 8), 16u);
  EXPECT_EQ(ConsumerCursor::JoinStart(JoinPolicy::kNextEpoch, 16, 8), 16u);
  EXPECT_EQ(ConsumerCursor::JoinStart(JoinPolicy::kNextEpoch, 0, 8), 0u);
  EXPECT_EQ(ConsumerCursor::BatchesPerEpoch(10, 4, true), 2u);
  EXPECT_EQ(ConsumerCursor::BatchesPerEpoch(10, 4, false), 3u);
  EXPECT_EQ(ConsumerCursor::BatchesPerEpoch(8, 4, true), 2u);
}

// ---- Note [Consumer epochs]: serving ----

// Epoch k covers [start + kL, start + (k+1)L), clipped at the stream end;
// an epoch starting at or after the stream end does not exist (OutOfRange).
TEST_F(SchedulerTest, EpochsCoverTheirRangeClippedAtTheStreamEnd) {
  MakeAndFill({.window = 2, .epoch_len = 8, .stream_end = 16});  // [0,4) [4,8)
  Release("a", NextBatch("a"));
  ASSERT_TRUE(Produce());  // the ring is [4,8) [8,12)
  MustJoin("c", {.batch = 3, .drop_last = false});
  s_->Remove("a", "test");
  // c starts at 4: epoch 0 = [4,12), epoch 1 = [12,20) clipped to [12,16).
  EXPECT_EQ(ReadToEnd("c"), "4+3 7+3 10+2 E0/3 12+3 15+1 E1/2 ERR(OutOfRange)");
}

// Batches follow the consumer's epochs, not the producer's batches: a batch
// size that does not divide the slot gets segments across slots (with the
// right indices), and the last batch of an epoch is short without drop_last.
TEST_F(SchedulerTest, BatchesSpanSlotsAsSegments) {
  Make({.epoch_len = 12});
  MustJoin("a", {.batch = 6, .drop_last = false});
  Pump();
  proto::Batch b1 = NextBatch("a");
  proto::Batch b2 = NextBatch("a");
  ASSERT_EQ(b1.segments.size(), 2u);
  EXPECT_EQ(b1.segments[0].offset, 0u);
  EXPECT_EQ(b1.segments[0].count, 4u);
  EXPECT_EQ(b1.segments[1].offset, 0u);
  EXPECT_EQ(b1.segments[1].count, 2u);
  EXPECT_NE(b1.segments[0].slot, b1.segments[1].slot);
  ASSERT_EQ(b2.segments.size(), 2u);
  EXPECT_EQ(b2.segments[0].slot, b1.segments[1].slot);
  EXPECT_EQ(b2.segments[0].offset, 2u);
  EXPECT_EQ(b2.segments[0].count, 2u);
  EXPECT_EQ(b2.segments[1].count, 4u);
  for (const proto::Batch* b : {&b1, &b2}) {
    ASSERT_EQ(b->indices.size(), 6u);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(b->indices[i], IndexOf(b->first_seq + i));
  }
  EXPECT_EQ(b2.step, 1u);
  EXPECT_EQ(Leased(), 3) << "each slot a batch reads is pinned";
  std::vector<proto::Message> r = Next("a");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(std::get<proto::EndOfEpoch>(r[0]).batches, 2u);
}

TEST_F(SchedulerTest, ShortLastBatchWithoutDropLast) {
  Make({.epoch_len = 10, .stream_end = 20});
  MustJoin("a", {.batch = 4, .drop_last = false});
  EXPECT_EQ(ReadToEnd("a"), "0+4 4+4 8+2 E0/3 10+4 14+4 18+2 E1/3 ERR(OutOfRange)");
}

// With drop_last a remainder shorter than B is passed over at once (it pins
// nothing, it need not even be written), and the next NEXT gets END_OF_EPOCH.
TEST_F(SchedulerTest, DropLastPassesOverTheRemainderAtOnce) {
  Make({.epoch_len = 10});
  MustJoin("a", {.batch = 4});
  ASSERT_TRUE(Produce());  // [0,4)
  ASSERT_TRUE(Produce());  // [4,8); [8,10) is not written
  NextBatch("a");
  EXPECT_EQ(NextBatch("a").first_seq, 4u);
  EXPECT_EQ(ConsumerStats("a")["cursor"], 10) << "the remainder [8,10) was passed over";
  std::vector<proto::Message> r = Next("a");
  ASSERT_EQ(r.size(), 1u) << Describe(r);
  const auto& e = std::get<proto::EndOfEpoch>(r[0]);
  EXPECT_EQ(e.epoch, 0u);
  EXPECT_EQ(e.batches, 2u);
  EXPECT_TRUE(Next("a").empty()) << "epoch 1 starts at 10, not written yet";
  ASSERT_TRUE(Produce());  // [8,10)
  ASSERT_TRUE(Produce());  // [10,14)
  std::vector<proto::Message> r2 = Replies("a");
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(std::get<proto::Batch>(r2[0]).first_seq, 10u);
}

// NEXTs queue up (prefetch) and are answered in order as data arrives.
TEST_F(SchedulerTest, PendingRequestsAreAnsweredInOrderAsBatchesArePublished) {
  Make({});
  MustJoin("a", {});
  EXPECT_TRUE(Next("a").empty());
  EXPECT_TRUE(Next("a").empty());
  ASSERT_TRUE(Produce());
  ASSERT_TRUE(Produce());
  std::vector<proto::Message> r = Replies("a");
  EXPECT_EQ(Describe(r), "0+4 4+4");
  EXPECT_EQ(std::get<proto::Batch>(r[0]).request_id + 1, std::get<proto::Batch>(r[1]).request_id);
}

// ---- Note [Lag policy] ----

class LagTest : public SchedulerTest {
 protected:
  // Window 2 x batch 4, epochs of 4; "fast" read and released [0,4) and
  // [4,8), "slow" read nothing: the producer is blocked by slow's cursor.
  void SetUpBlocked(LagPolicy policy) {
    MakeAndFill({.window = 2, .epoch_len = 4, .lag_policy = policy, .lag_timeout = 100ms},
                {"fast", "slow"});
    Release("fast", NextBatch("fast"));
    ASSERT_EQ(Describe(Next("fast")), "E0/1");
    Release("fast", NextBatch("fast"));
    ASSERT_EQ(Describe(Next("fast")), "E1/1");
    ASSERT_FALSE(Produce()) << "slow pins [0,4)";
  }
};

// skip: after lag_timeout the laggard jumps to the head of the stream, its
// skipped samples are counted, and each epoch end it jumped over is still
// reported as END_OF_EPOCH.
TEST_F(LagTest, SkipJumpsForwardAfterLagTimeoutAndReportsEachEpochEnd) {
  SetUpBlocked(LagPolicy::kSkip);
  TickAfter(99ms);
  EXPECT_FALSE(Produce()) << "not before lag_timeout";
  EXPECT_EQ(Stats()["skip_events"], 0);
  TickAfter(1ms);
  EXPECT_EQ(Stats()["skip_events"], 1);
  EXPECT_EQ(ConsumerStats("slow")["cursor"], 8) << "to the head of the stream";
  EXPECT_EQ(ConsumerStats("slow")["skipped"], 8);
  ASSERT_TRUE(Produce()) << "a skipping consumer pins nothing";  // [8,12)
  std::vector<proto::Message> r = Next("slow");
  ASSERT_EQ(Describe(r), "E0/0");
  EXPECT_EQ(std::get<proto::EndOfEpoch>(r[0]).skipped, 8u);
  EXPECT_EQ(Describe(Next("slow")), "E1/0") << "the epoch [4,8) was skipped too";
  proto::Batch b = NextBatch("slow");
  EXPECT_EQ(b.first_seq, 8u);
  EXPECT_EQ(b.epoch, 2u);
  EXPECT_EQ(b.skipped, 8u);
}

// A skipped consumer that comes back after the data it jumped to was
// overwritten moves on to the oldest held sample, counting that too.
TEST_F(LagTest, SkipBackOntoOverwrittenDataMovesToTheJoinFloor) {
  SetUpBlocked(LagPolicy::kSkip);
  TickAfter(100ms);
  ASSERT_EQ(ConsumerStats("slow")["cursor"], 8);
  for (int i = 0; i < 2; ++i) {  // fast reads on; [8,12) and [12,16) are overwritten
    ASSERT_TRUE(Produce());
    Release("fast", NextBatch("fast"));
    ASSERT_EQ(Describe(Next("fast")), "E" + std::to_string(2 + i) + "/1");
  }
  ASSERT_TRUE(Produce());
  ASSERT_TRUE(Produce());  // the ring is [16,20) [20,24)
  EXPECT_EQ(Describe(Next("slow")), "E0/0");
  EXPECT_EQ(ConsumerStats("slow")["skipped"], 16);
  EXPECT_EQ(Describe(Next("slow")), "E1/0");
  EXPECT_EQ(Describe(Next("slow")), "E2/0");
  EXPECT_EQ(Describe(Next("slow")), "E3/0");
  EXPECT_EQ(NextBatch("slow").first_seq, 16u);
}

TEST_F(LagTest, BlockNeverSkipsOrEvicts) {
  SetUpBlocked(LagPolicy::kBlock);
  TickAfter(10min);
  EXPECT_FALSE(Produce());
  EXPECT_EQ(Stats()["skip_events"], 0);
  EXPECT_EQ(Stats()["consumers_evicted"], 0);
  EXPECT_EQ(ConsumerStats("slow")["cursor"], 0);
}

TEST_F(LagTest, NoPolicyWhileTheProducerIsNotBlocked) {
  Make({.lag_policy = LagPolicy::kSkip, .lag_timeout = 100ms});
  MustJoin("fast", {});
  MustJoin("slow", {});
  ASSERT_TRUE(Produce());
  Release("fast", NextBatch("fast"));
  TickAfter(10min);
  EXPECT_EQ(Stats()["skip_events"], 0) << "the producer never waited";
}

// evict: the laggard gets ResourceExhausted ("evicted") and is detached; its
// leases stay; its next NEXT is refused; the producer goes on.
TEST_F(LagTest, EvictSendsAnErrorAndDetachesButKeepsLeases) {
  MakeAndFill(
      {.window = 3, .epoch_len = 100, .lag_policy = LagPolicy::kEvict, .lag_timeout = 100ms},
      {"fast", "slow"});  // [0,4) [4,8) [8,12)
  proto::Batch held = NextBatch("slow");
  for (int i = 0; i < 3; ++i) Release("fast", NextBatch("fast"));
  ASSERT_FALSE(Produce());
  TickAfter(100ms);
  ExpectOneError(Replies("slow"), StatusCode::kResourceExhausted, "evicted by the server");
  EXPECT_EQ(Stats()["consumers_evicted"], 1);
  EXPECT_EQ(ConsumerStats("slow")["attached"], false);
  EXPECT_EQ(Leased(), 1) << "eviction never breaks a lease";
  ASSERT_TRUE(Produce());
  ASSERT_TRUE(Produce());
  EXPECT_FALSE(Produce()) << "the held slot stays pinned";
  ExpectOneError(Next("slow"), StatusCode::kCancelled, "left the stream");
  Release("slow", held);
  EXPECT_FALSE(s_->HasConsumer("slow"));
}

// A pause (nobody reads the stream) ends the producer's wait: a consumer that
// joins later is judged by how long it alone held the producer, and the pause
// is not counted as time blocked.
TEST_F(LagTest, AConsumerJoiningAfterAPauseIsNotChargedForTheWaitBeforeIt) {
  MakeAndFill({.window = 2,
               .epoch_len = 100,
               .lag_policy = LagPolicy::kEvict,
               .lag_timeout = 100ms});  // [0,4) [4,8); "a" reads nothing
  ASSERT_FALSE(Produce());
  env_.now += 50ms;
  s_->Bye("a", {});
  ASSERT_FALSE(Produce()) << "nobody reads: the producer pauses";
  env_.now += 10s;
  MustJoin("b", {});  // from the oldest slot: it pins both
  ASSERT_FALSE(Produce());
  s_->Tick();
  EXPECT_EQ(Stats()["consumers_evicted"], 0) << "b held the producer up for no time yet";
  EXPECT_TRUE(Replies("b").empty());
  EXPECT_LT(Stats()["producer_blocked_s"].get<double>(), 1.0) << "the pause is not a wait";
  TickAfter(100ms);
  ExpectOneError(Replies("b"), StatusCode::kResourceExhausted, "evicted by the server");
}

// When every slot is leased the policy has nobody to move: nothing happens.
TEST_F(LagTest, NothingToSkipWhenEverySlotIsLeased) {
  MakeAndFill({.window = 2, .lag_policy = LagPolicy::kSkip, .lag_timeout = 100ms});
  NextBatch("a");
  NextBatch("a");
  ASSERT_FALSE(Produce());
  TickAfter(100ms);
  EXPECT_EQ(Stats()["skip_events"], 0);
}

// ---- Note [Producer start and stream end] ----

TEST_F(SchedulerTest, ProducerWaitsForMinConsumersThenPausesWithNobodyAttached) {
  Make({.min_consumers = 2});
  EXPECT_FALSE(Produce());
  MustJoin("a", {});
  EXPECT_FALSE(Produce()) << "one of two";
  MustJoin("b", {});
  EXPECT_TRUE(Produce());
  s_->Bye("a", {});
  EXPECT_TRUE(Produce()) << "after the start, one attached consumer is enough";
  s_->Bye("b", {});
  EXPECT_FALSE(Produce()) << "nobody attached: pause";
  MustJoin("c", {});
  EXPECT_TRUE(Produce());
}

// After the stream end, NEXT gets OutOfRange and the producer may not begin.
TEST_F(SchedulerTest, OutOfRangeAfterTheStreamEnd) {
  Make({.epoch_len = 8, .stream_end = 16});
  MustJoin("a", {});
  EXPECT_EQ(ReadToEnd("a"), "0+4 4+4 E0/2 8+4 12+4 E1/2 ERR(OutOfRange)");
  std::vector<int64_t> idx = {1};
  EXPECT_EQ(s_->TryBeginBatch(2, idx).status().code(), StatusCode::kOutOfRange);
  ExpectOneError(Next("a"), StatusCode::kOutOfRange, "the stream has ended");
}

// EndStream cuts the stream where the producer is: the consumer's epoch
// that contains the end ends there.
TEST_F(SchedulerTest, EndStreamCutsTheStreamWhereTheProducerIs) {
  Make({.epoch_len = 8});
  MustJoin("a", {.batch = 3, .drop_last = false});
  ASSERT_TRUE(Produce());
  ASSERT_TRUE(Produce());
  ASSERT_TRUE(Produce());  // [0,12)
  s_->EndStream();
  EXPECT_EQ(ReadToEnd("a"), "0+3 3+3 6+2 E0/3 8+3 11+1 E1/2 ERR(OutOfRange)");
  EXPECT_TRUE(Stats()["stream_ended"]);
}

// The server is finished once the stream ended and everyone left, with the
// stream published to its end or read to its end by a departed consumer (the
// producer pauses with nobody attached, so with drop_last the last samples
// may never be written).
TEST_F(SchedulerTest, FinishedOnceTheStreamEndedAndEveryConsumerLeft) {
  Make({.window = 2, .epoch_len = 10, .stream_end = 10});
  EXPECT_FALSE(s_->Finished()) << "not started";
  MustJoin("a", {.batch = 4});
  Pump();  // [0,4) [4,8); [8,10) waits for a slot
  Release("a", NextBatch("a"));
  Release("a", NextBatch("a"));
  EXPECT_EQ(Describe(Next("a")), "E0/2");
  EXPECT_EQ(Describe(Next("a")), "ERR(OutOfRange)");
  EXPECT_FALSE(s_->Finished()) << "a is still connected";
  s_->Bye("a", {});
  EXPECT_EQ(Stats()["samples_published"], 8) << "[8,10) was never written";
  EXPECT_TRUE(s_->Finished());
}

TEST_F(SchedulerTest, NotFinishedWhenTheDepartedConsumerDidNotReachTheEnd) {
  Make({.window = 2, .epoch_len = 10, .stream_end = 10});
  MustJoin("a", {.batch = 4});
  Pump();
  Release("a", NextBatch("a"));
  s_->Bye("a", {});
  EXPECT_FALSE(s_->Finished());
}

// ---- liveness ----

TEST_F(SchedulerTest, ConsumerWhoseProcessIsGoneIsRemovedWithItsLeases) {
  Make({});
  MustJoin("local", {.pid = 42, .same_host = true});
  MustJoin("remote", {.pid = 43, .same_host = false});
  MustJoin("other", {});
  Pump();
  NextBatch("local");
  NextBatch("remote");
  EXPECT_EQ(Leased(), 1) << "both read [0,4)";
  env_.dead = {42, 43};
  s_->Tick();
  EXPECT_FALSE(s_->HasConsumer("local"));
  EXPECT_TRUE(s_->HasConsumer("remote")) << "a pid not seen at HELLO is never probed";
  EXPECT_EQ(Stats()["consumers_lost"], 1);
  EXPECT_EQ(Stats()["slots"]["leased"], 1) << "remote's lease stays";
  s_->Remove("remote", "test");
  EXPECT_EQ(Leased(), 0);
}

TEST_F(SchedulerTest, SilentConsumerIsRemovedAfterHeartbeatTimeout) {
  MakeAndFill({.heartbeat_timeout = 2000ms}, {"quiet", "chatty"});
  NextBatch("quiet");
  EXPECT_EQ(Leased(), 1);
  env_.now += 1500ms;
  s_->Touch("chatty");
  s_->Tick();
  EXPECT_TRUE(s_->HasConsumer("quiet"));
  TickAfter(501ms);
  EXPECT_FALSE(s_->HasConsumer("quiet"));
  EXPECT_TRUE(s_->HasConsumer("chatty"));
  EXPECT_EQ(Leased(), 0);
  EXPECT_EQ(Stats()["consumers_lost"], 1);
}

// ---- admission and producer errors ----

TEST_F(SchedulerTest, HelloIsChecked) {
  Make({.max_consumers = 1});
  EXPECT_EQ(Join("zero", {.batch = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Join("huge", {.batch = 9}).status().code(), StatusCode::kInvalidArgument)
      << "at most window * batch / 2 = 8";
  EXPECT_EQ(Join("nopf", {.prefetch = 0}).status().code(), StatusCode::kInvalidArgument);
  auto a = Join("a", {.batch = 3, .drop_last = false});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->batches_per_epoch, 6u);
  EXPECT_EQ(Join("a", {}).status().code(), StatusCode::kInvalidArgument) << "HELLO twice";
  EXPECT_EQ(Join("b", {}).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(SchedulerTest, ProducerBatchesAreChecked) {
  Make({});
  MustJoin("a", {});
  std::vector<int64_t> none;
  std::vector<int64_t> five(5, 0);
  std::vector<int64_t> four(4, 0);
  EXPECT_EQ(s_->TryBeginBatch(0, none).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s_->TryBeginBatch(0, five).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s_->TryBeginBatch(1, four).status().code(), StatusCode::kInvalidArgument)
      << "the stream is in epoch 0";
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Produce());  // [0,12) of 16
  auto ok = s_->TryBeginBatch(0, std::vector<int64_t>(3, 0));
  ASSERT_TRUE(ok.ok() && ok->has_value());
  EXPECT_EQ(s_->Commit((*ok)->slot).code(), StatusCode::kOk);
  EXPECT_EQ(s_->Commit((*ok)->slot).code(), StatusCode::kInvalidArgument) << "committed twice";
  EXPECT_EQ(s_->TryBeginBatch(0, std::vector<int64_t>(2, 0)).status().code(),
            StatusCode::kInvalidArgument)
      << "[15,17) crosses the end of epoch 0";
  s_->Stop();
  EXPECT_EQ(s_->TryBeginBatch(0, std::vector<int64_t>(1, 0)).status().code(),
            StatusCode::kCancelled);
}

// The blocking BeginBatch waits on the scheduler's condition variable: a
// release wakes it, Stop cancels it, a deadline bounds it.
TEST_F(SchedulerTest, BeginBatchWaitsUntilASlotIsFree) {
  Make({.window = 1, .batch_size = 8});
  MustJoin("a", {});
  ASSERT_TRUE(Produce());
  std::vector<int64_t> idx(8, 0);
  EXPECT_EQ(s_->BeginBatch(0, idx, Clock::now()).status().code(), StatusCode::kDeadlineExceeded);
  Result<SlotGrant> got = InvalidArgumentError("not yet");
  std::thread producer([&] { got = s_->BeginBatch(0, idx, Clock::time_point::max()); });
  Release("a", NextBatch("a"));
  Release("a", NextBatch("a"));  // a's cursor passes the slot
  producer.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->first_seq, 8u);
  ASSERT_TRUE(s_->Commit(got->slot).ok());
  std::thread stopped([&] { got = s_->BeginBatch(1, idx, Clock::time_point::max()); });
  s_->Stop();
  stopped.join();
  EXPECT_EQ(got.status().code(), StatusCode::kCancelled);
}

// ---- Note [Unconfirmed consumers] ----

// A consumer that said nothing after its HELLO pins nothing: the producer
// writes past its start while another reads; when it speaks it starts at the
// join point of that moment, and from then on it pins.
TEST_F(SchedulerTest, AnUnconfirmedConsumerPinsNothingAndStartsWhereTheRingIsWhenItSpeaks) {
  MakeAndFill({.window = 2, .epoch_len = 8});  // [0,4) [4,8)
  MustJoin("silent", {.confirm = false});
  for (int i = 0; i < 3; ++i) {
    Release("a", NextBatch("a"));
    if (i == 1) {
      ASSERT_EQ(Describe(Next("a")), "E0/2");
    }
    ASSERT_TRUE(Produce()) << "silent's start (seq 0) does not hold the producer: " << i;
  }  // the ring is [12,16) [16,20)
  EXPECT_EQ(ConsumerStats("silent")["cursor"], 0);
  s_->Touch("silent");  // its first HEARTBEAT
  EXPECT_EQ(ConsumerStats("silent")["cursor"], 12);
  Release("a", NextBatch("a"));  // [12,16)
  ASSERT_EQ(Describe(Next("a")), "E1/2");
  Release("a", NextBatch("a"));  // [16,20)
  EXPECT_FALSE(Produce()) << "now it pins [12,16)";
  proto::Batch b = NextBatch("silent");
  EXPECT_EQ(b.first_seq, 12u);
  EXPECT_EQ(b.epoch, 0u);
}

// An unconfirmed consumer does not count for min_consumers (nor keeps a
// started producer writing).
TEST_F(SchedulerTest, UnconfirmedConsumersDoNotCountForMinConsumers) {
  Make({.min_consumers = 2});
  MustJoin("a", {});
  MustJoin("b", {.confirm = false});
  EXPECT_FALSE(Produce());
  s_->Next("b", 1);  // a NEXT confirms it too
  EXPECT_TRUE(Produce());
}

// Under skip a laggard is only ever a confirmed consumer; an unconfirmed
// one is not skipped (it pins nothing to skip).
TEST_F(LagTest, AnUnconfirmedConsumerIsNoLaggard) {
  SetUpBlocked(LagPolicy::kSkip);
  MustJoin("silent", {.confirm = false});
  TickAfter(100ms);
  EXPECT_EQ(ConsumerStats("silent")["skipped"], 0);
  EXPECT_EQ(ConsumerStats("slow")["skipped"], 8);
}

}  // namespace
}  // namespace batchcast
