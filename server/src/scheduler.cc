#include "scheduler.h"

#include <algorithm>

#include "batchcast/core/logging.h"
#include "batchcast/core/runtime_dir.h"

namespace batchcast {
namespace {
uint64_t Ms(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}
}  // namespace

Scheduler::Scheduler(SchedulerConfig config)
    : config_(config), slots_(config.window), stream_end_(config.stream_end) {
  BATCHCAST_CHECK(config_.window > 0 && config_.batch_size > 0 && config_.epoch_len > 0);
  for (Slot& s : slots_) s.indices.resize(config_.batch_size);
}

Scheduler::Consumer* Scheduler::Find(const std::string& identity) {
  auto it = consumers_.find(identity);
  return it == consumers_.end() ? nullptr : &it->second;
}
const Scheduler::Consumer* Scheduler::Find(const std::string& identity) const {
  auto it = consumers_.find(identity);
  return it == consumers_.end() ? nullptr : &it->second;
}

uint64_t Scheduler::EpochEnd(const Consumer& c) const {
  return std::min(c.start + (uint64_t{c.epoch} + 1) * config_.epoch_len, stream_end_);
}

// The first seq of the newest unbroken run of begun batches (Note [Leases]):
// an immediate joiner starts there. Older batches kept alive only by leases
// are not part of the run.
uint64_t Scheduler::JoinFloor() const {
  uint64_t floor = next_seq_;
  for (auto it = by_seq_.rbegin(); it != by_seq_.rend(); ++it) {
    const Slot& s = slots_[it->second];
    if (s.end() != floor) break;
    floor = s.first_seq;
  }
  return floor;
}

size_t Scheduler::AttachedCount() const {
  size_t n = 0;
  for (const auto& [_, c] : consumers_) n += c.attached ? 1 : 0;
  return n;
}

uint64_t Scheduler::MinAttachedCursor() const {
  uint64_t m = UINT64_MAX;
  for (const auto& [_, c] : consumers_) {
    if (c.attached && !(c.skipping && c.pending.empty())) m = std::min(m, c.cursor);
  }
  return m;
}

Result<Scheduler::Admission> Scheduler::AddConsumer(const std::string& identity,
                                                    const proto::Hello& hello,
                                                    bool pid_visible) {
  const uint64_t max_batch = std::max<uint64_t>(1, uint64_t{config_.window} * config_.batch_size / 2);
  if (hello.batch_size == 0 || hello.batch_size > max_batch) {
    return InvalidArgumentError("batch size " + std::to_string(hello.batch_size) +
                                " is out of range: this server (window " +
                                std::to_string(config_.window) + " x batch " +
                                std::to_string(config_.batch_size) + ") serves 1 to " +
                                std::to_string(max_batch));
  }
  if (hello.prefetch == 0 || hello.prefetch > config_.max_leases) {
    return InvalidArgumentError("prefetch " + std::to_string(hello.prefetch) +
                                " is out of range 1.." + std::to_string(config_.max_leases));
  }
  std::lock_guard lock(mu_);
  if (consumers_.count(identity) != 0) {
    return InvalidArgumentError("this connection already said HELLO");
  }
  if (consumers_.size() >= config_.max_consumers) {
    return ResourceExhaustedError("the server already has " + std::to_string(consumers_.size()) +
                                  " consumers (limit " + std::to_string(config_.max_consumers) +
                                  ")");
  }
  const uint64_t floor = JoinFloor();
  uint64_t start = floor;
  if (hello.join == JoinPolicy::kNextEpoch) {
    start = (floor + config_.epoch_len - 1) / config_.epoch_len * config_.epoch_len;
  }
  Consumer c;
  c.id = next_consumer_id_++;
  c.identity = identity;
  c.name = hello.name;
  c.pid = static_cast<int>(hello.pid);
  c.pid_visible = pid_visible;
  c.batch_size = hello.batch_size;
  c.drop_last = hello.drop_last;
  c.join = hello.join;
  c.start = start;
  c.cursor = start;
  c.last_seen = c.joined = Clock::now();
  Admission a;
  a.consumer_id = c.id;
  a.batches_per_epoch = hello.drop_last
                            ? config_.epoch_len / hello.batch_size
                            : (config_.epoch_len + hello.batch_size - 1) / hello.batch_size;
  BC_LOG_INFO("consumer {} '{}' (pid {}) joined: batch {}, join {}, starts at seq {}", c.id, c.name,
              c.pid, c.batch_size, hello.join == JoinPolicy::kImmediate ? "immediate" : "next_epoch",
              start);
  consumers_.emplace(identity, std::move(c));
  NotifyProducer();
  return a;
}

bool Scheduler::HasConsumer(const std::string& identity) const {
  std::lock_guard lock(mu_);
  return consumers_.count(identity) != 0;
}

void Scheduler::Send(const Consumer& c, proto::Message m) {
  outbox_.push_back(Outgoing{c.identity, std::move(m)});
}

void Scheduler::Next(const std::string& identity, uint64_t request_id) {
  std::lock_guard lock(mu_);
  Consumer* c = Find(identity);
  if (c == nullptr) return;
  c->last_seen = Clock::now();
  if (!c->attached) {
    Send(*c, proto::Error{request_id, StatusCode::kCancelled,
                          "this consumer left the stream (BYE or eviction); connect again"});
    return;
  }
  if (c->skipping) {
    // Back after a skip: what was overwritten meanwhile is skipped too.
    c->skipping = false;
    const uint64_t floor = JoinFloor();
    if (c->cursor < floor) {
      c->skipped += floor - c->cursor;
      c->cursor = floor;
    }
  }
  c->pending.push_back(request_id);
  ServeLocked(*c);
}

// Serves the head request of `c` if it can be; returns false when it must wait.
bool Scheduler::ServeOneLocked(Consumer& c) {
  const uint64_t rid = c.pending.front();
  const uint64_t L = config_.epoch_len;
  if (c.start + uint64_t{c.epoch} * L >= stream_end_) {
    Send(c, proto::Error{rid, StatusCode::kOutOfRange,
                         "the stream has ended: the server produced all " +
                             std::to_string(stream_end_ / L) + " of its epochs"});
    c.pending.pop_front();
    return true;
  }
  const uint64_t end = EpochEnd(c);
  if (c.cursor >= end || (c.drop_last && end - c.cursor < c.batch_size)) {
    Send(c, proto::EndOfEpoch{rid, c.epoch, c.step, c.skipped});
    c.cursor = std::max(c.cursor, end);
    c.epoch += 1;
    c.step = 0;
    c.pending.pop_front();
    NotifyProducer();
    return true;
  }
  if (c.leases.size() >= config_.max_leases) {
    Send(c, proto::Error{rid, StatusCode::kResourceExhausted,
                         "this consumer holds " + std::to_string(c.leases.size()) +
                             " unreleased batches (limit " + std::to_string(config_.max_leases) +
                             "); release batches before asking for more"});
    c.pending.pop_front();
    return true;
  }
  const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(c.batch_size, end - c.cursor));
  if (c.cursor + n > published_) {
    // If this consumer's own unreleased batches pin every slot, the producer
    // can never write what it waits for: say so instead of hanging.
    std::vector<bool> pinned(slots_.size(), false);
    size_t mine = 0;
    for (const auto& [_, lease_slots] : c.leases) {
      for (uint32_t s : lease_slots) mine += !pinned[s] ? (pinned[s] = true, 1) : 0;
    }
    // Releases may be on their way (they ride on later messages): only a
    // state that lasts kHoardTimeout is an error. CheckLiveness re-checks.
    constexpr auto kHoardTimeout = std::chrono::milliseconds(1000);
    if (mine < slots_.size()) {
      c.hoarding_since.reset();
      return false;
    }
    const auto now = Clock::now();
    if (!c.hoarding_since) c.hoarding_since = now;
    if (now - *c.hoarding_since < kHoardTimeout) return false;
    c.hoarding_since.reset();
    Send(c, proto::Error{rid, StatusCode::kResourceExhausted,
                         "this consumer holds " + std::to_string(c.leases.size()) +
                             " unreleased batches that pin all " +
                             std::to_string(slots_.size()) +
                             " ring slots, so the producer cannot write the next one; drop "
                             "references to old batches (or copy them) or use a larger window"});
    c.pending.pop_front();
    return true;
  }

