#include "core/src/ring_layout.h"

#include <set>

namespace batchcast {
namespace {
size_t AlignUp(size_t n) { return (n + kRingAlignment - 1) / kRingAlignment * kRingAlignment; }
constexpr size_t kMaxRingBytes = size_t{1} << 40;
}  // namespace

Result<RingLayout> RingLayout::Make(std::vector<FieldSpec> fields, uint32_t window,
                                    uint32_t batch_size, uint32_t extra) {
  if (fields.empty()) return InvalidArgumentError("a sample needs at least one field");
  if (window == 0) return InvalidArgumentError("window must be at least 1 slot");
  if (batch_size == 0) return InvalidArgumentError("batch size must be at least 1");
  std::set<std::string> names;
  RingLayout layout;
  layout.window_ = window;
  layout.extra_ = extra;
  layout.batch_size_ = batch_size;
  const uint64_t slots = uint64_t{window} + extra;
  for (const FieldSpec& f : fields) {
    if (f.name.empty()) return InvalidArgumentError("a field has an empty name");
    if (!names.insert(f.name).second) {
      return InvalidArgumentError("field '" + f.name + "' appears twice");
    }
    uint64_t per_sample = DTypeSize(f.dtype);
    for (int64_t d : f.shape) {
      if (d <= 0 || d > (int64_t{1} << 31)) {
        return InvalidArgumentError("field '" + f.name + "' has a dimension of " +
                                    std::to_string(d));
      }
      if (__builtin_mul_overflow(per_sample, static_cast<uint64_t>(d), &per_sample) ||
          per_sample > kMaxRingBytes) {
        return InvalidArgumentError("ring too large: one sample of field '" + f.name +
                                    "' alone needs more than 1 TiB");
      }
    }
    if (per_sample > kMaxRingBytes / batch_size / slots) {
      return InvalidArgumentError("ring too large: field '" + f.name +
                                  "' alone needs more than 1 TiB");
    }
    size_t& total = layout.bytes_[static_cast<size_t>(f.memory)];
    const size_t stride = AlignUp(per_sample * batch_size);
    layout.field_offset_.push_back(total);
    layout.slot_stride_.push_back(stride);
    total += stride * window;
    if (total > kMaxRingBytes) return InvalidArgumentError("ring larger than 1 TiB");
  }
  for (size_t f = 0; f < fields.size(); ++f) {  // the extra slots, after the window's
    size_t& total = layout.bytes_[static_cast<size_t>(fields[f].memory)];
    layout.extra_offset_.push_back(total);
    total += layout.slot_stride_[f] * extra;
    if (total > kMaxRingBytes) return InvalidArgumentError("ring larger than 1 TiB");
  }
  layout.fields_ = std::move(fields);
  return layout;
}

int RingLayout::FindField(std::string_view name) const {
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

size_t RingLayout::allocation_bytes(MemoryKind kind) const {
  return bytes_[static_cast<size_t>(kind)];
}

size_t RingLayout::SampleOffset(size_t field, uint32_t slot, uint32_t sample) const {
  BATCHCAST_CHECK(field < fields_.size() && slot < slots() && sample <= batch_size_);
  const size_t first = slot < window_
                           ? field_offset_[field] + slot * slot_stride_[field]
                           : extra_offset_[field] + (slot - window_) * slot_stride_[field];
  return first + sample * fields_[field].bytes_per_sample();
}

}  // namespace batchcast
