// SlotPublisher: the last step of writing a ring slot. Begin says where the
// writer (a Source, or an external producer through Server::BeginBatch) puts
// the samples of a slot granted by the Scheduler; Publish makes the filled
// slot visible to consumers, in the order Note [Device ring ordering] needs,
// and commits it to the Scheduler. One implementation per memory path:
//  - HostSlotPublisher (host shared memory): the writer fills the slot in
//    place; Publish commits.
//  - DeviceSlotPublisher (--device cuda:N): the writer fills the slot in
//    place, queued on a stream (kDeviceSource, kExternal), or fills pinned
//    host staging that Publish copies to the slot (kHostSource); Publish then
//    records the slot's interprocess event and commits.
//
// Note [Device ring ordering]
// With the ring in device memory nothing on the hot path waits on the host:
//  1. The producer queues every write of a slot on one stream: a source whose
//     output_memory() is kCuda writes the slot itself on SlotView::stream
//     (nvJPEG decode + the fused kernel); any other source fills a pinned
//     staging buffer that Publish then copies to the slot (cudaMemcpyAsync);
//     an external producer queues its writes on the stream it passes to
//     Server::CommitBatch.
//  2. Publish records the slot's interprocess event on that stream, and only
//     then commits the slot (Scheduler::Commit), which lets BATCH messages
//     name it.
//  3. A consumer makes its stream wait on the event (cudaStreamWaitEvent)
//     before it hands the batch to the user (client/src/cuda_ring_view.cc, via
//     client/src/batch.cc).
//  4. The slot is rewritten only after every lease on it ended (Note [Leases],
//     scheduler.h), and a consumer ends a lease only after the GPU work that
//     read the batch completed (Note [Device leases], client/src/lease_ledger.h).
//     So the producer's next writes never race with readers.
// A staging buffer is refilled only after the copy out of it completed (an
// event per buffer, two buffers so the copy of one overlaps filling the other).
// Devices: each step runs with the ring's device current: the producer
// thread keeps it current for its life (several rings, one per GPU: Note
// [Rings per GPU], device_list.h), and the consumer's ring view makes it
// current around its own calls (Note [Consumers on another GPU],
// client/src/cuda_ring_view.cc), so a consumer on another GPU waits on the
// same event in the ring device's context.
//
// Note [Server stream priority]
// --gpu-priority (SourceOptions::gpu_priority) sets the priority of every
// stream the server's GPU work runs on: the producer's stream (owned here:
// nvJPEG's first call, the fused kernel, the copies into the ring) and the
// image source's side streams (Note [Split hardware batch]). CUDA orders
// priorities within one context only. So `high` matters where the decode
// shares a context with a trainer: an in-process batchcast.Server, or an
// attached producer (Note [Attached producers], attach_point.h), whose
// streams take the server's option. The trainer's kernels keep the SMs they
// hold, and the decode's short kernels (nvJPEG's per-image conversion, which
// the pipeline thread waits for before the next image; the fused
// augmentation) are scheduled before the trainer's queued ones instead of
// behind them. Between processes without MPS the GPU time-slices whole
// contexts and priorities order nothing across them (docs/design.md, "GPU
// path", MPS). Measured in process on an H100, and with two ResNet-18
// trainers decoding their rings on two H200s (five runs, alternating),
// `high` made no difference the runs could see, so `normal` is the default.
//
// Thread-safety: one writer thread at a time calls Begin and Publish, in
// pairs (Begin, fill, Publish). The Scheduler it commits to is thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"
#include "batchcast/cuda/runtime.h"
#include "batchcast/sources/source.h"
#include "core/src/ring_layout.h"
#include "ring_memory.h"
#include "scheduler.h"

