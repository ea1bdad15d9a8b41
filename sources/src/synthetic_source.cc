#include "batchcast/sources/synthetic_source.h"

#include <cstring>

#include "core/src/synthetic.h"

namespace batchcast {

std::vector<FieldSpec> SyntheticSource::fields() const {
  return {FieldSpec{"image", DType::kUInt8, {3, size_, size_}, MemoryKind::kHost},
          FieldSpec{"label", DType::kInt64, {}, MemoryKind::kHost}};
}

std::string SyntheticSource::description() const {
  return "synthetic " + std::to_string(count_) + " x uint8[3," + std::to_string(size_) + "," +
         std::to_string(size_) + "]";
}

Result<SampleFill> SyntheticSource::FillSample(int, uint32_t, int64_t index,
                                               std::span<uint8_t* const> out) {
  const size_t bytes = size_t{3} * size_ * size_;
  synthetic::FillImage(index, std::span<uint8_t>(out[0], bytes));
  const int64_t label = synthetic::Label(index);
  std::memcpy(out[1], &label, sizeof(label));
  return SampleFill::kWritten;  // synthetic samples are never dropped
}

}  // namespace batchcast