  proto::Batch b;
  b.request_id = rid;
  b.epoch = c.epoch;
  b.step = c.step;
  b.first_seq = c.cursor;
  b.skipped = c.skipped;
  b.indices.reserve(n);
  std::vector<uint32_t> pinned;
  uint64_t seq = c.cursor;
  while (seq < c.cursor + n) {
    auto it = by_seq_.upper_bound(seq);
    BATCHCAST_CHECK(it != by_seq_.begin()) << "seq " << seq << " is not in the ring";
    --it;
    const uint32_t slot = it->second;
    Slot& s = slots_[slot];
    BATCHCAST_CHECK(s.state == SlotState::kReady && seq >= s.first_seq && seq < s.end())
        << "seq " << seq << " is not in a ready slot";
    const uint32_t offset = static_cast<uint32_t>(seq - s.first_seq);
    const uint32_t count = static_cast<uint32_t>(std::min<uint64_t>(s.end() - seq, c.cursor + n - seq));
    b.segments.push_back(Segment{slot, offset, count, s.epoch});
    b.indices.insert(b.indices.end(), s.indices.begin() + offset,
                     s.indices.begin() + offset + count);
    s.leases += 1;
    pinned.push_back(slot);
    seq += count;
  }
  b.lease_id = c.next_lease++;
  c.leases.emplace(b.lease_id, std::move(pinned));
  c.cursor += n;
  c.step += 1;
  c.batches += 1;
  c.samples += n;
  if (c.drop_last && end > c.cursor && end - c.cursor < c.batch_size) c.cursor = end;
  c.pending.pop_front();
  Send(c, std::move(b));
  NotifyProducer();
  return true;
}

