#include "peer_guard.h"

#include <algorithm>

namespace batchcast {

PeerGuard::Peer& PeerGuard::Touch(const std::string& identity, Clock::time_point now) {
  auto it = peers_.find(identity);
  if (it == peers_.end()) {
    if (peers_.size() >= limits_.max_peers) {
      auto oldest = std::min_element(
          peers_.begin(), peers_.end(),
          [](const auto& a, const auto& b) { return a.second.last_seen < b.second.last_seen; });
      peers_.erase(oldest);
    }
    Peer p;
    p.stats_tokens = limits_.stats_per_second;
    p.tokens_at = now;
    it = peers_.emplace(identity, p).first;
  }
  it->second.last_seen = now;
  return it->second;
}

PeerGuard::StatsAnswer PeerGuard::OnStats(const std::string& identity, Clock::time_point now) {
  Peer& p = Touch(identity, now);
  const double rate = limits_.stats_per_second;
  p.stats_tokens = std::min(
      rate, p.stats_tokens + rate * std::chrono::duration<double>(now - p.tokens_at).count());
  p.tokens_at = now;
  if (p.stats_tokens < 1) {
    if (p.refused_at && now - *p.refused_at < std::chrono::seconds(1)) return StatsAnswer::kDrop;
    p.refused_at = now;
    return StatsAnswer::kRefuse;
  }
  p.stats_tokens -= 1;
  if (now - render_window_ >= std::chrono::seconds(1)) {
    render_window_ = now;
    renders_ = 0;
  }
  const bool cache_fresh = last_render_ && now - *last_render_ < limits_.stats_cache_age;
  if (renders_ >= limits_.fresh_stats_per_second && cache_fresh) return StatsAnswer::kCached;
  ++renders_;
  last_render_ = now;
  return StatsAnswer::kFresh;
}

uint64_t PeerGuard::OnBadMessage(const std::string& identity, Clock::time_point now) {
  return ++Touch(identity, now).bad_messages;
}

void PeerGuard::OnWelcomed(const std::string& identity, Clock::time_point now) {
  unconfirmed_[identity] = now;
}

void PeerGuard::OnConsumerMessage(const std::string& identity) { unconfirmed_.erase(identity); }

void PeerGuard::Forget(const std::string& identity) {
  unconfirmed_.erase(identity);
  peers_.erase(identity);
}

std::optional<std::string> PeerGuard::TakeOldestUnconfirmed() {
  if (unconfirmed_.empty()) return std::nullopt;
  auto oldest = std::min_element(unconfirmed_.begin(), unconfirmed_.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string identity = oldest->first;
  unconfirmed_.erase(oldest);
  return identity;
}

std::vector<std::string> PeerGuard::TakeExpired(Clock::time_point now) {
  std::vector<std::string> out;
  for (auto it = unconfirmed_.begin(); it != unconfirmed_.end();) {
    if (now - it->second >= limits_.probation) {
      out.push_back(it->first);
      it = unconfirmed_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void PeerGuard::Prune(Clock::time_point now) {
  std::erase_if(peers_,
                [&](const auto& p) { return now - p.second.last_seen >= limits_.forget_after; });
}

}  // namespace batchcast
