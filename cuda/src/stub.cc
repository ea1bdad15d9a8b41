// batchcast::cuda for builds without CUDA: the same API, every call fails with
// Unavailable (the server then refuses --device cuda:N with a clear message,
// the client refuses CUDA rings, and GPU tests skip).
#include "batchcast/cuda/check.h"
#include "batchcast/cuda/kernels.h"
#include "batchcast/cuda/runtime.h"

namespace batchcast::cuda {
namespace {
Status NoCuda() {
  return internal::NotBuiltError(
      "CUDA support (built without a CUDA compiler or with -DBATCHCAST_WITH_CUDA=OFF)");
}
}  // namespace

namespace internal {
Status CudaStatus(int error, const char* expression, const char* file, int line) {
  if (error == 0) return Status::Ok();
  return InternalError(CheckMessage(expression, "CUDA error " + std::to_string(error), file, line));
}
}  // namespace internal

bool BuiltWithCuda() { return false; }
bool BuiltWithNvJpeg() { return false; }
Result<int> DeviceCount() { return NoCuda(); }
Status CheckDevice(int) { return NoCuda(); }
Result<int> CurrentDevice() { return NoCuda(); }
std::string DeviceDescription(int) { return NoCuda().ToString(); }

DeviceGuard::DeviceGuard(int) : status_(NoCuda()) {}
DeviceGuard::~DeviceGuard() = default;

// Handles of this build are always null: nothing to destroy.
void internal::StreamTraits::Destroy(const Handle&) noexcept {}
void internal::EventTraits::Destroy(const Handle&) noexcept {}
void internal::DeviceBufferTraits::Destroy(const Handle&) noexcept {}
void internal::PinnedBufferTraits::Destroy(const Handle&) noexcept {}
void internal::IpcMappingTraits::Destroy(const Handle&) noexcept {}

Result<Stream> Stream::Create(int, StreamPriority) { return NoCuda(); }
Result<int> Stream::Priority() const { return NoCuda(); }
Status Stream::Synchronize() const { return NoCuda(); }

Result<Event> Event::Create(int, bool, bool) { return NoCuda(); }
Result<Event> Event::OpenIpc(const IpcHandle&, int) { return NoCuda(); }
Result<IpcHandle> Event::ExportIpc() { return NoCuda(); }
Status Event::Record(CudaStreamRef) const { return NoCuda(); }
Status Event::BlockStream(CudaStreamRef) const { return NoCuda(); }
Result<bool> Event::Query() const { return NoCuda(); }
Status Event::Synchronize() const { return NoCuda(); }

Result<DeviceBuffer> DeviceBuffer::Create(int, size_t) { return NoCuda(); }
Result<IpcHandle> DeviceBuffer::ExportIpc() { return NoCuda(); }

Result<PinnedBuffer> PinnedBuffer::Create(size_t) { return NoCuda(); }

Result<std::shared_ptr<IpcMapping>> OpenIpcMemory(const IpcHandle&, int) { return NoCuda(); }

Status CopyAsync(void*, const void*, size_t, CudaStreamRef) { return NoCuda(); }
Result<bool> CanAccessPeer(int, int) { return NoCuda(); }
Status CopyPeerAsync(void*, int, const void*, int, size_t, CudaStreamRef) { return NoCuda(); }
Status Copy(void*, const void*, size_t) { return NoCuda(); }
Status MemsetAsync(void*, int, size_t, CudaStreamRef) { return NoCuda(); }
Status SynchronizeStream(CudaStreamRef) { return NoCuda(); }
Result<void*> AllocAsync(int, size_t, CudaStreamRef) { return NoCuda(); }
Status FreeAsync(int, void*, CudaStreamRef) { return NoCuda(); }
Result<MemInfo> GetMemInfo(int) { return NoCuda(); }

Status ChecksumAsync(const void*, size_t, uint64_t*, CudaStreamRef) { return NoCuda(); }
uint64_t HostChecksum(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes; ++i) sum += static_cast<uint64_t>(p[i]) * (i % 65521 + 1);
  return sum;
}
Status SpinAsync(uint64_t, CudaStreamRef) { return NoCuda(); }

}  // namespace batchcast::cuda
