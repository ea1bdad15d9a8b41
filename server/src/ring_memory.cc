#include "ring_memory.h"

#include <cstring>

#include "batchcast/core/runtime_dir.h"

namespace batchcast {

Result<std::unique_ptr<RingMemory>> RingMemory::Create(const RingLayout& layout,
                                                       const std::string& server_name) {
  std::unique_ptr<RingMemory> ring(new RingMemory());
  if (size_t bytes = layout.allocation_bytes(MemoryKind::kHost); bytes > 0) {
    BATCHCAST_ASSIGN_OR_RETURN(ring->host_,
                               HostSharedMemory::Create(HostRingShmName(server_name), bytes));
    proto::Allocation a;
    a.kind = MemoryKind::kHost;
    a.bytes = bytes;
    a.shm_name = ring->host_->name();
    ring->allocations_.push_back(std::move(a));
  }
  if (layout.allocation_bytes(MemoryKind::kCuda) > 0) {
    return InvalidArgumentError("this build has no CUDA ring (device memory)");
  }
  return ring;
}

uint8_t* RingMemory::base(MemoryKind kind) const {
  BATCHCAST_CHECK(kind == MemoryKind::kHost && host_ != nullptr);
  return host_->data();
}

}  // namespace batchcast
