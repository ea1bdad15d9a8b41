// RingView of a CUDA ring: the server's cudaMalloc allocation mapped through
// CUDA IPC (Note [CUDA IPC lifetimes], cuda/src/runtime.cc) and its
// interprocess slot events. Nothing here waits on the host except where a
// CUDA call failed and waiting is the only safe order left.
// Note [Device ring ordering] (server/src/server.cc), Note [Device leases]
// (lease_ledger.h).
//
// Note [Consumers on another GPU]
// The consumer's thread may have any current device M (its training runs
// there) while the ring lives on device N. Every CUDA call of this view runs
// with N made current for its duration (cuda::DeviceGuard, which restores M):
// the mapping was opened in N's context (OpenIpcMemory), so the gather's
// device-to-device copies run there, N to N, valid whether or not M and N
// have peer access; the legacy default stream (a null CudaStreamRef) is N's;
// the gather buffer comes from N's pool and the completion events are N's.
// Fields are therefore always on N (Consumer::device()); a consumer computing
// on M reads them through peer access or copies them (torch: `.to(M)`), and
// a server with a ring per GPU (--device cuda:0,1) makes M's ring its home:
// a batch placed on another GPU's ring K (Note [Placement],
// server/src/scheduler.h) is gathered into M's memory by peer copies K to M
// queued on the delivery stream, which first waits (with M current) for the
// slot events of K.
//
// Note [Peer rings]
// With a ring per GPU (Note [Placement], server/src/scheduler.h) a consumer
// whose home ring is on GPU H reads batches placed on GPU K's ring by a copy
// onto H. Where H can access K's memory (NVLink or PCIe peer access,
// cudaDeviceCanAccessPeer), K's allocation and slot events are opened in H's
// context (cudaIpcOpenMemHandle with cudaIpcMemLazyEnablePeerAccess maps it
// there): the copy is an ordinary device-to-device copy on H, and the
// consumer's process makes no context on K. A context there would share K's
// GPU by time slices with the training process that runs on K (without MPS
// contexts of different processes do not run at once), which costs that
// trainer as much as a second job on its GPU. Without peer access the ring
// is opened in K's context and copied with cudaMemcpyPeerAsync (through the
// host). The mapping cache (cuda/src/ipc_memory.cc) opens a handle once per
// process: a view copies with the context its mapping was opened in
// (mapped_in()).
// A CUDA error here is the library's or the driver's, never the caller's:
// it is reported as Internal (or its own code: ResourceExhausted, ...),
// never as InvalidArgument, with CUDA's text.
#include <mutex>
#include <set>

#include "batchcast/cuda/runtime.h"
#include "core/src/logging.h"
#include "core/src/mutex.h"
#include "ring_view.h"

namespace batchcast::internal {
namespace {

// A CUDA failure of the ring view, with `context`: InvalidArgument (CUDA's
// invalid value or handle) becomes Internal, since the caller passed nothing
// invalid (Note [Consumers on another GPU]).
Status RingFailure(const Status& s, const std::string& context) {
  if (s.code() != StatusCode::kInvalidArgument) return s.WithContext(context);
  return InternalError(context + ": " + s.message());
}

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
        mapped_in_(mapping->device()),
        mapping_(std::move(mapping)),
        slot_events_(std::move(slot_events)),
        events_(std::make_shared<EventPool>(device)) {}

  Device device() const override { return Device::Cuda(device_); }
  int mapped_in() const override { return mapped_in_; }
  const uint8_t* data() const override { return mapping_->data(); }

  // With the stream's device current (a slot event of another device may
  // order it: cudaStreamWaitEvent takes an event of any device).
  Status OrderAfterProducer(std::span<const uint32_t> slots, CudaStreamRef stream,
                            Device stream_device) const override {
    const std::string context = "cannot order the consumer's CUDA stream after the producer";
    cuda::DeviceGuard g(stream_device.is_cuda() ? stream_device.index : device_);
    if (!g.status().ok()) return RingFailure(g.status(), context);
    for (uint32_t slot : std::set<uint32_t>(slots.begin(), slots.end())) {
      if (Status s = slot_events_[slot].BlockStream(stream); !s.ok()) {
        return RingFailure(s, context);
      }
    }
    return Status::Ok();
  }

  // With a pooled event: cudaStreamWaitEvent waits for the record current at
  // the call, so the event may be recorded again (reused) right after.
  Status StreamWaitsFor(CudaStreamRef stream, CudaStreamRef after) const override {
    Status s = WaitsFor(stream, after);
    return s.ok() ? s : RingFailure(s, "cannot order a CUDA stream after the batch's stream");
  }

