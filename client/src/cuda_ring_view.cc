// RingView of a CUDA ring: the server's cudaMalloc allocation mapped through
// CUDA IPC (Note [CUDA IPC lifetimes], cuda/src/runtime.cc) and its
// interprocess slot events. Nothing here waits on the host except where a
// CUDA call failed and waiting is the only safe order left.
// Note [Device ring ordering] (server/src/server.cc), Note [Device leases]
// (lease_ledger.h).
#include <mutex>
#include <set>

#include "core/src/logging.h"
#include "batchcast/cuda/runtime.h"
#include "core/src/mutex.h"
#include "ring_view.h"

namespace batchcast::internal {
namespace {

// Events kept for reuse by the completion tokens (creating one per lease
// would cost a driver call each). Its mutex is a leaf lock: it is taken under
// Session::lease_mu_ (a token dies in the ledger) and takes nothing else.
class EventPool {
 public:
  explicit EventPool(int device) : device_(device) {}
  Result<cuda::Event> Take() BC_EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      if (!spare_.empty()) {
        cuda::Event e = std::move(spare_.back());
        spare_.pop_back();
        return e;
      }
    }
    return cuda::Event::Create(device_);
  }
  void Put(cuda::Event e) BC_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    spare_.push_back(std::move(e));
  }

 private:
  const int device_;
  Mutex mu_;
  std::vector<cuda::Event> spare_ BC_GUARDED_BY(mu_);
};

// Done when the work queued before the event's record completed.
class EventToken final : public CompletionToken {
 public:
  EventToken(cuda::Event event, std::shared_ptr<EventPool> pool)
      : event_(std::move(event)), pool_(std::move(pool)) {}
  ~EventToken() override { pool_->Put(std::move(event_)); }
  bool Done() override {
    Result<bool> q = event_.Query();
    return !q.ok() || *q;  // an error means the work is gone (e.g. the context died)
  }
  void Wait() override { (void)event_.Synchronize(); }

 private:
  cuda::Event event_;
  std::shared_ptr<EventPool> pool_;
};

class CudaRingView final : public RingView {
 public:
  CudaRingView(int device, std::shared_ptr<cuda::IpcMapping> mapping,
               std::vector<cuda::Event> slot_events)
      : device_(device),
        mapping_(std::move(mapping)),
        slot_events_(std::move(slot_events)),
        events_(std::make_shared<EventPool>(device)) {}

  Device device() const override { return Device::Cuda(device_); }
  const uint8_t* data() const override { return mapping_->data(); }

  Status OrderAfterProducer(std::span<const uint32_t> slots, CudaStreamRef stream) const override {
    for (uint32_t slot : std::set<uint32_t>(slots.begin(), slots.end())) {
      if (Status s = slot_events_[slot].BlockStream(stream); !s.ok()) {
        return s.WithContext("cannot order the consumer's CUDA stream after the producer");
      }
    }
    return Status::Ok();
  }

  // With a pooled event: cudaStreamWaitEvent waits for the record current at
  // the call, so the event may be recorded again (reused) right after.
  Status StreamWaitsFor(CudaStreamRef stream, CudaStreamRef after) const override {
    BATCHCAST_ASSIGN_OR_RETURN(cuda::Event e, events_->Take());
    Status s = e.Record(after);
    if (s.ok()) s = e.BlockStream(stream);
    events_->Put(std::move(e));
    return s;
  }

  // Device-to-device copies into a buffer of the private stream-ordered pool.
  Result<void*> Gather(std::span<const RingCopy> copies, size_t bytes,
                       CudaStreamRef stream) const override {
    Result<void*> buffer = cuda::AllocAsync(device_, bytes, stream);
    if (!buffer.ok())
      return buffer.status().WithContext("cannot allocate the batch's gather buffer");
    for (const RingCopy& c : copies) {
      Status s = cuda::CopyAsync(static_cast<uint8_t*>(*buffer) + c.dst, mapping_->data() + c.src,
                                 c.bytes, stream);
      if (!s.ok()) {
        // The copies already queued may still read the ring: wait for them.
        (void)cuda::SynchronizeStream(stream);
        (void)cuda::FreeAsync(device_, *buffer, stream);
        return s.WithContext("cannot gather the batch on the GPU");
      }
    }
    return *buffer;
  }

  // Frees in the order of the delivery stream, after it waited for the others.
  void FreeGather(void* buffer, std::span<const CudaStreamRef> users) const override {
    const CudaStreamRef delivery = users.empty() ? CudaStreamRef() : users[0];
    for (size_t i = 1; i < users.size(); ++i) {
      if (!StreamWaitsFor(delivery, users[i]).ok()) (void)cuda::SynchronizeStream(users[i]);
    }
    (void)cuda::FreeAsync(device_, buffer, delivery);
  }

  CompletionTokens TokensAfter(std::span<const CudaStreamRef> streams) const override {
    CompletionTokens tokens;
    for (CudaStreamRef stream : streams) {
      Result<cuda::Event> e = events_->Take();
      Status s = e.ok() ? e->Record(stream) : e.status();
      if (s.ok()) {
        tokens.push_back(std::make_unique<EventToken>(std::move(*e), events_));
        continue;
      }
      // E.g. a stream of another device: order by waiting for it instead.
      static std::once_flag warned;
      std::call_once(warned, [&] {
        BC_LOG_WARN(
            "cannot record a CUDA event on a consumer stream ({}); waiting for the "
            "stream before releasing batches instead",
            s.message());
      });
      (void)cuda::SynchronizeStream(stream);
    }
    return tokens;
  }

 private:
  const int device_;  // the producer's device, which the mapping lives on
  std::shared_ptr<cuda::IpcMapping> mapping_;
  std::vector<cuda::Event> slot_events_;  // one per slot, opened from WELCOME
  std::shared_ptr<EventPool> events_;     // shared with the tokens, which may outlive the view
};

}  // namespace

Result<std::unique_ptr<RingView>> MapCudaRing(const proto::Allocation& allocation,
                                              uint32_t window) {
  const int device = allocation.device_index;
  const std::string where = "cuda:" + std::to_string(device);
  if (!cuda::BuiltWithCuda()) {
    return InvalidArgumentError("the server's ring is in CUDA memory (" + where +
                                "), which this build of the client (without CUDA) cannot map");
  }
  if (allocation.event_handles.size() != window) {
    return InternalError("the server sent " + std::to_string(allocation.event_handles.size()) +
                         " slot events for a window of " + std::to_string(window));
  }
  // Note [CUDA IPC lifetimes]: mapped once, kept until the session ends.
  Result<std::shared_ptr<cuda::IpcMapping>> mapping =
      cuda::OpenIpcMemory(allocation.mem_handle, device);
  if (!mapping.ok()) {
    return mapping.status().WithContext("cannot map the server's CUDA ring on " + where +
                                        " (the consumer must run on the same machine and see the "
                                        "same GPUs, e.g. the same CUDA_VISIBLE_DEVICES)");
  }
  std::vector<cuda::Event> slot_events;
  for (const proto::IpcHandle& h : allocation.event_handles) {
    Result<cuda::Event> e = cuda::Event::OpenIpc(h, device);
    if (!e.ok()) return e.status().WithContext("cannot open the ring's slot events");
    slot_events.push_back(std::move(*e));
  }
  return std::unique_ptr<RingView>(
      new CudaRingView(device, std::move(*mapping), std::move(slot_events)));
}

}  // namespace batchcast::internal
