#include "ring_memory.h"

#include <cstring>

#include "core/src/runtime_dir.h"

namespace batchcast {

Result<std::unique_ptr<RingMemory>> RingMemory::Create(const RingLayout& layout,
                                                       const std::string& server_name,
                                                       int cuda_device, uint32_t ring_index) {
  std::unique_ptr<RingMemory> ring(new RingMemory());
  if (size_t bytes = layout.allocation_bytes(MemoryKind::kHost); bytes > 0) {
    Result<std::unique_ptr<HostSharedMemory>> host =
        HostSharedMemory::Create(HostRingShmName(server_name, ring_index), bytes);
    if (!host.ok()) {
      return Status(host.status().code(),
                    "the host ring (" + std::to_string(layout.slots()) + " slots of " +
                        std::to_string(layout.batch_size()) + " samples) " +
                        host.status().message() +
                        "; use a smaller --window, --batch-size, --size or --dtype, or enlarge "
                        "/dev/shm");
    }
    ring->host_ = std::move(*host);
    proto::Allocation a;
    a.kind = MemoryKind::kHost;
    a.bytes = bytes;
    a.shm_name = ring->host_->name();
    ring->allocations_.push_back(std::move(a));
  }
  if (size_t bytes = layout.allocation_bytes(MemoryKind::kCuda); bytes > 0) {
    if (cuda_device < 0) return InvalidArgumentError("a CUDA ring needs a device");
    ring->cuda_device_ = cuda_device;
    BATCHCAST_ASSIGN_OR_RETURN(ring->device_, cuda::DeviceBuffer::Create(cuda_device, bytes));
    proto::Allocation a;
    a.kind = MemoryKind::kCuda;
    a.bytes = bytes;
    a.device_index = cuda_device;
    BATCHCAST_ASSIGN_OR_RETURN(a.mem_handle, ring->device_.ExportIpc());
    // Zero the ring once, so that no consumer can ever read uninitialized
    // memory; with its device current (a server may hold rings on several).
    cuda::DeviceGuard current(cuda_device);
    BATCHCAST_RETURN_IF_ERROR(current.status());
    BATCHCAST_ASSIGN_OR_RETURN(cuda::Stream s, cuda::Stream::Create(cuda_device));
    BATCHCAST_RETURN_IF_ERROR(cuda::MemsetAsync(ring->device_.data(), 0, bytes, s.ref()));
    for (uint32_t k = 0; k < layout.slots(); ++k) {
      BATCHCAST_ASSIGN_OR_RETURN(cuda::Event e, cuda::Event::Create(cuda_device, true));
      BATCHCAST_RETURN_IF_ERROR(e.Record(s.ref()));  // "written" = zeroed
      BATCHCAST_ASSIGN_OR_RETURN(cuda::IpcHandle h, e.ExportIpc());
      a.event_handles.push_back(h);
      ring->slot_events_.push_back(std::move(e));
    }
    BATCHCAST_RETURN_IF_ERROR(s.Synchronize());
    ring->allocations_.push_back(std::move(a));
  }
  return ring;
}

uint8_t* RingMemory::base(MemoryKind kind) const {
  if (kind == MemoryKind::kCuda) {
    BATCHCAST_CHECK(device_.data() != nullptr);
    return device_.data();
  }
  BATCHCAST_CHECK(kind == MemoryKind::kHost && host_ != nullptr);
  return host_->data();
}

}  // namespace batchcast
