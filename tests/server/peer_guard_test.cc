// PeerGuard (server/src/peer_guard.h), Note [Peer limits], with a fake clock:
// STATS per peer and renderings for all, unconfirmed consumers, and the
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
  PeerGuardLimits limits;
  limits.stats_per_second = 5;
  limits.fresh_stats_per_second = 1000;
  PeerGuard g(limits);
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
  PeerGuardLimits limits;
  limits.fresh_stats_per_second = 3;
  limits.stats_cache_age = 100ms;
  PeerGuard g(limits);
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

TEST(PeerGuard, UnconfirmedConsumersExpireUnlessTheySpeak) {
  PeerGuardLimits limits;
  limits.probation = 1000ms;
  PeerGuard g(limits);
  g.OnWelcomed("silent", kT0);
  g.OnWelcomed("talker", kT0 + 1ms);
  g.OnConsumerMessage("talker");  // its first HEARTBEAT
  EXPECT_EQ(g.unconfirmed(), 1u);
  EXPECT_TRUE(g.TakeExpired(kT0 + 999ms).empty());
  EXPECT_EQ(g.TakeExpired(kT0 + 1000ms), std::vector<std::string>{"silent"});
  EXPECT_EQ(g.unconfirmed(), 0u);
  EXPECT_TRUE(g.TakeExpired(kT0 + 10s).empty());
}

TEST(PeerGuard, TheOldestUnconfirmedMakesRoom) {
  PeerGuardLimits limits;
  limits.max_unconfirmed = 3;
  PeerGuard g(limits);
  EXPECT_FALSE(g.TakeOldestUnconfirmed());
  g.OnWelcomed("b", kT0 + 2ms);
  g.OnWelcomed("a", kT0 + 1ms);
  EXPECT_FALSE(g.UnconfirmedFull());
  g.OnWelcomed("c", kT0 + 3ms);
  EXPECT_TRUE(g.UnconfirmedFull());
  EXPECT_EQ(g.TakeOldestUnconfirmed(), "a");
  EXPECT_FALSE(g.UnconfirmedFull());
  g.Forget("b");
  EXPECT_EQ(g.TakeOldestUnconfirmed(), "c");
  EXPECT_EQ(g.unconfirmed(), 0u);
}

TEST(PeerGuard, ConnectionChurnDoesNotGrowItsMemory) {
  PeerGuardLimits limits;
  limits.max_peers = 100;
  limits.forget_after = 10s;
  PeerGuard g(limits);
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
