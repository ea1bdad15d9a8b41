// PeerGuard: what the control loop remembers about each peer (a ZeroMQ
// identity, i.e. one connection) so that no peer can starve the others or
// grow the server's memory (docs/design.md, "Hardening").
//
// Note [Peer limits]
// - STATS needs no HELLO, so it is bounded twice: each peer is answered at
//   most `stats_per_second` times a second (a token bucket; beyond it the
//   first refused request of each second gets a ResourceExhausted ERROR, the
//   rest are dropped), and the stats JSON (which takes the Scheduler's lock)
//   is rendered at most `fresh_stats_per_second` times a second for all
//   peers together; beyond that, requests get the last rendering, at most
//   `stats_cache_age` old. So in normal use every STATS is fresh.
// - A consumer is *unconfirmed* from its WELCOME until it says anything
//   else (the client sends a HEARTBEAT at once). An unconfirmed consumer
//   holds a place among max_consumers only briefly: it is dropped after
//   `probation`; at most `max_unconfirmed` exist at once (a HELLO beyond
//   that displaces the oldest); and a HELLO that finds the server full
//   displaces the oldest unconfirmed one. So HELLOs that are never followed
//   by anything cannot keep real consumers out.
// - Malformed messages are counted per peer (for the log); only the first
//   100 of a peer are answered. With the control loop's high-water marks (at
//   most 1000 messages queued per peer each way; a consumer whose queue is
//   full is dropped), a peer that sends and never reads cannot make the
//   server hold more than a bounded amount of memory for it.
// - Entries of peers not heard from for `forget_after` are pruned, and at
//   most `max_peers` are kept (the least recently heard goes first), so
//   connection churn cannot grow memory.
//
// Time is passed in (tests/server/peer_guard_test.cc uses a fake clock).
// Thread-safety: none; the control thread owns it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace batchcast {

struct PeerGuardLimits {
  uint32_t stats_per_second = 100;
  uint32_t fresh_stats_per_second = 50;
  std::chrono::milliseconds stats_cache_age{100};
  size_t max_unconfirmed = 64;
  std::chrono::milliseconds probation{1000};
  std::chrono::milliseconds forget_after{2000};
  size_t max_peers = 1024;
};

class PeerGuard {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PeerGuard(PeerGuardLimits limits) : limits_(limits) {}

  enum class StatsAnswer {
    kFresh,   // render the stats now (and keep them for kCached answers)
    kCached,  // answer with the last rendering
    kRefuse,  // answer ResourceExhausted (this peer asks too often)
    kDrop,    // say nothing (it was told this second already)
  };
  StatsAnswer OnStats(const std::string& identity, Clock::time_point now);
  // A malformed message from `identity`; how many it sent so far.
  uint64_t OnBadMessage(const std::string& identity, Clock::time_point now);

  // A consumer was admitted (WELCOME sent): unconfirmed from now.
  void OnWelcomed(const std::string& identity, Clock::time_point now);
  // Any message but HELLO and STATS: the consumer (if it is one) is confirmed.
  void OnConsumerMessage(const std::string& identity);
  // The consumer is gone (removed, displaced): forget it.
  void Forget(const std::string& identity);
  // True when a new HELLO must first displace an unconfirmed consumer.
  bool UnconfirmedFull() const { return unconfirmed_.size() >= limits_.max_unconfirmed; }
  // Removes and returns the oldest unconfirmed consumer, if any.
  std::optional<std::string> TakeOldestUnconfirmed();
  // Removes and returns the unconfirmed consumers past their probation.
  std::vector<std::string> TakeExpired(Clock::time_point now);

  // Drops the entries of peers not heard from for forget_after.
  void Prune(Clock::time_point now);

  size_t peers() const { return peers_.size(); }
  size_t unconfirmed() const { return unconfirmed_.size(); }
  const PeerGuardLimits& limits() const { return limits_; }

 private:
  struct Peer {
    Clock::time_point last_seen;
    double stats_tokens = 0;
    Clock::time_point tokens_at;
    std::optional<Clock::time_point> refused_at;  // the last kRefuse answer
    uint64_t bad_messages = 0;
  };
  Peer& Touch(const std::string& identity, Clock::time_point now);

  const PeerGuardLimits limits_;
  std::unordered_map<std::string, Peer> peers_;
  std::unordered_map<std::string, Clock::time_point> unconfirmed_;  // -> when welcomed
  // Fresh stats renderings in the current one-second window.
  Clock::time_point render_window_{};
  uint32_t renders_ = 0;
  std::optional<Clock::time_point> last_render_;
};

}  // namespace batchcast
