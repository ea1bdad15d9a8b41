// TranscodeCache: progressive JPEGs re-encoded as baseline, kept in host
// memory, for the GPU image source.
//
// Note [Transcoded progressive files]
// The nvJPEG hardware engine refuses progressive JPEGs, and decoding one on
// the CPU costs milliseconds every epoch (most of it the progressive entropy
// decode, which neither DCT scaling nor nvJPEG's hybrid backends avoid). A
// progressive file can be re-encoded as baseline without loss: the DCT
// coefficients are copied and only their entropy coding changes
// (image::TranscodeToBaseline), so the engine decodes it like any baseline
// file. The first time the fallback pool meets such a file before its batch's
// hardware call (Note [Fallback ahead]: the round of the next batch), it
// transcodes it, keeps the result here while the budget (--transcode-cache-mb,
// host memory, about the size of the original files) lasts, and the sample
// joins the hardware batch (DecodeRoute kNvJpeg with the baseline bytes in its
// FileBuffer). Later epochs copy the bytes from here: no CPU decode at all.
// Files beyond the budget, files the engine would refuse even as baseline
// (odd sampling; NvJpegDecoder::Supports on the result) and files that fail to
// transcode (corrupt: the CPU decoder then reports them, Note [Dropped
// files]) are decoded on the CPU as before; the last two are not tried again.
// Pixels: the engine's IDCT instead of libjpeg-turbo's, as for every file it
// decodes (the CPU/GPU agreement bounds of GpuImageTest hold).
//
// Thread-safety: every method may run on several threads at once (the
// fallback pool); the bytes are guarded by a mutex, the per-file state is
// atomic.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/src/mutex.h"

namespace batchcast {

class TranscodeCache {
 public:
  // A cache for the dataset indices [0, files) of at most `budget_bytes`
  // (0: off, enabled() false).
  TranscodeCache(uint64_t files, size_t budget_bytes);

  bool enabled() const { return budget_ > 0; }
  size_t budget() const { return budget_; }

  // True when the bytes of `index` are kept (a hint: Get says for sure).
  bool holds(int64_t index) const { return state(index) == kHeld; }
  // True when `index` was found not worth trying (MarkRefused).
  bool refused(int64_t index) const { return state(index) == kRefused; }

  // Copies the kept bytes of `index` into *out and counts a hit; false when
  // none are kept.
  bool Get(int64_t index, std::vector<uint8_t>* out) BC_EXCLUDES(mu_);
  // Keeps a copy of `bytes` for `index` when the budget allows; false when
  // it does not (the caller still uses its bytes for this batch).
  bool Put(int64_t index, const std::vector<uint8_t>& bytes) BC_EXCLUDES(mu_);
  // True when `bytes` more would fit the budget now (a hint for whether to
  // transcode at all; Put decides).
  bool HasRoom(size_t bytes) const BC_EXCLUDES(mu_);
  // `index` does not transcode (corrupt) or the engine would refuse the
  // result: it is decoded on the CPU from now on.
  void MarkRefused(int64_t index);

  // Counters for stats.
  int64_t files() const BC_EXCLUDES(mu_);
  size_t bytes() const BC_EXCLUDES(mu_);
  int64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  int64_t refused_files() const { return refused_.load(std::memory_order_relaxed); }

 private:
  enum State : uint8_t { kUnknown = 0, kHeld = 1, kRefused = 2 };
  State state(int64_t index) const {
    if (index < 0 || static_cast<uint64_t>(index) >= files_) return kUnknown;
    return static_cast<State>(state_[static_cast<size_t>(index)].load(std::memory_order_acquire));
  }

  const uint64_t files_;
  const size_t budget_;
  std::unique_ptr<std::atomic<uint8_t>[]> state_;  // per index (null when off)
  std::atomic<int64_t> hits_{0};
  std::atomic<int64_t> refused_{0};
  mutable Mutex mu_;
  std::unordered_map<int64_t, std::vector<uint8_t>> kept_ BC_GUARDED_BY(mu_);
  size_t bytes_ BC_GUARDED_BY(mu_) = 0;
};

}  // namespace batchcast
