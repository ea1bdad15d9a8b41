// PeerGuard: what the control loop remembers about each peer (a ZeroMQ
// identity, i.e. one connection) so that no peer can starve the others or
// grow the server's memory (docs/design.md, "Hardening").
//
// Note [Peer limits]
// - STATS needs no HELLO, so it is bounded three times: each peer is
//   answered at most `stats_per_second` times a second (a token bucket;
//   beyond it the first refused request of each second gets a
//   ResourceExhausted ERROR, the rest are dropped); all peers together get at
//   most `stats_total_per_second` answers a second (beyond that, requests are
//   dropped: many connections cannot add up to a flood); and the stats JSON
//   (which takes the Scheduler's lock) is rendered at most
//   `fresh_stats_per_second` times a second for all peers together; beyond
//   that, requests get the last rendering, at most `stats_cache_age` old. So
//   in normal use every STATS is fresh.
// - Malformed messages are counted per peer (for the log); only the first
//   100 of a peer are answered. With the control loop's high-water marks (at
//   most 1000 messages queued per peer each way; a consumer whose queue is
//   full is dropped), a peer that sends and never reads cannot make the
//   server hold more than a bounded amount of memory for it.
// - Entries of peers not heard from for `forget_after` are pruned, and at
//   most `max_peers` are kept (the least recently heard goes first), so
//   connection churn cannot grow memory.
//
// Note [Admission]
// A consumer is *unconfirmed* from its WELCOME until it says anything else
// (the client sends a HEARTBEAT at once); it pins nothing meanwhile (Note
// [Unconfirmed consumers], scheduler.h). HELLOs are admitted (the Scheduler
// asked, WELCOME or ERROR sent) only while fewer than `max_unconfirmed`
// consumers are unconfirmed (the server allows max_consumers: an unconfirmed
// consumer costs little) and the global budget allows (`hellos_per_second`,
// in bursts of a second's worth); the others *wait*, in arrival order, as
// does a HELLO that finds the server full while some consumers are
// unconfirmed. They are admitted as places free up: when a consumer speaks
// (at once, for a real client) or when one ends its `probation` silent while
// others wait (then it is dropped; while nobody waits it may stay silent). A
// welcomed consumer is never displaced by a newcomer, so consumers that join
// together (the ranks of a DDP job, the jobs of a launcher) all get in, just
// in turn. A peer that says HELLO again on its connection (a real client
// never does) is a *repeater*: its HELLOs wait behind every first HELLO, so a
// flood of repeated HELLOs cannot keep a new consumer out for more than one
// probation. At most `max_waiting` HELLOs wait (a peer has at most one
// place; a repeated HELLO replaces its waiting one); beyond that, and after
// `max_wait` in the queue, a HELLO is refused with ResourceExhausted.
//
// Time is passed in (tests/server/peer_guard_test.cc uses a fake clock).
// Thread-safety: none; the control thread owns it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace batchcast {

struct PeerGuardLimits {
  uint32_t stats_per_second = 100;
  uint32_t stats_total_per_second = 1000;
  uint32_t fresh_stats_per_second = 50;
  std::chrono::milliseconds stats_cache_age{100};
  size_t max_unconfirmed = 64;
  std::chrono::milliseconds probation{1000};
  uint32_t hellos_per_second = 1000;
  size_t max_waiting = 4096;
  std::chrono::milliseconds max_wait{30000};
  std::chrono::milliseconds forget_after{2000};
  size_t max_peers = 4096;
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

  // ---- Note [Admission] ----
  enum class HelloAnswer {
    kAdmit,   // admit it now
    kWait,    // it waits: NextAdmission returns it when its turn comes
    kRefuse,  // too many are waiting: answer ResourceExhausted
  };
  // A HELLO from `identity` (not a consumer yet). A peer already waiting
  // keeps one place (kWait: the new HELLO replaces the waiting one).
  HelloAnswer OnHello(const std::string& identity, Clock::time_point now);
  // A HELLO from a peer that is a consumer already: it becomes a repeater.
  void OnRepeatedHello(const std::string& identity, Clock::time_point now);
  // The next waiting peer to admit now (room and budget permitting), which
  // leaves the queue; nullopt when none may be admitted now.
  std::optional<std::string> NextAdmission(Clock::time_point now);
  // Waiting peers past max_wait, which leave the queue (to be refused).
  std::vector<std::string> TakeStaleWaiting(Clock::time_point now);
  // Admission of a peer that NextAdmission returned could not be completed
  // because the server is full of unconfirmed consumers: it waits again, at
  // the front of its queue.
  void WaitAgain(const std::string& identity);

  // A consumer was admitted (WELCOME sent): unconfirmed from now.
  void OnWelcomed(const std::string& identity, Clock::time_point now);
  // Any message but HELLO and STATS: the consumer (if it is one) is confirmed.
  void OnConsumerMessage(const std::string& identity);
  // The consumer is gone (removed, dropped): forget it.
  void Forget(const std::string& identity);
  // Removes and returns the unconfirmed consumers past their probation.
  std::vector<std::string> TakeExpired(Clock::time_point now);

  // Drops the entries of peers not heard from for forget_after.
  void Prune(Clock::time_point now);

  size_t peers() const { return peers_.size(); }
  size_t unconfirmed() const { return unconfirmed_.size(); }
  size_t waiting() const { return fresh_.size() + repeat_.size(); }
  const PeerGuardLimits& limits() const { return limits_; }

 private:
  struct Peer {
    Clock::time_point last_seen;
    double stats_tokens = 0;
    Clock::time_point tokens_at;
    std::optional<Clock::time_point> refused_at;  // the last kRefuse answer
    uint64_t bad_messages = 0;
    uint64_t hellos = 0;   // HELLOs said on this connection
    bool waiting = false;  // in fresh_ or repeat_
    Clock::time_point waiting_since;
  };
  // A token bucket of `rate` a second, at most `burst` tokens.
  struct Bucket {
    double tokens = -1;  // < 0: full (not used yet)
    Clock::time_point at;
    bool Take(double rate, double burst, Clock::time_point now);
  };
  Peer& Touch(const std::string& identity, Clock::time_point now);
  // A token of the global HELLO budget (Note [Admission]).
  bool TakeHelloToken(Clock::time_point now);
  // Removes `identity` from whichever queue holds it.
  void Unqueue(const std::string& identity);

  const PeerGuardLimits limits_;
  std::unordered_map<std::string, Peer> peers_;
  std::unordered_map<std::string, Clock::time_point> unconfirmed_;  // -> when welcomed
  // Note [Admission]: waiting peers, first HELLOs and repeaters, in order.
  std::deque<std::string> fresh_;
  std::deque<std::string> repeat_;
  Bucket hello_budget_;
  Bucket stats_budget_;
  // Fresh stats renderings in the current one-second window.
  Clock::time_point render_window_{};
  uint32_t renders_ = 0;
  std::optional<Clock::time_point> last_render_;
};

}  // namespace batchcast
