// PeerGuard (server/src/peer_guard.h), Note [Peer limits] and Note
// [Admission], with a fake clock: STATS per peer, for all peers and
// renderings; HELLOs admitted in turn, never displacing a welcomed consumer,
// repeaters behind first HELLOs, a global budget, a bounded queue; and the
// bounded memory of per-peer state under connection churn.
#include "server/src/peer_guard.h"

#include <gtest/gtest.h>

#include <string>

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using Answer = PeerGuard::StatsAnswer;
const PeerGuard::Clock::time_point kT0 = PeerGuard::Clock::time_point() + 1000s;

TEST(PeerGuard, StatsPerPeerAreLimitedAndOthersAreNotAffected) {
  PeerGuard g({.stats_per_second = 5, .fresh_stats_per_second = 1000});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(g.OnStats("flood", kT0), Answer::kFresh) << i;
  EXPECT_EQ(g.OnStats("flood", kT0), Answer::kRefuse);  // told once ...
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(g.OnStats("flood", kT0 + 10ms), Answer::kDrop);  // ... then ignored
  EXPECT_EQ(g.OnStats("polite", kT0 + 10ms), Answer::kFresh);  // its own budget
  // Tokens come back at 5 a second; the refusal is repeated at most once a second.
  EXPECT_EQ(g.OnStats("flood", kT0 + 300ms), Answer::kFresh);
  EXPECT_EQ(g.OnStats("flood", kT0 + 310ms), Answer::kDrop);
  EXPECT_EQ(g.OnStats("flood", kT0 + 1100ms), Answer::kFresh);
  EXPECT_EQ(g.OnStats("flood", kT0 + 1100ms), Answer::kFresh);
}

TEST(PeerGuard, StatsAreRenderedAtMostSoOftenForEveryone) {
  PeerGuard g({.fresh_stats_per_second = 3, .stats_cache_age = 100ms});
  // Many peers (new connections each): three renderings, then the cache.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(g.OnStats("p" + std::to_string(i), kT0), Answer::kFresh);
  for (int i = 3; i < 50; ++i)
    EXPECT_EQ(g.OnStats("p" + std::to_string(i), kT0 + 50ms), Answer::kCached);
  // Never older than stats_cache_age.
  EXPECT_EQ(g.OnStats("late", kT0 + 150ms), Answer::kFresh);
  EXPECT_EQ(g.OnStats("later", kT0 + 160ms), Answer::kCached);
  // In normal use (a few a second) every answer is fresh.
  PeerGuard normal{PeerGuardLimits{}};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(normal.OnStats("stat", kT0 + i * 200ms), Answer::kFresh);
}

TEST(PeerGuard, StatsOfAllPeersTogetherAreLimited) {
  PeerGuard g({.stats_total_per_second = 10});
  // A thousand connections asking once each: ten answers, the rest dropped.
  int answered = 0;
  for (int i = 0; i < 1000; ++i) {
    answered += g.OnStats("p" + std::to_string(i), kT0) != Answer::kDrop ? 1 : 0;
  }
  EXPECT_EQ(answered, 10);
  EXPECT_NE(g.OnStats("later", kT0 + 1s), Answer::kDrop) << "the budget comes back";
}

using Hello = PeerGuard::HelloAnswer;

TEST(PeerGuard, HellosAreAdmittedWhileThereIsRoomThenWaitInOrder) {
  PeerGuard g({.max_unconfirmed = 2});
  EXPECT_EQ(g.OnHello("a", kT0), Hello::kAdmit);
  g.OnWelcomed("a", kT0);
  EXPECT_EQ(g.OnHello("b", kT0), Hello::kAdmit);
  g.OnWelcomed("b", kT0);
  for (const char* id : {"c", "d", "e"}) EXPECT_EQ(g.OnHello(id, kT0), Hello::kWait) << id;
  EXPECT_EQ(g.waiting(), 3u);
  EXPECT_FALSE(g.NextAdmission(kT0)) << "no room: a and b are unconfirmed";
  g.OnConsumerMessage("a");  // a's first HEARTBEAT
  EXPECT_EQ(g.NextAdmission(kT0), "c");
  g.OnWelcomed("c", kT0);
  EXPECT_FALSE(g.NextAdmission(kT0));
  g.OnConsumerMessage("b");
  g.OnConsumerMessage("c");
  EXPECT_EQ(g.NextAdmission(kT0), "d");
  g.OnWelcomed("d", kT0);
  EXPECT_EQ(g.NextAdmission(kT0), "e");
  g.OnWelcomed("e", kT0);
  EXPECT_EQ(g.waiting(), 0u);
  EXPECT_EQ(g.OnHello("f", kT0), Hello::kWait) << "d and e hold the places";
}

TEST(PeerGuard, AWelcomedConsumerIsNeverDisplacedAndExpiresOnlyWhenOthersWait) {
  PeerGuard g({.max_unconfirmed = 1, .probation = 1000ms});
  ASSERT_EQ(g.OnHello("slow", kT0), Hello::kAdmit);
  g.OnWelcomed("slow", kT0);
  EXPECT_TRUE(g.TakeExpired(kT0 + 10s).empty()) << "nobody waits: a silent consumer costs nothing";
  EXPECT_EQ(g.OnHello("new", kT0 + 10s), Hello::kWait);
  EXPECT_FALSE(g.NextAdmission(kT0 + 10s)) << "the newcomer waits; slow keeps its place";
  EXPECT_EQ(g.TakeExpired(kT0 + 10s), std::vector<std::string>{"slow"});
  EXPECT_EQ(g.NextAdmission(kT0 + 10s), "new");
}

