#include "file_prefetcher.h"

#include <unordered_set>
#include <utility>

#include "batchcast/core/check.h"
#include "core/src/catch_all.h"
#include "core/src/logging.h"
#include "core/src/thread_name.h"

namespace batchcast {

Status FileBuffer::Read(SampleReader& reader, int64_t sample, bool peek) {
  Status s = peek ? reader.Peek(sample, bytes) : reader.Read(sample, bytes);
  index = s.ok() ? sample : -1;
  return s;
}

FilePrefetcher::FilePrefetcher(const ImageDataset& dataset, bool enabled, StageTimes* times,
                               size_t stage, int read_threads)
    : dataset_(dataset), times_(times), stage_(stage) {
  BATCHCAST_CHECK(read_threads >= 1) << read_threads;
  if (enabled && read_threads > 1 && !dataset_.reader().sequential()) {
    pool_ = std::make_unique<ThreadPool>(read_threads);
  }
  if (enabled) {
    thread_ = std::thread([this] {
      SetThreadName("bc-readahead");
      Loop();
    });
  }
}

FilePrefetcher::~FilePrefetcher() { Stop(); }

void FilePrefetcher::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void FilePrefetcher::Loop() {
  mu_.Lock();
  while (true) {
    while (!stop_ && !busy_) cv_.Wait(&mu_);
    if (stop_) {
      busy_ = false;  // a read started but not begun is dropped
      cv_.SignalAll();
      break;
    }
    std::vector<FileBuffer>& files = *files_;
    const std::vector<int64_t> indices = indices_;
    const Then then = std::move(then_);
    then_ = nullptr;
    const bool guess = guess_;
    mu_.Unlock();
    const Status s = CatchAll("the file prefetcher", [&] {
      StageTimes::Scope timed(times_, stage_);
      return ReadAll(files, indices, guess);
    });
    if (!s.ok()) BC_LOG_WARN_LIMITED("{} (the files are read again when used)", s.message());
    if (then) {
      const Status t = CatchAll("the read-ahead thread's next step", [&] { then(indices); });
      if (!t.ok()) BC_LOG_WARN_LIMITED("{}", t.message());
    }
    mu_.Lock();
    busy_ = false;
    cv_.SignalAll();
  }
  mu_.Unlock();
}

Status FilePrefetcher::ReadAll(std::vector<FileBuffer>& files, const std::vector<int64_t>& indices,
                               bool guess) {
  if (files.size() < indices.size()) files.resize(indices.size());
  const auto read = [&](size_t i) {
    const int64_t index = indices[i];
    if (index < 0 || static_cast<uint64_t>(index) >= dataset_.size()) return;
    if (dataset_.known_bad(index)) return;                 // Note [Dropped files]: never read again
    (void)files[i].Read(dataset_.reader(), index, guess);  // a failure is found again when used
  };
  if (pool_) {
    // Each item writes its own buffer.
    return pool_->ParallelFor(static_cast<int64_t>(indices.size()),
                              [&](int, int64_t i) { read(static_cast<size_t>(i)); });
  }
  for (size_t i = 0; i < indices.size(); ++i) read(i);
  return Status::Ok();
}

void FilePrefetcher::Start(std::vector<FileBuffer>* files, std::span<const int64_t> indices,
                           Then then, bool guess) {
  if (!thread_.joinable() || indices.empty()) return;
  MutexLock lock(&mu_);
  files_ = files;
  indices_.assign(indices.begin(), indices.end());
  then_ = std::move(then);
  guess_ = guess;
  busy_ = true;
  cv_.SignalAll();
}

void FilePrefetcher::Wait(std::span<const int64_t> batch) {
  MutexLock lock(&mu_);
  while (busy_) cv_.Wait(&mu_);
  if (!std::exchange(guess_, false) || batch.empty()) return;
  // The files the guess read (peeked) that this batch uses.
  const std::unordered_set<int64_t> mine(batch.begin(), batch.end());
  for (size_t i = 0; i < indices_.size(); ++i) {
    const int64_t index = (*files_)[i].index;
    if (index == indices_[i] && mine.count(index) != 0) dataset_.reader().Forget(index);
  }
}

}  // namespace batchcast
