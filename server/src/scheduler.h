// Scheduler: the state shared by the producer and the control loop: the ring's
// slot table, every consumer's window position and leases, and the rules that
// decide when a slot may be rewritten and what a consumer's next batch is.
//
// Note [Leases]
// A slot may be rewritten only when (a) no lease pins it and (b) every attached
// consumer's cursor (the next seq it will be served) is past the slot's last
// sample. A lease is taken when a BATCH is sent and ends on RELEASE or when the
// consumer is removed (BYE with no leases left, pid gone, heartbeats stopped).
// Eviction and BYE only *detach* a consumer (it loses its window position);
// its leases stay until released or until it dies, so memory that a live
// consumer may still read is never overwritten. The client releases on Batch
// destruction (client/src/connection.h) and, for gathered batches, right after
// the copy. The lag policies move cursors, never leases.
//
// Note [Consumer epochs]
// Consumer epoch k covers seqs [start + k*L, start + (k+1)*L) clipped to the
// stream end, where L = epoch_len and `start` is fixed at join (an epoch start
// for join=next_epoch, the oldest held sample for join=immediate). A NEXT is
// answered with the next min(B, left) samples of the epoch; with drop_last a
// remainder shorter than B is passed over at once (so it pins nothing), and
// the following NEXT gets END_OF_EPOCH. A skip jump may move the cursor over
// epoch ends: each one crossed is still reported as END_OF_EPOCH. An epoch
// that would start at or after the stream end does not exist: NEXT then gets
// OutOfRange.
//
// Thread-safety: all methods lock one mutex. BeginBatch blocks the producer
// thread on a condition variable; every other method is non-blocking and is
// meant for the control thread. Replies are queued in an outbox drained by
// the control thread; `wakeup` is called (without the lock held) when a
// producer-side call queued something.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/src/protocol.h"
#include "batchcast/core/status.h"
#include "batchcast/server/server_options.h"

namespace batchcast {

using Clock = std::chrono::steady_clock;

struct SchedulerConfig {
  uint32_t window = 8;
  uint32_t batch_size = 64;
  uint64_t epoch_len = 0;
  uint64_t stream_end = UINT64_MAX;  // epochs * epoch_len, or unknown
  LagPolicy lag_policy = LagPolicy::kBlock;
  std::chrono::milliseconds lag_timeout{1000};
  uint32_t min_consumers = 1;
  uint32_t max_consumers = 256;
  uint32_t max_leases = 16;
};

struct Outgoing {
  std::string identity;
  proto::Message message;
};

// What the producer may write.
struct SlotGrant {
  uint32_t slot = 0;
  uint64_t first_seq = 0;
  uint32_t count = 0;
  int64_t* indices = nullptr;  // the slot's index array (count entries), writable until Commit
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config);

  void set_wakeup(std::function<void()> wakeup) { wakeup_ = std::move(wakeup); }
  const SchedulerConfig& config() const { return config_; }

  // ---- control thread ----
  struct Admission {
    uint64_t consumer_id = 0;
    uint64_t batches_per_epoch = 0;
  };
  // Registers a consumer behind ZeroMQ identity `identity`. InvalidArgument for
  // bad HELLO values, ResourceExhausted when max_consumers are connected.
  Result<Admission> AddConsumer(const std::string& identity, const proto::Hello& hello,
                                bool pid_visible);
  bool HasConsumer(const std::string& identity) const;
  void Next(const std::string& identity, uint64_t request_id);
  // Ends leases. With wake_producer=false the caller wakes it later
  // (WakeProducer), e.g. after sending a reply that should not wait for it.
  void Release(const std::string& identity, const std::vector<uint64_t>& lease_ids,
               bool wake_producer = true);
  void WakeProducer() { NotifyProducer(); }
  void Bye(const std::string& identity, const std::vector<uint64_t>& kept_leases);
  void Touch(const std::string& identity);
  // Drops consumers whose process is gone or whose heartbeats stopped.
  void CheckLiveness(std::chrono::milliseconds heartbeat_timeout);
  // Identities of every connected consumer (for heartbeats).
  std::vector<std::string> Identities() const;
  // Drops a consumer at once (its peer is unreachable).
  void Remove(const std::string& identity, const std::string& reason);
  void TakeOutbox(std::vector<Outgoing>& out);
  // True once the stream has ended, was fully published, and no consumer is left.
  bool Finished() const;
  nlohmann::json Stats() const;

