// RingView of a host ring (POSIX shared memory): loads see the producer's
// committed writes (the BATCH that names a slot was sent after the commit),
// so there is nothing to order or to wait for, and a gather is a memcpy (from
// this ring or another host ring of the server).
#include <cstdlib>
#include <cstring>

#include "core/src/host_shm.h"
#include "ring_view.h"

namespace batchcast::internal {
namespace {

class HostRingView final : public RingView {
 public:
  explicit HostRingView(std::unique_ptr<HostSharedMemory> shm) : shm_(std::move(shm)) {}

  Device device() const override { return Device::Cpu(); }
  const uint8_t* data() const override { return shm_->data(); }

  Status OrderAfterProducer(std::span<const uint32_t>, CudaStreamRef, Device) const override {
    return Status::Ok();
  }
  Status StreamWaitsFor(CudaStreamRef, CudaStreamRef) const override { return Status::Ok(); }

  Result<void*> Gather(std::span<const RingCopy> copies, size_t bytes,
                       CudaStreamRef) const override {
    auto* buffer = static_cast<uint8_t*>(std::malloc(bytes > 0 ? bytes : 1));
    if (buffer == nullptr) {
      return ResourceExhaustedError("cannot allocate " + std::to_string(bytes) +
                                    " bytes for a gathered batch");
    }
    for (const RingCopy& c : copies) {
      const uint8_t* from = c.from != nullptr ? c.from->data() : shm_->data();  // another ring's
      std::memcpy(buffer + c.dst, from + c.src, c.bytes);
    }
    return static_cast<void*>(buffer);
  }
  void FreeGather(void* buffer, std::span<const CudaStreamRef>) const override {
    std::free(buffer);
  }

  CompletionTokens TokensAfter(std::span<const CudaStreamRef>) const override { return {}; }

 private:
  std::unique_ptr<HostSharedMemory> shm_;
};

}  // namespace

Result<std::unique_ptr<RingView>> MapHostRing(const proto::Allocation& allocation) {
  BATCHCAST_ASSIGN_OR_RETURN(std::unique_ptr<HostSharedMemory> shm,
                             HostSharedMemory::Open(allocation.shm_name));
  if (shm->size() < allocation.bytes) return InternalError("shared ring smaller than announced");
  return std::unique_ptr<RingView>(new HostRingView(std::move(shm)));
}

}  // namespace batchcast::internal
