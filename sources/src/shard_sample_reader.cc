// The SampleReader of tar shard datasets: Note [Shard reads] (sample_reader.h).
#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/src/mutex.h"
#include "image_dataset.h"
#include "sample_reader.h"
#include "tar_archive.h"

namespace batchcast {
namespace {

class ShardSampleReader : public SampleReader {
 public:
  ShardSampleReader(const ImageDataset& dataset, size_t max_held)
      : dataset_(dataset),
        max_held_(max_held),
        begin_(dataset.shards().size() + 1, 0),
        passed_(dataset.shards().size(), false) {
    // Shard k's samples are the indices [begin_[k], begin_[k + 1]), in member order.
    for (uint64_t i = 0; i < dataset.size(); ++i)
      ++begin_[dataset.file(static_cast<int64_t>(i)).shard + 1];
    for (size_t k = 1; k < begin_.size(); ++k) begin_[k] += begin_[k - 1];
  }

  bool sequential() const override { return true; }

  std::vector<std::pair<std::string, int64_t>> counters() const override {
    return {{"shard_opens", opens_.load()},
            {"shard_rereads", rereads_.load()},
            {"shard_held_samples", held_samples_.load()},
            {"shard_held_peak_samples", peak_samples_.load()},
            {"shard_held_peak_bytes", peak_bytes_.load()}};
  }

  Status Read(int64_t index, std::vector<uint8_t>& bytes) BC_EXCLUDES(mu_) override {
    MutexLock lock(&mu_);
    return ReadLocked(index, bytes);
  }

  Status Peek(int64_t index, std::vector<uint8_t>& bytes) BC_EXCLUDES(mu_) override {
    MutexLock lock(&mu_);
    const auto held = held_.find(index);
    if (held != held_.end()) {
      bytes = held->second;
      return Status::Ok();
    }
    // Not held and behind the reader: whoever got the batch took it.
    const uint32_t k = dataset_.file(index).shard;
    if (passed_[k] || (open_ == static_cast<int64_t>(k) && next_ > index)) {
      return OutOfRangeError("sample " + std::to_string(index) + " was read already");
    }
    BATCHCAST_RETURN_IF_ERROR(ReadLocked(index, bytes));
    if (held_.size() < max_held_) Hold(index, bytes);  // a copy, for the ring that gets it
    return Status::Ok();
  }

  void Forget(int64_t index) BC_EXCLUDES(mu_) override {
    MutexLock lock(&mu_);
    const auto held = held_.find(index);
    if (held != held_.end()) Unhold(held);
  }

 private:
  Status ReadLocked(int64_t index, std::vector<uint8_t>& bytes) BC_REQUIRES(mu_) {
    const auto held = held_.find(index);
    if (held != held_.end()) {
      Unhold(held, &bytes);
      return Status::Ok();
    }
    const ImageDataset::File& f = dataset_.file(index);
    const auto failed = failed_.find(f.shard);
    if (failed != failed_.end() && f.member >= failed->second.first) return failed->second.second;
    if (open_ != static_cast<int64_t>(f.shard) || next_ > index) {
      if (open_ == static_cast<int64_t>(f.shard)) {
        rereads_.fetch_add(1);  // passed already, and not held
      } else if (open_ >= 0) {
        HoldRest();
      }
      BATCHCAST_RETURN_IF_ERROR(OpenShard(f.shard));
    }
    return ReadUpTo(index, &bytes);
  }

  // Holds a copy of `bytes` as sample `index`'s.
  void Hold(int64_t index, const std::vector<uint8_t>& bytes) BC_REQUIRES(mu_) {
    held_[index] = bytes;
    held_bytes_ += bytes.size();
    CountHeld();
  }

  // Drops the held sample at `it`, its bytes moved to `*taken` when given.
  using Held = std::unordered_map<int64_t, std::vector<uint8_t>>;
  void Unhold(Held::iterator it, std::vector<uint8_t>* taken = nullptr) BC_REQUIRES(mu_) {
    held_bytes_ -= it->second.size();
    if (taken != nullptr) taken->swap(it->second);
    held_.erase(it);
    CountHeld();
  }

  // The held samples now, and the peaks.
  void CountHeld() BC_REQUIRES(mu_) {
    held_samples_.store(static_cast<int64_t>(held_.size()));
    peak_samples_.store(
        std::max<int64_t>(peak_samples_.load(), static_cast<int64_t>(held_.size())));
    peak_bytes_.store(std::max<int64_t>(peak_bytes_.load(), static_cast<int64_t>(held_bytes_)));
  }

  const std::string& shard_path(uint32_t k) const { return dataset_.shards()[k]; }

  Status OpenShard(uint32_t k) BC_REQUIRES(mu_) {
    passed_[k] = false;
    BATCHCAST_RETURN_IF_ERROR(OpenAt(k, 0));
    next_ = static_cast<int64_t>(begin_[k]);
    return Status::Ok();
  }