  // Device-to-device copies (N to N, with N current) into a buffer of N's
  // private stream-ordered pool; a copy out of another ring (on device K,
  // Note [Placement]) is a peer copy K to N, valid whether or not K and N
  // have peer access (cudaMemcpyPeerAsync then goes through the host).
  Result<void*> Gather(std::span<const RingCopy> copies, size_t bytes,
                       CudaStreamRef stream) const override {
    const std::string context = "cannot gather the batch on " + DeviceName(device());
    cuda::DeviceGuard g(device_);
    if (!g.status().ok()) return RingFailure(g.status(), context);
    Result<void*> buffer = cuda::AllocAsync(device_, bytes, stream);
    if (!buffer.ok()) return RingFailure(buffer.status(), context + " (allocating its buffer)");
    for (const RingCopy& c : copies) {
      uint8_t* dst = static_cast<uint8_t*>(*buffer) + c.dst;
      const RingView& from = c.from != nullptr ? *c.from : *this;
      const uint8_t* src = from.data() + c.src;
      // Note [Peer rings]: a mapping in this device's context is read by an
      // ordinary copy (peer access), one in another device's by a peer copy.
      Status s = from.mapped_in() == device_
                     ? cuda::CopyAsync(dst, src, c.bytes, stream)
                     : cuda::CopyPeerAsync(dst, device_, src, from.mapped_in(), c.bytes, stream);
      if (!s.ok()) {
        // The copies already queued may still read the ring: wait for them.
        (void)cuda::SynchronizeStream(stream);
        (void)cuda::FreeAsync(device_, *buffer, stream);
        return RingFailure(s, context);
      }
    }
    return *buffer;
  }

  // Frees in the order of the delivery stream, after it waited for the others.
  void FreeGather(void* buffer, std::span<const CudaStreamRef> users) const override {
    cuda::DeviceGuard g(device_);
    const CudaStreamRef delivery = users.empty() ? CudaStreamRef() : users[0];
    for (size_t i = 1; i < users.size(); ++i) {
      if (!WaitsFor(delivery, users[i]).ok()) (void)cuda::SynchronizeStream(users[i]);
    }
    (void)cuda::FreeAsync(device_, buffer, delivery);
  }

  CompletionTokens TokensAfter(std::span<const CudaStreamRef> streams) const override {
    cuda::DeviceGuard g(device_);
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
  // `stream` waits for the work queued so far on `after` (with device_ current).
  Status WaitsFor(CudaStreamRef stream, CudaStreamRef after) const {
    cuda::DeviceGuard g(device_);
    BATCHCAST_RETURN_IF_ERROR(g.status());
    BATCHCAST_ASSIGN_OR_RETURN(cuda::Event e, cuda::Event::Create(device_));
    BATCHCAST_RETURN_IF_ERROR(e.Record(after));
    return e.BlockStream(stream);
  }

  const int device_;     // the producer's device, which the memory lives on
  const int mapped_in_;  // the device whose context maps it (Note [Peer rings])
  std::shared_ptr<cuda::IpcMapping> mapping_;
  std::vector<cuda::Event> slot_events_;  // one per slot, opened from WELCOME
  std::shared_ptr<EventPool> events_;     // shared with the tokens, which may outlive the view
};

}  // namespace

Result<std::unique_ptr<RingView>> MapCudaRing(const proto::Allocation& allocation, uint32_t window,
                                              int open_in) {
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
  // Note [Peer rings]: in the consumer's GPU's context where it has peer
  // access to the ring's.
  int context = device;
  if (open_in >= 0 && open_in != device) {
    Result<bool> peer = cuda::CanAccessPeer(open_in, device);
    if (peer.ok() && *peer) context = open_in;
  }
  // Note [CUDA IPC lifetimes]: mapped once, kept until the session ends.
  Result<std::shared_ptr<cuda::IpcMapping>> mapping =
      cuda::OpenIpcMemory(allocation.mem_handle, context);
  if (!mapping.ok()) {
    return RingFailure(mapping.status(),
                       "cannot map the server's CUDA ring on " + where +
                           " (the consumer must run on the same machine and see the same GPUs, "
                           "e.g. the same CUDA_VISIBLE_DEVICES)");
  }
  std::vector<cuda::Event> slot_events;
  for (const proto::IpcHandle& h : allocation.event_handles) {
    Result<cuda::Event> e = cuda::Event::OpenIpc(h, context);
    if (!e.ok()) return RingFailure(e.status(), "cannot open the ring's slot events");
    slot_events.push_back(std::move(*e));
  }
  return std::unique_ptr<RingView>(
      new CudaRingView(device, std::move(*mapping), std::move(slot_events)));
}

}  // namespace batchcast::internal