void Scheduler::ServeLocked(Consumer& c) {
  while (!c.pending.empty() && ServeOneLocked(c)) {
  }
}

void Scheduler::ServeAllLocked() {
  for (auto& [_, c] : consumers_) {
    if (c.attached) ServeLocked(c);
  }
}

void Scheduler::Release(const std::string& identity, const std::vector<uint64_t>& lease_ids,
                        bool wake_producer) {
  std::lock_guard lock(mu_);
  Consumer* c = Find(identity);
  if (c == nullptr) return;
  c->last_seen = Clock::now();
  for (uint64_t id : lease_ids) {
    auto it = c->leases.find(id);
    if (it == c->leases.end()) {
      BC_LOG_DEBUG("consumer {} released unknown lease {}", c->id, id);
      continue;
    }
    for (uint32_t slot : it->second) slots_[slot].leases -= 1;
    c->leases.erase(it);
  }
  if (!c->attached && c->leases.empty()) {
    RemoveLocked(identity, "left and released all its batches");
  }
  if (wake_producer) NotifyProducer();
}

void Scheduler::DropLeasesLocked(Consumer& c) {
  for (auto& [_, pinned] : c.leases) {
    for (uint32_t slot : pinned) slots_[slot].leases -= 1;
  }
  c.leases.clear();
}

void Scheduler::DetachLocked(Consumer& c) {
  c.attached = false;
  c.pending.clear();
  if (c.leases.empty()) {
    RemoveLocked(c.identity, "left the stream");
  }
  NotifyProducer();
}

void Scheduler::Bye(const std::string& identity, const std::vector<uint64_t>& kept_leases) {
  std::lock_guard lock(mu_);
  Consumer* c = Find(identity);
  if (c == nullptr) return;
  // Leases the client does not hold (batches in flight or prefetched) end now.
  std::unordered_map<uint64_t, std::vector<uint32_t>> kept;
  for (uint64_t id : kept_leases) {
    if (auto it = c->leases.find(id); it != c->leases.end()) kept.insert(c->leases.extract(it));
  }
  DropLeasesLocked(*c);
  c->leases = std::move(kept);
  BC_LOG_INFO("consumer {} '{}' said goodbye after {} batches ({} leases still held)", c->id,
              c->name, c->batches, c->leases.size());
  DetachLocked(*c);
}

