// The hostile peers of bc_fuzz_peer: each Attack opens its own connections
// to the server's real socket, does its damage and closes them.
//
//   frames     50-500 frames of FrameFuzzer::Any on one connection
//   flood      thousands of one message (NEXT, HEARTBEAT, RELEASE, STATS)
//   multipart  messages of 2-6 frames
//   oversized  one frame above the server's 1 MiB limit (or `huge_bytes`)
//   session    HELLO (absurd or valid); then NEXT, RELEASE and BYE with the
//              peer's own and forged lease ids, garbage in between; it ends
//              with BYE, or (if allowed to) holds its batches and goes silent
//   churn      up to `max_connections` connections at once, most saying
//              HELLO, closed without BYE
//   raw        bytes straight into the stream socket: random, or a ZMTP
//              greeting followed by garbage
//   identity   a DEALER with a chosen routing id sending RELEASE/BYE/NEXT
//   hellos     50-150 connections that each say a valid HELLO again and
//              again and never confirm (Note [Admission])
//   stats      100-300 connections that each ask for STATS a few times
//              (the global STATS budget, Note [Peer limits])
//   hold       up to `max_connections` raw stream connections held open for
//              a while without a handshake (Note [Handshake limits])
//
// Thread-safety: RunAttack may run on several threads at once, each with
// its own FrameFuzzer; FuzzTally's counters are atomic.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <zmq.hpp>

#include "fuzz_frames.h"

namespace batchcast::stress {

enum class Attack {
  kFrames,
  kFlood,
  kMultipart,
  kOversized,
  kSession,
  kChurn,
  kRaw,
  kIdentity,
  kHellos,
  kStats,
  kHold,
  kCount
};
const char* AttackName(Attack attack);

struct FuzzTarget {
  std::string endpoint;       // ipc://PATH or tcp://127.0.0.1:PORT
  size_t huge_bytes = 0;      // an occasional oversized frame of this size
  int max_connections = 200;  // churn: connections open at once
};

struct FuzzTally {
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Attack::kCount)> attacks{};
  std::atomic<uint64_t> frames{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> welcomes{0};  // HELLOs the server accepted
  std::atomic<uint64_t> batches{0};   // BATCH replies hostile sessions got
  std::atomic<uint64_t> errors{0};    // ERROR replies
};

// Runs one attack. `may_hold` lets a session keep its leases and go silent
// (only one thread should: see bc_fuzz_peer's note on stalls).
void RunAttack(Attack attack, zmq::context_t& context, const FuzzTarget& target,
               FrameFuzzer& fuzzer, FuzzTally& tally, bool may_hold);

}  // namespace batchcast::stress
