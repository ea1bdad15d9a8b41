// RingLayout: where every byte of the shared ring lives.
//
// The ring is `window` slots; a slot holds one producer batch of up to
// `batch_size` samples. Each memory kind (host, CUDA) is one allocation; inside
// it slot k of field f starts at
//     field_offset[f] + k * field_slot_stride[f]
// and sample i of that slot at `+ i * bytes_per_sample(f)`. So the samples of
// one slot are contiguous per field, and a run of samples inside one slot is a
// zero-copy view. Offsets are aligned to kRingAlignment bytes. `extra` slots
// (the resume lane's, Note [Resume] in server/src/scheduler.h) are numbered
// window, window + 1, ... and lie after every field's window slots, so the
// window's layout does not depend on them.
//
// The layout is a pure function of (fields, window, batch_size, extra): the
// server and every client compute the same numbers from the WELCOME message.
//
// Thread-safety: immutable after Make(); share freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"

namespace batchcast {

inline constexpr size_t kRingAlignment = 256;

// A run of `count` consecutive samples of one slot, starting at sample `offset`,
// on ring `ring` (a server with a ring per GPU holds every slot index on each
// ring; the copy a batch was placed on is the valid one: Note [Placement],
// server/src/scheduler.h).
struct Segment {
  uint32_t slot = 0;
  uint32_t offset = 0;
  uint32_t count = 0;
  uint32_t producer_epoch = 0;  // the producer epoch of the slot's samples
  uint32_t ring = 0;            // the ring (an index into WELCOME's rings) it lies on
  bool operator==(const Segment&) const = default;
};

class RingLayout {
 public:
  // Fails with InvalidArgument on an empty field list, duplicate or empty
  // names, zero window or batch size, or a ring larger than 1 TiB.
  static Result<RingLayout> Make(std::vector<FieldSpec> fields, uint32_t window,
                                 uint32_t batch_size, uint32_t extra = 0);

  uint32_t window() const { return window_; }
  // Every slot: the window's and the extra ones.
  uint32_t slots() const { return window_ + extra_; }
  uint32_t batch_size() const { return batch_size_; }
  const std::vector<FieldSpec>& fields() const { return fields_; }
  // Index of the field named `name`, or -1.
  int FindField(std::string_view name) const;

  // Total bytes of the allocation of memory kind `kind` (0 when no field uses it).
  size_t allocation_bytes(MemoryKind kind) const;
  // Byte offset of sample `sample` of slot `slot` for field `field`, inside that
  // field's allocation. REQUIRES: field < fields().size(), slot < slots(),
  // sample <= batch_size.
  size_t SampleOffset(size_t field, uint32_t slot, uint32_t sample) const;
  // Bytes of one whole slot for `field`.
  size_t field_slot_stride(size_t field) const { return slot_stride_[field]; }

 private:
  RingLayout() = default;
  std::vector<FieldSpec> fields_;
  uint32_t window_ = 0;
  uint32_t extra_ = 0;
  uint32_t batch_size_ = 0;
  std::vector<size_t> field_offset_;
  std::vector<size_t> extra_offset_;  // each field's first extra slot
  std::vector<size_t> slot_stride_;
  size_t bytes_[2] = {0, 0};
};

}  // namespace batchcast