void Scheduler::Touch(const std::string& identity) {
  std::lock_guard lock(mu_);
  if (Consumer* c = Find(identity)) c->last_seen = Clock::now();
}

void Scheduler::RemoveLocked(const std::string& identity, const std::string& reason) {
  auto it = consumers_.find(identity);
  if (it == consumers_.end()) return;
  Consumer& c = it->second;
  BC_LOG_INFO("consumer {} '{}' (pid {}) removed: {}", c.id, c.name, c.pid, reason);
  departed_cursor_ = std::max(departed_cursor_, c.cursor);
  DropLeasesLocked(c);
  consumers_.erase(it);
  NotifyProducer();
}

void Scheduler::Remove(const std::string& identity, const std::string& reason) {
  std::lock_guard lock(mu_);
  if (consumers_.count(identity) == 0) return;  // already gone (e.g. pid check first)
  ++consumers_lost_;
  RemoveLocked(identity, reason);
}

void Scheduler::CheckLiveness(std::chrono::milliseconds heartbeat_timeout) {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  std::vector<std::pair<std::string, std::string>> dead;
  for (const auto& [identity, c] : consumers_) {
    if (c.pid_visible && !ProcessAlive(c.pid)) {
      dead.emplace_back(identity, "its process " + std::to_string(c.pid) + " exited");
    } else if (now - c.last_seen > heartbeat_timeout) {
      dead.emplace_back(identity, "no heartbeat for " + std::to_string(Ms(now - c.last_seen)) +
                                      " ms (timeout " + std::to_string(heartbeat_timeout.count()) +
                                      " ms)");
    }
  }
  for (const auto& [identity, reason] : dead) {
    ++consumers_lost_;
    RemoveLocked(identity, reason);
  }
  ServeAllLocked();  // time-based answers (a consumer pinning every slot)
}

std::vector<std::string> Scheduler::Identities() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(consumers_.size());
  for (const auto& [identity, _] : consumers_) out.push_back(identity);
  return out;
}

void Scheduler::TakeOutbox(std::vector<Outgoing>& out) {
  std::lock_guard lock(mu_);
  out.swap(outbox_);
  outbox_.clear();
}

bool Scheduler::Finished() const {
  std::lock_guard lock(mu_);
  // The producer pauses while nobody is attached, so a stream whose last
  // samples nobody needed (drop_last) is over once a consumer read to its end.
  return started_ && stream_end_ != UINT64_MAX && consumers_.empty() &&
         (published_ >= stream_end_ || departed_cursor_ >= stream_end_);
}

// A slot that may be written now: a free one, else the oldest ready one that
// no lease pins and every attached consumer has passed.
std::optional<uint32_t> Scheduler::FindWritableSlotLocked() const {
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state == SlotState::kFree) return i;
  }
  const uint64_t min_cursor = MinAttachedCursor();
  for (const auto& [first, slot] : by_seq_) {
    const Slot& s = slots_[slot];
    if (s.state == SlotState::kReady && s.leases == 0 && s.end() <= min_cursor &&
        s.end() <= published_) {
      return slot;
    }
  }
  return std::nullopt;
}