  // Opens shard k and skips its first `member` members (Note [Read retries]:
  // a failure to read is retried, the open and the skip together).
  Status OpenAt(uint32_t k, uint64_t member) BC_REQUIRES(mu_) {
    tar_.reset();
    open_ = -1;
    // The retried step fills a local: the lambda is not analysed as holding mu_.
    std::optional<TarReader> opened;
    const Status s = dataset_.io().Retry(shard_path(k), [&]() -> Status {
      opened.reset();
      Result<TarReader> r = TarReader::Open(shard_path(k));
      if (!r.ok()) return r.status();
      opens_.fetch_add(1);
      TarReader::Member m;
      for (uint64_t i = 0; i < member; ++i) {
        Result<bool> more = r->Next(&m);
        if (!more.ok()) return more.status();
        if (!*more) return DataLossError("the shard ended before member " + std::to_string(i));
      }
      opened.emplace(std::move(*r));
      return Status::Ok();
    });
    if (!s.ok()) return Fail(k, member, s.WithContext(shard_path(k)));
    tar_ = std::move(opened);
    open_ = k;
    member_ = member;
    return Status::Ok();
  }

  // After a failure to read member `at` of the open shard k (Unavailable):
  // opens it again at that member, sample `pos` next.
  Status Recover(uint32_t k, uint64_t at, int64_t pos) BC_REQUIRES(mu_) {
    BATCHCAST_RETURN_IF_ERROR(OpenAt(k, at));
    next_ = pos;
    return Status::Ok();
  }

  // Remembers that shard k fails from member `at` on, and closes it if open.
  Status Fail(uint32_t k, uint64_t at, Status error) BC_REQUIRES(mu_) {
    failed_[k] = {at, error};
    if (open_ == static_cast<int64_t>(k)) {
      tar_.reset();
      open_ = -1;
    }
    return error;
  }

  // Reads the open shard up to sample `target`, holding the samples passed on
  // the way; target < 0: to the shard's last sample. `out`: target's bytes.
  Status ReadUpTo(int64_t target, std::vector<uint8_t>* out) BC_REQUIRES(mu_) {
    const uint32_t k = static_cast<uint32_t>(open_);
    const int64_t end = static_cast<int64_t>(begin_[k + 1]);
    const int64_t last = target >= 0 ? target : end - 1;
    TarReader::Member m;
    while (next_ <= last) {
      const uint64_t at = member_;
      Result<bool> more = tar_->Next(&m);
      if (more.ok() && !*more) {
        more = DataLossError("the shard ended before member " + std::to_string(at) +
                             " (it changed since the scan)");
      }
      if (!more.ok() && more.status().code() == StatusCode::kUnavailable) {
        BATCHCAST_RETURN_IF_ERROR(Recover(k, at, next_));
        continue;
      }
      if (!more.ok()) return Fail(k, at, more.status().WithContext(shard_path(k)));
      ++member_;
      if (at != dataset_.file(next_).member) continue;
      const int64_t pos = next_++;
      if (pos == target) {
        const Status s = tar_->ReadData(*out);
        if (s.code() == StatusCode::kUnavailable) {
          BATCHCAST_RETURN_IF_ERROR(Recover(k, at, pos));
          continue;
        }
        if (!s.ok()) return Fail(k, at, s.WithContext(shard_path(k)));
        break;
      }
      if (dataset_.known_bad(pos) || held_.size() >= max_held_) continue;
      std::vector<uint8_t>& slot = held_[pos];
      const Status s = tar_->ReadData(slot);
      if (!s.ok()) {
        held_.erase(pos);
        CountHeld();
      }
      if (s.code() == StatusCode::kUnavailable) {
        BATCHCAST_RETURN_IF_ERROR(Recover(k, at, pos));
        continue;
      }
      if (!s.ok()) return Fail(k, at, s.WithContext(shard_path(k)));
      held_bytes_ += slot.size();
      CountHeld();
    }
    if (next_ >= end) {  // every sample of the shard was read: close it
      tar_.reset();
      open_ = -1;
      passed_[k] = true;
    }
    return Status::Ok();
  }

  // Holds the rest of the open shard (a failure is remembered, not returned).
  void HoldRest() BC_REQUIRES(mu_) { (void)ReadUpTo(-1, nullptr); }

  const ImageDataset& dataset_;
  const size_t max_held_;
  std::vector<uint64_t> begin_;
  Mutex mu_;
  std::optional<TarReader> tar_ BC_GUARDED_BY(mu_);
  int64_t open_ BC_GUARDED_BY(mu_) = -1;    // the open shard, -1: none
  uint64_t member_ BC_GUARDED_BY(mu_) = 0;  // the open shard's next member
  int64_t next_ BC_GUARDED_BY(mu_) = 0;     // the open shard's next sample index
  Held held_ BC_GUARDED_BY(mu_);
  size_t held_bytes_ BC_GUARDED_BY(mu_) = 0;
  std::map<uint32_t, std::pair<uint64_t, Status>> failed_ BC_GUARDED_BY(mu_);
  // Shards read to their end since they were last opened: a sample of one
  // that is not held was taken (Peek).
  std::vector<bool> passed_ BC_GUARDED_BY(mu_);
  std::atomic<int64_t> opens_{0}, rereads_{0}, held_samples_{0}, peak_samples_{0}, peak_bytes_{0};
};

}  // namespace

std::unique_ptr<SampleReader> MakeShardSampleReader(const ImageDataset& dataset, size_t max_held) {
  return std::make_unique<ShardSampleReader>(dataset, max_held);
}

}  // namespace batchcast
