// SyntheticSource: the deterministic dataset of core/synthetic.h, for tests
// and benchmarks of the sharing engine (no decoding cost).
//
// Fields: `image` uint8 [3,S,S], `label` int64 [].
#pragma once

#include <memory>

#include "batchcast/sources/source.h"

namespace batchcast {

class SyntheticSource : public SampleSource {
 public:
  // REQUIRES: count > 0, size > 0, workers >= 1.
  SyntheticSource(uint64_t count, int size, int workers = 1)
      : SampleSource(workers), count_(count), size_(size) {}
  uint64_t size() const override { return count_; }
  std::vector<FieldSpec> fields() const override;
  std::string description() const override;
  // Always kWritten: synthetic samples are never dropped.
  Result<SampleFill> FillSample(int worker, uint32_t epoch, int64_t index,
                                std::span<uint8_t* const> out) override;

 private:
  uint64_t count_;
  int size_;
};

}  // namespace batchcast