// The producer has been blocked for lag_timeout: the consumers whose cursor
// pins the oldest unleased slot jump forward (skip) or are detached (evict).
void Scheduler::ApplyLagPolicyLocked() {
  const Slot* oldest = nullptr;
  for (const auto& [first, slot] : by_seq_) {
    const Slot& s = slots_[slot];
    if (s.state == SlotState::kReady && s.leases == 0 && s.end() <= published_) {
      oldest = &s;
      break;
    }
  }
  if (oldest == nullptr) {
    if (!warned_all_leased_) {
      BC_LOG_WARN("producer blocked: every slot is being written or leased; a consumer holds "
                  "batches without releasing them");
      warned_all_leased_ = true;
    }
    return;
  }
  // A skipping consumer lands at the head of the stream and pins nothing
  // until it asks for data again.
  const uint64_t target = std::max(oldest->end(), published_);
  std::vector<Consumer*> laggards;
  for (auto& [_, c] : consumers_) {
    if (c.attached && c.cursor < oldest->end()) laggards.push_back(&c);
  }
  for (Consumer* c : laggards) {
    const uint64_t behind = published_ - c->cursor;
    if (config_.lag_policy == LagPolicy::kSkip) {
      c->skipped += target - c->cursor;
      BC_LOG_WARN("consumer {} '{}' blocked the producer for {} ms: skipping {} samples forward",
                  c->id, c->name, config_.lag_timeout.count(), target - c->cursor);
      c->cursor = target;
      c->skipping = true;
      ++skip_events_;
      ServeLocked(*c);
    } else {
      BC_LOG_WARN("consumer {} '{}' evicted: it blocked the producer for {} ms, {} samples behind",
                  c->id, c->name, config_.lag_timeout.count(), behind);
      ++consumers_evicted_;
      Send(*c, proto::Error{0, StatusCode::kResourceExhausted,
                            "evicted by the server: this consumer blocked the producer for over " +
                                std::to_string(config_.lag_timeout.count()) + " ms while " +
                                std::to_string(behind) +
                                " samples behind (lag_policy=evict); read faster or use a larger "
                                "window"});
      DetachLocked(*c);
    }
  }
}

Result<SlotGrant> Scheduler::BeginBatch(uint32_t epoch, std::span<const int64_t> indices,
                                        Clock::time_point deadline) {
  const size_t count = indices.size();
  if (count == 0 || count > config_.batch_size) {
    return InvalidArgumentError("a producer batch holds 1 to " +
                                std::to_string(config_.batch_size) + " samples, got " +
                                std::to_string(count));
  }
  std::unique_lock lock(mu_);
  const uint64_t L = config_.epoch_len;
  if (next_seq_ / L != epoch || (next_seq_ + count - 1) / L != epoch) {
    return InvalidArgumentError(
        "batch of " + std::to_string(count) + " samples for producer epoch " +
        std::to_string(epoch) + " does not fit: the stream is at sample " +
        std::to_string(next_seq_ % L) + " of epoch " + std::to_string(next_seq_ / L) +
        ", whose length is " + std::to_string(L));
  }
  if (next_seq_ >= stream_end_) return OutOfRangeError("the stream has ended");
  std::optional<uint32_t> slot;
  bool warned_wait = false;
  while (true) {
    if (stopped_) return CancelledError("server stopped");
    const size_t attached = AttachedCount();
    const bool may_start = started_ ? attached > 0 : attached >= std::max<uint32_t>(1, config_.min_consumers);
    if (may_start) {
      slot = FindWritableSlotLocked();
      if (slot) break;
      const auto now = Clock::now();
      if (!blocked_since_) blocked_since_ = now;
      if (config_.lag_policy != LagPolicy::kBlock && now - *blocked_since_ >= config_.lag_timeout) {
        ApplyLagPolicyLocked();
        blocked_total_ += now - *blocked_since_;
        blocked_since_ = now;
        if (!outbox_.empty() && wakeup_) {
          lock.unlock();
          wakeup_();
          lock.lock();
        }
        continue;
      }
    } else if (!warned_wait && !started_) {
      BC_LOG_INFO("waiting for {} consumer(s) before the first write ({} connected)",
                  std::max<uint32_t>(1, config_.min_consumers), attached);
      warned_wait = true;
    }
    const auto now = Clock::now();
    if (now >= deadline) return DeadlineExceededError("no slot became free in time");
    producer_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
  if (blocked_since_) {
    blocked_total_ += Clock::now() - *blocked_since_;
    blocked_since_.reset();
  }
  warned_all_leased_ = false;
  Slot& s = slots_[*slot];
  if (s.state == SlotState::kReady) by_seq_.erase(s.first_seq);
  s.state = SlotState::kWriting;
  s.first_seq = next_seq_;
  s.count = static_cast<uint32_t>(count);
  s.epoch = epoch;
  std::copy(indices.begin(), indices.end(), s.indices.begin());
  by_seq_[s.first_seq] = *slot;
  next_seq_ += count;
  started_ = true;
  bool wake = !outbox_.empty();
  lock.unlock();
  if (wake && wakeup_) wakeup_();
  return SlotGrant{*slot, s.first_seq, s.count, s.indices.data()};
}

void Scheduler::Commit(uint32_t slot) {
  {
    std::lock_guard lock(mu_);
    BATCHCAST_CHECK(slot < slots_.size() && slots_[slot].state == SlotState::kWriting);
    slots_[slot].state = SlotState::kReady;
    ++batches_written_;
    while (true) {
      auto it = by_seq_.find(published_);
      if (it == by_seq_.end() || slots_[it->second].state != SlotState::kReady) break;
      published_ += slots_[it->second].count;
    }
    ServeAllLocked();
  }
  if (wakeup_) wakeup_();
}

void Scheduler::EndStream() {
  {
    std::lock_guard lock(mu_);
    stream_end_ = std::min(stream_end_, next_seq_);
    started_ = true;
    ServeAllLocked();
  }
  if (wakeup_) wakeup_();
}

void Scheduler::Stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  NotifyProducer();
}