TEST(PeerGuard, RepeatedHellosWaitBehindFirstOnes) {
  PeerGuard g({.max_unconfirmed = 1});
  ASSERT_EQ(g.OnHello("flood0", kT0), Hello::kAdmit);
  g.OnWelcomed("flood0", kT0);
  g.OnRepeatedHello("flood0", kT0);
  EXPECT_EQ(g.OnHello("flood1", kT0), Hello::kWait);
  EXPECT_EQ(g.OnHello("flood1", kT0), Hello::kWait) << "one place per peer";
  EXPECT_EQ(g.OnHello("flood1", kT0), Hello::kWait);
  EXPECT_EQ(g.waiting(), 1u);
  EXPECT_EQ(g.OnHello("honest", kT0 + 1ms), Hello::kWait);
  // flood0 ends its probation silent; the honest newcomer goes first.
  EXPECT_EQ(g.TakeExpired(kT0 + 2s), std::vector<std::string>{"flood0"});
  g.Forget("flood0");
  EXPECT_EQ(g.NextAdmission(kT0 + 2s), "honest");
  g.OnWelcomed("honest", kT0 + 2s);
  g.OnConsumerMessage("honest");
  EXPECT_EQ(g.NextAdmission(kT0 + 2s), "flood1");
  // A dropped repeater that says HELLO again waits behind a first HELLO too.
  g.OnWelcomed("flood1", kT0 + 2s);
  EXPECT_EQ(g.OnHello("flood0", kT0 + 2s), Hello::kWait);
  EXPECT_EQ(g.OnHello("second", kT0 + 2s), Hello::kWait);
  g.OnConsumerMessage("flood1");
  EXPECT_EQ(g.NextAdmission(kT0 + 2s), "second");
  EXPECT_EQ(g.waiting(), 1u);
}

TEST(PeerGuard, HelloAdmissionsHaveAGlobalBudget) {
  PeerGuard g({.hellos_per_second = 10});
  int admitted = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string id = "p" + std::to_string(i);
    if (g.OnHello(id, kT0) == Hello::kAdmit) {
      ++admitted;
      g.OnWelcomed(id, kT0);
      g.OnConsumerMessage(id);  // confirmed at once: room stays
    }
  }
  EXPECT_EQ(admitted, 10) << "a burst of a second's worth";
  EXPECT_EQ(g.waiting(), 2u);
  EXPECT_FALSE(g.NextAdmission(kT0 + 50ms));
  EXPECT_TRUE(g.NextAdmission(kT0 + 100ms)) << "ten a second";
}

TEST(PeerGuard, TheWaitingQueueIsBoundedAndStaleHellosLeaveIt) {
  PeerGuard g({.max_unconfirmed = 1, .max_waiting = 3, .max_wait = 30s});
  ASSERT_EQ(g.OnHello("a", kT0), Hello::kAdmit);
  g.OnWelcomed("a", kT0);
  for (const char* id : {"b", "c", "d"}) EXPECT_EQ(g.OnHello(id, kT0), Hello::kWait);
  EXPECT_EQ(g.OnHello("e", kT0), Hello::kRefuse);
  g.Prune(kT0 + 20s);  // waiting peers are kept
  EXPECT_EQ(g.waiting(), 3u);
  EXPECT_TRUE(g.TakeStaleWaiting(kT0 + 29s).empty());
  EXPECT_EQ(g.TakeStaleWaiting(kT0 + 30s).size(), 3u);
  EXPECT_EQ(g.waiting(), 0u);
}

// A HELLO admitted at once whose admission finds the server full of
// unconfirmed consumers waits from then on, its max_wait counted from its
// HELLO.
TEST(PeerGuard, AHelloThatMustWaitAgainCountsItsWaitFromItsHello) {
  PeerGuardLimits limits;
  limits.max_wait = 30s;
  PeerGuard g(limits);
  ASSERT_EQ(g.OnHello("a", kT0), Hello::kAdmit);
  g.WaitAgain("a");  // the Scheduler said the server is full
  EXPECT_TRUE(g.TakeStaleWaiting(kT0 + 29s).empty());
  EXPECT_EQ(g.TakeStaleWaiting(kT0 + 30s), std::vector<std::string>{"a"});
}

TEST(PeerGuard, ConnectionChurnDoesNotGrowItsMemory) {
  PeerGuard g({.forget_after = 10s, .max_peers = 100});
  for (int i = 0; i < 10000; ++i) {
    const std::string id = "conn" + std::to_string(i);
    const auto t = kT0 + i * 1ms;
    if (i % 2 == 0) {
      (void)g.OnStats(id, t);
    } else {
      EXPECT_EQ(g.OnBadMessage(id, t), 1u);
    }
    ASSERT_LE(g.peers(), 100u);
  }
  EXPECT_EQ(g.OnBadMessage("conn9999", kT0 + 9999ms), 2u);  // recent peers are still known
  g.Prune(kT0 + 9999ms + 10s);
  EXPECT_EQ(g.peers(), 0u);
}

}  // namespace
}  // namespace batchcast
