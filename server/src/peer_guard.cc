#include "peer_guard.h"

#include <algorithm>

namespace batchcast {

bool PeerGuard::Bucket::Take(double rate, double burst, Clock::time_point now) {
  if (tokens < 0) {
    tokens = burst;
  } else {
    tokens = std::min(burst, tokens + rate * std::chrono::duration<double>(now - at).count());
  }
  at = now;
  if (tokens < 1) return false;
  tokens -= 1;
  return true;
}

PeerGuard::Peer& PeerGuard::Touch(const std::string& identity, Clock::time_point now) {
  auto it = peers_.find(identity);
  if (it == peers_.end()) {
    if (peers_.size() >= limits_.max_peers) {
      // The least recently heard peer that does not wait for admission.
      auto oldest = peers_.end();
      for (auto p = peers_.begin(); p != peers_.end(); ++p) {
        if (!p->second.waiting &&
            (oldest == peers_.end() || p->second.last_seen < oldest->second.last_seen)) {
          oldest = p;
        }
      }
      if (oldest != peers_.end()) peers_.erase(oldest);
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
  const double total = limits_.stats_total_per_second;
  if (!stats_budget_.Take(total, total, now)) return StatsAnswer::kDrop;
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

bool PeerGuard::TakeHelloToken(Clock::time_point now) {
  const double rate = limits_.hellos_per_second;
  return hello_budget_.Take(rate, rate, now);  // bursts of a second's worth
}

PeerGuard::HelloAnswer PeerGuard::OnHello(const std::string& identity, Clock::time_point now) {
  Peer& p = Touch(identity, now);
  ++p.hellos;
  if (p.waiting) {
    if (p.hellos > 1) {  // a repeater: to the back of the repeaters
      Unqueue(identity);
      repeat_.push_back(identity);
      p.waiting = true;
    }
    return HelloAnswer::kWait;
  }
  p.waiting_since = now;  // also for one admitted now that must wait again (WaitAgain)
  if (waiting() == 0 && unconfirmed_.size() < limits_.max_unconfirmed && TakeHelloToken(now)) {
    return HelloAnswer::kAdmit;
  }
  if (waiting() >= limits_.max_waiting) return HelloAnswer::kRefuse;
  (p.hellos > 1 ? repeat_ : fresh_).push_back(identity);
  p.waiting = true;
  return HelloAnswer::kWait;
}

void PeerGuard::OnRepeatedHello(const std::string& identity, Clock::time_point now) {
  ++Touch(identity, now).hellos;
}

std::optional<std::string> PeerGuard::NextAdmission(Clock::time_point now) {
  if (waiting() == 0 || unconfirmed_.size() >= limits_.max_unconfirmed) return std::nullopt;
  if (!TakeHelloToken(now)) return std::nullopt;
  std::deque<std::string>& queue = fresh_.empty() ? repeat_ : fresh_;
  std::string identity = std::move(queue.front());
  queue.pop_front();
  if (auto it = peers_.find(identity); it != peers_.end()) it->second.waiting = false;
  return identity;
}

std::vector<std::string> PeerGuard::TakeStaleWaiting(Clock::time_point now) {
  std::vector<std::string> out;
  for (std::deque<std::string>* queue : {&fresh_, &repeat_}) {
    std::erase_if(*queue, [&](const std::string& identity) {
      auto it = peers_.find(identity);
      if (it != peers_.end() && now - it->second.waiting_since < limits_.max_wait) return false;
      if (it != peers_.end()) it->second.waiting = false;
      out.push_back(identity);
      return true;
    });
  }
  return out;
}

void PeerGuard::WaitAgain(const std::string& identity) {
  auto it = peers_.find(identity);
  if (it == peers_.end()) return;
  (it->second.hellos > 1 ? repeat_ : fresh_).push_front(identity);
  it->second.waiting = true;
}

void PeerGuard::Unqueue(const std::string& identity) {
  for (std::deque<std::string>* queue : {&fresh_, &repeat_}) {
    if (auto it = std::find(queue->begin(), queue->end(), identity); it != queue->end()) {
      queue->erase(it);
    }
  }
}

void PeerGuard::OnWelcomed(const std::string& identity, Clock::time_point now) {
  unconfirmed_[identity] = now;
}

void PeerGuard::OnConsumerMessage(const std::string& identity) { unconfirmed_.erase(identity); }

void PeerGuard::Forget(const std::string& identity) {
  unconfirmed_.erase(identity);
  if (auto it = peers_.find(identity); it != peers_.end() && it->second.waiting) {
    Unqueue(identity);
    it->second.waiting = false;
  }
}

std::vector<std::string> PeerGuard::TakeExpired(Clock::time_point now) {
  std::vector<std::string> out;
  if (waiting() == 0) return out;  // a silent consumer costs nothing while nobody waits
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
  std::erase_if(peers_, [&](const auto& p) {
    return !p.second.waiting && now - p.second.last_seen >= limits_.forget_after;
  });
}

}  // namespace batchcast
