#include "lease_ledger.h"

#include <algorithm>
#include <utility>

namespace batchcast::internal {

void LeaseLedger::Arrive(uint64_t id) {
  if (id == 0) return;
  if (detached_) {
    queued_.push_back(id);  // nobody will read it (Note [Client leases])
    return;
  }
  live_.try_emplace(id);
}

void LeaseLedger::Deliver(uint64_t id) {
  auto it = live_.find(id);
  if (it != live_.end() && it->second.state == State::kPrefetched) it->second.state = State::kHeld;
}

void LeaseLedger::Release(uint64_t id) { ReleaseAfter(id, {}); }

void LeaseLedger::ReleaseAfter(uint64_t id, CompletionTokens tokens) {
  auto it = live_.find(id);
  if (it == live_.end() || it->second.state == State::kPending) return;
  if (tokens.empty()) {
    Queue(id);
    return;
  }
  it->second.state = State::kPending;
  it->second.tokens = std::move(tokens);
  ++pending_;
}

void LeaseLedger::Detach() {
  detached_ = true;
  std::vector<uint64_t> prefetched;
  for (const auto& [id, lease] : live_) {
    if (lease.state == State::kPrefetched) prefetched.push_back(id);
  }
  for (uint64_t id : prefetched) Queue(id);
}

void LeaseLedger::Queue(uint64_t id) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  if (it->second.state == State::kPending) --pending_;
  live_.erase(it);
  queued_.push_back(id);
}

void LeaseLedger::PollPending() {
  std::vector<uint64_t> done;
  for (auto& [id, lease] : live_) {
    if (lease.state != State::kPending) continue;
    if (std::all_of(lease.tokens.begin(), lease.tokens.end(),
                    [](const std::unique_ptr<CompletionToken>& t) { return t->Done(); })) {
      done.push_back(id);
    }
  }
  for (uint64_t id : done) Queue(id);
}

std::vector<uint64_t> LeaseLedger::Take() {
  if (pending_ > 0) PollPending();
  return std::exchange(queued_, {});
}

std::vector<uint64_t> LeaseLedger::Held() const {
  std::vector<uint64_t> out;
  for (const auto& [id, lease] : live_) {
    if (lease.state != State::kPrefetched) out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void LeaseLedger::WaitForPending() {
  for (auto& [id, lease] : live_) {
    for (const std::unique_ptr<CompletionToken>& t : lease.tokens) t->Wait();
  }
}

}  // namespace batchcast::internal