namespace batchcast {

// Where a ring's allocations start in this process (null: none of that kind).
struct RingBases {
  uint8_t* host = nullptr;
  uint8_t* cuda = nullptr;  // a device pointer
};

// The view of the slot of `grant` (producer epoch `epoch`) in a ring laid out
// as `layout` over `bases`: where each field of each sample goes, the
// grant's indices. Used by the server's publishers and by an attached
// producer over its mapping of the ring (attached_producer.h).
SlotView RingSlotView(const RingBases& bases, const RingLayout& layout,
                      const std::vector<FieldSpec>& fields, const SlotGrant& grant, uint32_t epoch);

// Who fills the slots, which decides how a device ring orders them.
enum class SlotWriter : uint8_t {
  kHostSource,    // a Source whose output_memory() is kHost
  kDeviceSource,  // a Source whose output_memory() is kCuda: writes on SlotView::stream
  kExternal,      // Server::BeginBatch callers: write on their own stream (CommitBatch's)
};

class SlotPublisher {
 public:
  virtual ~SlotPublisher() = default;

  // Where the samples of `grant` (producer epoch `epoch`) go. With staging,
  // it first waits until the copy out of the staging buffer it hands out has
  // completed.
  virtual Result<SlotView> Begin(const SlotGrant& grant, uint32_t epoch) = 0;
  // Publishes the slot of `filled` (a view from Begin whose first `valid`
  // samples were written; device writes queued on filled.stream), then
  // commits it with `valid` samples (the rest are holes, Note [Holes] in
  // slot_table.h). REQUIRES: Begin handed out `filled`, it was not published
  // yet, and valid <= filled.count().
  [[nodiscard]] virtual Status Publish(const SlotView& filled, uint32_t valid) = 0;
};

// The ring `memory` (laid out as `layout`, fields `fields`) of a server
// whose slots are written by `writer`; commits go to `scheduler`. Every
// argument must outlive the publisher. A device ring's publisher owns the
// producer's stream (kDeviceSource, kHostSource) and staging (kHostSource);
// it waits for that stream when destroyed, so no queued write outlives it.
// That stream has priority `priority` (Note [Server stream priority]).
Result<std::unique_ptr<SlotPublisher>> MakeSlotPublisher(
    const RingMemory& memory, const RingLayout& layout, const std::vector<FieldSpec>& fields,
    Scheduler& scheduler, SlotWriter writer, StreamPriority priority = StreamPriority::kNormal);

class HostSlotPublisher final : public SlotPublisher {
 public:
  HostSlotPublisher(const RingMemory& memory, const RingLayout& layout,
                    const std::vector<FieldSpec>& fields, Scheduler& scheduler);
  Result<SlotView> Begin(const SlotGrant& grant, uint32_t epoch) override;
  Status Publish(const SlotView& filled, uint32_t valid) override;

 private:
  const RingMemory& memory_;
  const RingLayout& layout_;
  const std::vector<FieldSpec>& fields_;
  Scheduler& scheduler_;
};

class DeviceSlotPublisher final : public SlotPublisher {
 public:
  // REQUIRES: memory.has_device_memory().
  static Result<std::unique_ptr<DeviceSlotPublisher>> Create(
      const RingMemory& memory, const RingLayout& layout, const std::vector<FieldSpec>& fields,
      Scheduler& scheduler, SlotWriter writer, StreamPriority priority);
  ~DeviceSlotPublisher() override;
  Result<SlotView> Begin(const SlotGrant& grant, uint32_t epoch) override;
  Status Publish(const SlotView& filled, uint32_t valid) override;

 private:
  DeviceSlotPublisher(const RingMemory& memory, const RingLayout& layout,
                      const std::vector<FieldSpec>& fields, Scheduler& scheduler,
                      SlotWriter writer);
  Status PrepareStaging();

  const RingMemory& memory_;
  const RingLayout& layout_;
  const std::vector<FieldSpec>& fields_;
  Scheduler& scheduler_;
  const SlotWriter writer_;
  const int device_;
  std::optional<cuda::Stream> stream_;  // the producer's (not for kExternal)
  // kHostSource: two pinned staging buffers, each with an event recorded
  // after the copy out of it; next_staging_ is the one Begin hands out next.
  cuda::PinnedBuffer staging_[2];
  cuda::Event staging_done_[2];
  int next_staging_ = 0;
};

}  // namespace batchcast
