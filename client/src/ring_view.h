// RingView: this client's mapping of one of the server's ring allocations,
// and the memory operations a batch needs there; MappedRing: all of them, of
// every ring of the server (one per GPU with --device cuda:0,1: Note
// [Placement], server/src/scheduler.h), with the rings' layout. Internal to
// batchcast::client.
//
// One implementation per memory path, each in its own file (like NCCL's
// transports): host_ring_view.cc (POSIX shared memory: plain loads and
// memcpy, nothing to order or wait for) and cuda_ring_view.cc (a CUDA IPC
// mapping: slot events, stream-ordered copies and buffers, CUDA events as
// completion tokens). The batch code (batch.cc) is written once against this
// interface and does not know which memory it reads.
//
// Ordering and leases: Note [Device ring ordering] (server/src/server.cc) and
// Note [Device leases] (lease_ledger.h). Streams are the consumer's delivery
// stream and those of Batch::RecordStream; host views ignore them.
//
// Thread-safety: a MappedRing's home ring is mapped by Map and immutable; the
// other rings are mapped on first use (a consumer fed only from its own GPU
// never opens a context on another), under a mutex of their own (a leaf
// lock, never held while a batch's views are used). Views may be used from
// any thread (the CUDA view's event pool has its own mutex, a leaf lock).
// Lifetime: the session owns the MappedRing and keeps it until the GPU work
// of every batch completed (Note [CUDA IPC lifetimes], cuda/src/runtime.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"
#include "core/src/mutex.h"
#include "core/src/protocol.h"
#include "core/src/ring_layout.h"
#include "lease_ledger.h"

namespace batchcast::internal {

class RingView;

// One copy of a gather: `bytes` from `src` (an offset in the allocation of
// `from`, the gathering view itself when null: another ring's view of the
// same memory kind otherwise) to `dst` (an offset in the private buffer).
struct RingCopy {
  const RingView* from = nullptr;
  size_t src = 0;
  size_t dst = 0;
  size_t bytes = 0;
};

class RingView {
 public:
  virtual ~RingView() = default;

  // Where the allocation lives: {kHost, -1} or {kCuda, N}.
  virtual Device device() const = 0;
  // The device whose context maps it (Note [Peer rings], cuda_ring_view.cc):
  // device().index, or the consumer's own device for another GPU's ring
  // mapped through peer access; -1 for host memory.
  virtual int mapped_in() const { return device().index; }
  // The first byte of the mapped allocation (a device pointer for kCuda).
  virtual const uint8_t* data() const = 0;

  // Makes `stream`, a stream of `stream_device` (the consumer's home ring's
  // device: a null stream is that device's legacy stream), wait for the
  // producer's writes of `slots` (Note [Device ring ordering], step 3); never
  // waits on the host.
  virtual Status OrderAfterProducer(std::span<const uint32_t> slots, CudaStreamRef stream,
                                    Device stream_device) const = 0;
  // Makes `stream` wait for the work queued so far on `after` (RecordStream).
  virtual Status StreamWaitsFor(CudaStreamRef stream, CudaStreamRef after) const = 0;

  // A private buffer of `bytes` in this view's memory (on its device) filled
  // by `copies` out of the allocations (this one's, or another ring's: a
  // device-to-device copy, peer or through the host), in the order of
  // `stream` (at once on the host). On failure nothing is left allocated,
  // and no copy queued by this call still reads a ring.
  virtual Result<void*> Gather(std::span<const RingCopy> copies, size_t bytes,
                               CudaStreamRef stream) const = 0;
  // Frees a buffer of Gather once the work queued so far on `users` (the
  // delivery stream first) has completed, without waiting on the host.
  virtual void FreeGather(void* buffer, std::span<const CudaStreamRef> users) const = 0;

  // Tokens that are done once the work queued so far on `streams` has
  // completed (Note [Device leases]); none for host memory.
  virtual CompletionTokens TokensAfter(std::span<const CudaStreamRef> streams) const = 0;
};

// Maps a host ring allocation (host_ring_view.cc).
Result<std::unique_ptr<RingView>> MapHostRing(const proto::Allocation& allocation);
// Maps a CUDA ring allocation and opens its `window` slot events
// (cuda_ring_view.cc), in the context of device `open_in` when it is another
// device with peer access to the ring's (Note [Peer rings]), else in the
// ring's device's. InvalidArgument in a build without CUDA.
Result<std::unique_ptr<RingView>> MapCudaRing(const proto::Allocation& allocation, uint32_t window,
                                              int open_in = -1);

// The server's rings as this client sees them: the layout (the same on every
// ring) and, per ring, one view per allocation (per memory kind) that
// WELCOME announced. The home ring (WELCOME's home_ring: the consumer's
// device's) is mapped at once; a batch reads it zero-copy. Other rings are
// mapped when a batch first has a segment there.
class MappedRing {
 public:
  // Maps the home ring of `welcome`. Internal when the sizes disagree with
  // the layout or a field's memory has no allocation; the mapping's error
  // (with what to check) otherwise.
  static Result<MappedRing> Map(const proto::Welcome& welcome);

  const RingLayout& layout() const { return layout_; }
  size_t ring_count() const { return allocations_.size(); }
  uint32_t home() const { return home_; }
  // The home ring's view holding fields of memory `kind` (Map checked it exists).
  const RingView& view(MemoryKind kind) const { return *Find(views_, kind); }
  // The home ring's views.
  const std::vector<std::unique_ptr<RingView>>& views() const { return views_; }
  // Ring `ring`'s view holding fields of memory `kind`, mapped on first use.
  // REQUIRES: ring < ring_count().
  Result<const RingView*> view(uint32_t ring, MemoryKind kind) const BC_EXCLUDES(peers_->mu);

  // Makes `stream` wait for the producer's writes of the slots `segments`
  // lie in, each on its own ring (Note [Device ring ordering], step 3).
  Status OrderAfterProducer(std::span<const Segment> segments, CudaStreamRef stream) const;
  // RingView's operations over every view of the home ring.
  Status StreamWaitsFor(CudaStreamRef stream, CudaStreamRef after) const;
  CompletionTokens TokensAfter(std::span<const CudaStreamRef> streams) const;

 private:
  using Views = std::vector<std::unique_ptr<RingView>>;
  // The other rings' views, mapped on first use (empty until then).
  struct Peers {
    Mutex mu;
    std::vector<Views> views BC_GUARDED_BY(mu);
  };
  MappedRing(RingLayout layout, uint32_t slots) : layout_(std::move(layout)), slots_(slots) {}
  // Maps `allocations` (one ring's) for this layout; CUDA ones in the
  // context of `open_in` where peer access allows (MapCudaRing).
  Result<Views> MapRing(const std::vector<proto::Allocation>& allocations, int open_in = -1) const;
  static const RingView* Find(const Views& views, MemoryKind kind);

  RingLayout layout_;
  uint32_t slots_ = 0;  // the window's and the resume lane's (Note [Resume])
  uint32_t home_ = 0;
  std::vector<std::vector<proto::Allocation>> allocations_;  // per ring
  Views views_;                                              // the home ring's
  std::unique_ptr<Peers> peers_;
};

}  // namespace batchcast::internal