  // ---- producer thread ----
  // Waits for a writable slot for the next `indices.size()` samples of
  // producer epoch `epoch` (see Note [Leases]). Errors: Cancelled after Stop(),
  // DeadlineExceeded, InvalidArgument (count, or a batch crossing an epoch end).
  Result<SlotGrant> BeginBatch(uint32_t epoch, std::span<const int64_t> indices,
                               Clock::time_point deadline);
  // REQUIRES: `slot` came from BeginBatch and was not committed yet.
  void Commit(uint32_t slot);
  // No batch follows the ones begun so far.
  void EndStream();
  void Stop();
  bool stopped() const;

 private:
  enum class SlotState : uint8_t { kFree, kWriting, kReady };
  struct Slot {
    SlotState state = SlotState::kFree;
    uint64_t first_seq = 0;
    uint32_t count = 0;
    uint32_t epoch = 0;
    uint32_t leases = 0;
    std::vector<int64_t> indices;
    uint64_t end() const { return first_seq + count; }
  };
  struct Consumer {
    uint64_t id = 0;
    std::string identity;
    std::string name;
    int pid = 0;
    bool pid_visible = false;
    uint32_t batch_size = 0;
    bool drop_last = true;
    JoinPolicy join = JoinPolicy::kImmediate;
    bool attached = true;
    // Skipped by the lag policy and not asking for data: its cursor pins
    // nothing until its next NEXT (Note [Consumer epochs]).
    bool skipping = false;
    uint64_t start = 0;
    uint64_t cursor = 0;
    uint32_t epoch = 0;
    uint32_t step = 0;
    uint64_t skipped = 0;
    std::deque<uint64_t> pending;
    std::unordered_map<uint64_t, std::vector<uint32_t>> leases;
    uint64_t next_lease = 1;
    uint64_t batches = 0;
    uint64_t samples = 0;
    // Since when its own leases pin every slot while it waits (see ServeOneLocked).
    std::optional<Clock::time_point> hoarding_since;
    Clock::time_point last_seen;
    Clock::time_point joined;
  };

  Consumer* Find(const std::string& identity);
  const Consumer* Find(const std::string& identity) const;
  uint64_t EpochEnd(const Consumer& c) const;
  uint64_t JoinFloor() const;
  void ServeLocked(Consumer& c);
  void ServeAllLocked();
  bool ServeOneLocked(Consumer& c);
  void Send(const Consumer& c, proto::Message m);
  void DropLeasesLocked(Consumer& c);
  void RemoveLocked(const std::string& identity, const std::string& reason);
  void DetachLocked(Consumer& c);
  std::optional<uint32_t> FindWritableSlotLocked() const;
  void ApplyLagPolicyLocked();
  uint64_t MinAttachedCursor() const;
  size_t AttachedCount() const;
  void NotifyProducer() { producer_cv_.notify_all(); }

  const SchedulerConfig config_;
  mutable std::mutex mu_;
  std::condition_variable producer_cv_;
  std::function<void()> wakeup_;

  std::vector<Slot> slots_;
  std::map<uint64_t, uint32_t> by_seq_;  // first_seq -> slot, for writing and ready slots
  uint64_t next_seq_ = 0;                // first seq not yet begun
  uint64_t published_ = 0;               // every seq below is ready
  uint64_t stream_end_;
  bool started_ = false;
  uint64_t departed_cursor_ = 0;  // the furthest cursor of a consumer that left
  bool stopped_ = false;
  std::optional<Clock::time_point> blocked_since_;
  bool warned_all_leased_ = false;

  std::map<std::string, Consumer> consumers_;  // by identity
  uint64_t next_consumer_id_ = 1;
  std::vector<Outgoing> outbox_;

  // Stats.
  Clock::time_point created_ = Clock::now();
  uint64_t batches_written_ = 0;
  uint64_t consumers_evicted_ = 0;
  uint64_t consumers_lost_ = 0;
  uint64_t skip_events_ = 0;
  std::chrono::nanoseconds blocked_total_{0};
};

}  // namespace batchcast
