#include "slot_publisher.h"

#include "batchcast/core/check.h"
#include "core/src/logging.h"

namespace batchcast {

SlotView RingSlotView(const RingBases& bases, const RingLayout& layout,
                      const std::vector<FieldSpec>& fields, const SlotGrant& grant,
                      uint32_t epoch) {
  SlotView v;
  v.slot = grant.slot;
  v.first_seq = grant.first_seq;
  v.epoch = epoch;
  v.indices = std::span<int64_t>(grant.indices, grant.count);
  for (size_t f = 0; f < fields.size(); ++f) {
    uint8_t* base = fields[f].memory == MemoryKind::kCuda ? bases.cuda : bases.host;
    BATCHCAST_CHECK(base != nullptr);
    v.field_data.push_back(base + layout.SampleOffset(f, grant.slot, 0));
    v.field_bytes.push_back(fields[f].bytes_per_sample());
  }
  return v;
}

namespace {

RingBases BasesOf(const RingMemory& memory) {
  RingBases b;
  b.host = memory.has_host_memory() ? memory.base(MemoryKind::kHost) : nullptr;
  b.cuda = memory.has_device_memory() ? memory.base(MemoryKind::kCuda) : nullptr;
  return b;
}

}  // namespace

Result<std::unique_ptr<SlotPublisher>> MakeSlotPublisher(const RingMemory& memory,
                                                         const RingLayout& layout,
                                                         const std::vector<FieldSpec>& fields,
                                                         Scheduler& scheduler, SlotWriter writer,
                                                         StreamPriority priority) {
  if (!memory.has_device_memory()) {
    return std::unique_ptr<SlotPublisher>(
        std::make_unique<HostSlotPublisher>(memory, layout, fields, scheduler));
  }
  BATCHCAST_ASSIGN_OR_RETURN(
      std::unique_ptr<DeviceSlotPublisher> p,
      DeviceSlotPublisher::Create(memory, layout, fields, scheduler, writer, priority));
  return std::unique_ptr<SlotPublisher>(std::move(p));
}

// ---- host ----

HostSlotPublisher::HostSlotPublisher(const RingMemory& memory, const RingLayout& layout,
                                     const std::vector<FieldSpec>& fields, Scheduler& scheduler)
    : memory_(memory), layout_(layout), fields_(fields), scheduler_(scheduler) {}

Result<SlotView> HostSlotPublisher::Begin(const SlotGrant& grant, uint32_t epoch) {
  return RingSlotView(BasesOf(memory_), layout_, fields_, grant, epoch);
}

Status HostSlotPublisher::Publish(const SlotView& filled, uint32_t valid) {
  return scheduler_.Commit(filled.slot, valid);
}

// ---- device (Note [Device ring ordering]) ----

DeviceSlotPublisher::DeviceSlotPublisher(const RingMemory& memory, const RingLayout& layout,
                                         const std::vector<FieldSpec>& fields, Scheduler& scheduler,
                                         SlotWriter writer)
    : memory_(memory),
      layout_(layout),
      fields_(fields),
      scheduler_(scheduler),
      writer_(writer),
      device_(memory.cuda_device()) {}

Result<std::unique_ptr<DeviceSlotPublisher>> DeviceSlotPublisher::Create(
    const RingMemory& memory, const RingLayout& layout, const std::vector<FieldSpec>& fields,
    Scheduler& scheduler, SlotWriter writer, StreamPriority priority) {
  BATCHCAST_CHECK(memory.has_device_memory());
  std::unique_ptr<DeviceSlotPublisher> p(
      new DeviceSlotPublisher(memory, layout, fields, scheduler, writer));
  if (writer != SlotWriter::kExternal) {
    BATCHCAST_ASSIGN_OR_RETURN(cuda::Stream s, cuda::Stream::Create(p->device_, priority));
    p->stream_.emplace(std::move(s));
  }
  if (writer == SlotWriter::kHostSource) BATCHCAST_RETURN_IF_ERROR(p->PrepareStaging());
  return p;
}

DeviceSlotPublisher::~DeviceSlotPublisher() {
  if (stream_) {
    if (Status s = stream_->Synchronize(); !s.ok()) {
      BC_LOG_WARN("waiting for the producer's stream failed: {}", s.ToString());
    }
  }
}

Status DeviceSlotPublisher::PrepareStaging() {
  size_t bytes = 0;
  for (const FieldSpec& f : fields_) bytes += f.bytes_per_sample() * layout_.batch_size();
  for (int k = 0; k < 2; ++k) {
    BATCHCAST_ASSIGN_OR_RETURN(staging_[k], cuda::PinnedBuffer::Create(bytes));
    BATCHCAST_ASSIGN_OR_RETURN(staging_done_[k], cuda::Event::Create(device_, false, true));
    BATCHCAST_RETURN_IF_ERROR(staging_done_[k].Record(stream_->ref()));
  }
  return Status::Ok();
}

Result<SlotView> DeviceSlotPublisher::Begin(const SlotGrant& grant, uint32_t epoch) {
  SlotView v = RingSlotView(BasesOf(memory_), layout_, fields_, grant, epoch);
  if (writer_ != SlotWriter::kHostSource) {
    v.device = Device{MemoryKind::kCuda, device_};
    if (stream_) v.stream = stream_->ref();  // kExternal: CommitBatch names the stream
    return v;
  }
  // Step 1 with staging: the source fills host memory; Publish copies it.
  const int k = next_staging_;
  BATCHCAST_RETURN_IF_ERROR(staging_done_[k].Synchronize());
  size_t off = 0;
  for (size_t f = 0; f < fields_.size(); ++f) {
    v.field_data[f] = staging_[k].data() + off;
    off += fields_[f].bytes_per_sample() * layout_.batch_size();
  }
  return v;
}

Status DeviceSlotPublisher::Publish(const SlotView& filled, uint32_t valid) {
  CudaStreamRef stream = filled.stream;
  if (writer_ == SlotWriter::kHostSource) {
    // Step 1: copy the staging buffer's samples to the slot on the
    // producer's stream (holes are not copied).
    stream = stream_->ref();
    const int k = next_staging_;
    for (size_t f = 0; f < fields_.size() && valid > 0; ++f) {
      uint8_t* dst = memory_.base(MemoryKind::kCuda) + layout_.SampleOffset(f, filled.slot, 0);
      BATCHCAST_RETURN_IF_ERROR(cuda::CopyAsync(dst, filled.field_data[f],
                                                fields_[f].bytes_per_sample() * valid, stream));
    }
    BATCHCAST_RETURN_IF_ERROR(staging_done_[k].Record(stream));
    next_staging_ ^= 1;
  }
  // Step 2: the slot's event after its writes, then the commit.
  BATCHCAST_RETURN_IF_ERROR(memory_.slot_event(filled.slot).Record(stream));
  return scheduler_.Commit(filled.slot, valid);
}

}  // namespace batchcast
