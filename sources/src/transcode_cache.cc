#include "transcode_cache.h"

namespace batchcast {

TranscodeCache::TranscodeCache(uint64_t files, size_t budget_bytes)
    : files_(budget_bytes > 0 ? files : 0), budget_(budget_bytes) {
  if (files_ > 0) {
    state_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(files_));
    for (uint64_t i = 0; i < files_; ++i) state_[i].store(kUnknown, std::memory_order_relaxed);
  }
}

bool TranscodeCache::Get(int64_t index, std::vector<uint8_t>* out) {
  if (!holds(index)) return false;
  MutexLock lock(&mu_);
  const auto it = kept_.find(index);
  if (it == kept_.end()) return false;
  out->assign(it->second.begin(), it->second.end());
  hits_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool TranscodeCache::Put(int64_t index, const std::vector<uint8_t>& bytes) {
  if (index < 0 || static_cast<uint64_t>(index) >= files_ || state(index) != kUnknown) return false;
  MutexLock lock(&mu_);
  if (bytes_ + bytes.size() > budget_ || kept_.count(index) != 0) return false;
  kept_.emplace(index, bytes);
  bytes_ += bytes.size();
  state_[static_cast<size_t>(index)].store(kHeld, std::memory_order_release);
  return true;
}

void TranscodeCache::MarkRefused(int64_t index) {
  if (index < 0 || static_cast<uint64_t>(index) >= files_) return;
  uint8_t expected = kUnknown;
  if (state_[static_cast<size_t>(index)].compare_exchange_strong(expected, kRefused)) {
    refused_.fetch_add(1, std::memory_order_relaxed);
  }
}

bool TranscodeCache::HasRoom(size_t bytes) const {
  if (!enabled()) return false;
  MutexLock lock(&mu_);
  return bytes_ + bytes <= budget_;
}

int64_t TranscodeCache::files() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(kept_.size());
}

size_t TranscodeCache::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace batchcast