bool Scheduler::stopped() const {
  std::lock_guard lock(mu_);
  return stopped_;
}

nlohmann::json Scheduler::Stats() const {
  std::lock_guard lock(mu_);
  using nlohmann::json;
  const auto now = Clock::now();
  json j;
  j["window"] = config_.window;
  j["batch_size"] = config_.batch_size;
  j["epoch_len"] = config_.epoch_len;
  j["lag_policy"] = std::string(LagPolicyName(config_.lag_policy));
  j["samples_published"] = published_;
  j["batches_written"] = batches_written_;
  j["producer_epoch"] = config_.epoch_len ? published_ / config_.epoch_len : 0;
  j["stream_ended"] = stream_end_ != UINT64_MAX && published_ >= stream_end_;
  if (stream_end_ != UINT64_MAX) j["stream_end"] = stream_end_;
  j["uptime_s"] = std::chrono::duration<double>(now - created_).count();
  auto blocked = blocked_total_ + (blocked_since_ ? now - *blocked_since_ : Clock::duration{0});
  j["producer_blocked_s"] = std::chrono::duration<double>(blocked).count();
  int free = 0, writing = 0, ready = 0, leased = 0;
  for (const Slot& s : slots_) {
    free += s.state == SlotState::kFree;
    writing += s.state == SlotState::kWriting;
    ready += s.state == SlotState::kReady;
    leased += s.leases > 0;
  }
  j["slots"] = {{"free", free}, {"writing", writing}, {"ready", ready}, {"leased", leased}};
  j["consumers_evicted"] = consumers_evicted_;
  j["consumers_lost"] = consumers_lost_;
  j["skip_events"] = skip_events_;
  json list = json::array();
  uint64_t slowest_lag = 0;
  for (const auto& [_, c] : consumers_) {
    const uint64_t lag = published_ > c.cursor && c.attached ? published_ - c.cursor : 0;
    if (c.attached) slowest_lag = std::max(slowest_lag, lag);
    list.push_back({{"id", c.id},
                    {"name", c.name},
                    {"pid", c.pid},
                    {"batch_size", c.batch_size},
                    {"attached", c.attached},
                    {"epoch", c.epoch},
                    {"step", c.step},
                    {"cursor", c.cursor},
                    {"lag_samples", lag},
                    {"batches", c.batches},
                    {"samples", c.samples},
                    {"skipped", c.skipped},
                    {"leases", c.leases.size()},
                    {"pending", c.pending.size()},
                    {"connected_s", std::chrono::duration<double>(now - c.joined).count()}});
  }
  j["consumers"] = list;
  j["slowest_lag_samples"] = slowest_lag;
  j["slowest_lag_slots"] =
      static_cast<double>(slowest_lag) / static_cast<double>(config_.batch_size);
  return j;
}

}  // namespace batchcast
