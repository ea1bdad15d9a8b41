// RingMemory: the server's shared allocations of a RingLayout, one per memory
// kind in use, and their descriptions for WELCOME.
//
// Host memory is a HostSharedMemory named after the server (removed on
// destruction; a leftover of a killed server is replaced at creation, see
// Note [Server instance lock]).
//
// Device memory (--device cuda:N) is one cudaMalloc allocation on device N,
// exported with cudaIpcGetMemHandle, plus one interprocess event per slot
// (cudaEventDisableTiming | cudaEventInterprocess), exported with
// cudaIpcGetEventHandle; both travel in WELCOME. The producer records a slot's
// event on its stream after the GPU work that writes the slot and before
// Scheduler::Commit (Note [Device ring ordering]). See Note [CUDA IPC
// lifetimes] in core/src/cuda/runtime.cc.
//
// Thread-safety: immutable after Create() (recording events is thread-safe).
#pragma once

#include <memory>
#include <vector>

#include "batchcast/cuda/runtime.h"
#include "core/src/host_shm.h"
#include "core/src/protocol.h"
#include "core/src/ring_layout.h"

namespace batchcast {

class RingMemory {
 public:
  // `cuda_device` is the device of the CUDA allocation (-1 when the layout has
  // no kCuda field). `ring`: the ring's index in the server (a host ring
  // other than the first gets its own shared memory name).
  static Result<std::unique_ptr<RingMemory>> Create(const RingLayout& layout,
                                                    const std::string& server_name,
                                                    int cuda_device = -1, uint32_t ring = 0);
  // Base address of the allocation of `kind` (a device pointer for kCuda).
  // REQUIRES: the layout uses it.
  uint8_t* base(MemoryKind kind) const;
  const std::vector<proto::Allocation>& allocations() const { return allocations_; }

  bool has_device_memory() const { return device_.data() != nullptr; }
  bool has_host_memory() const { return host_ != nullptr; }
  int cuda_device() const { return cuda_device_; }
  // The interprocess event of `slot`. REQUIRES: has_device_memory().
  const cuda::Event& slot_event(uint32_t slot) const { return slot_events_[slot]; }

 private:
  RingMemory() = default;
  std::unique_ptr<HostSharedMemory> host_;
  int cuda_device_ = -1;
  std::vector<cuda::Event> slot_events_;
  cuda::DeviceBuffer device_;
  std::vector<proto::Allocation> allocations_;
};

}  // namespace batchcast
