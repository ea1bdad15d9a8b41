// The CUDA runtime wrappers of batchcast/cuda/runtime.h (CUDA builds).
#include "batchcast/cuda/runtime.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "batchcast/cuda/check.h"
#include "batchcast/core/logging.h"

namespace batchcast::cuda {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcHandle));
static_assert(sizeof(cudaIpcEventHandle_t) == sizeof(IpcHandle));

namespace internal {

Status CudaStatus(int error, const char* expression, const char* file, int line) {
  if (error == cudaSuccess) return Status::Ok();
  const auto e = static_cast<cudaError_t>(error);
  (void)cudaGetLastError();  // clear the (non-sticky) error state
  std::string message = std::string(expression) + ": " + cudaGetErrorName(e) + ": " +
                        cudaGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")";
  switch (e) {
    case cudaErrorMemoryAllocation:
      return ResourceExhaustedError(std::move(message));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCudartUnloading:
      return UnavailableError(std::move(message));
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidDevicePointer:
      return InvalidArgumentError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

}  // namespace internal

bool BuiltWithCuda() { return true; }

bool BuiltWithNvJpeg() {
#ifdef BATCHCAST_HAVE_NVJPEG
  return true;
#else
  return false;
#endif
}

Result<int> DeviceCount() {
  int n = 0;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaGetDeviceCount(&n)));
  if (n == 0) return UnavailableError("no CUDA device is visible");
  return n;
}

Status CheckDevice(int device) {
  BATCHCAST_ASSIGN_OR_RETURN(int n, DeviceCount());
  if (device < 0 || device >= n) {
    return InvalidArgumentError("no CUDA device " + std::to_string(device) + ": " +
                                std::to_string(n) + " visible (cuda:0 .. cuda:" +
                                std::to_string(n - 1) + ")");
  }
  return Status::Ok();
}

std::string DeviceDescription(int device) {
  cudaDeviceProp p{};
  Status s = BATCHCAST_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  if (!s.ok()) return s.ToString();
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.multiProcessorCount) + " SMs, " +
         std::to_string(p.totalGlobalMem >> 20) + " MiB)";
}

DeviceGuard::DeviceGuard(int device) {
  status_ = BATCHCAST_CUDA_CHECK(cudaGetDevice(&previous_));
  if (!status_.ok()) return;
  if (previous_ != device) {
    status_ = BATCHCAST_CUDA_CHECK(cudaSetDevice(device));
    restore_ = status_.ok();
  }
}

DeviceGuard::~DeviceGuard() {
  if (restore_) (void)cudaSetDevice(previous_);
}

// ---- Stream ----

Result<Stream> Stream::Create(int device) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  cudaStream_t s = nullptr;
  BATCHCAST_RETURN_IF_ERROR(
      BATCHCAST_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)));
  Stream out;
  out.stream_ = s;
  out.device_ = device;
  return out;
}

Stream::Stream(Stream&& o) noexcept
    : stream_(std::exchange(o.stream_, nullptr)), device_(o.device_) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    this->~Stream();
    stream_ = std::exchange(o.stream_, nullptr);
    device_ = o.device_;
  }
  return *this;
}

Stream::~Stream() {
  if (stream_ != nullptr) {
    DeviceGuard g(device_);
    (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
    stream_ = nullptr;
  }
}

Status Stream::Synchronize() const {
  return BATCHCAST_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
}

// ---- Event ----

namespace {
// Events exported by this process: handle -> event (Note [CUDA IPC lifetimes]).
std::mutex& LocalEventsMu() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::map<IpcHandle, std::pair<void*, int>, bool (*)(const IpcHandle&, const IpcHandle&)>&
LocalEvents() {
  static auto* m = new std::map<IpcHandle, std::pair<void*, int>,
                                bool (*)(const IpcHandle&, const IpcHandle&)>(
      [](const IpcHandle& a, const IpcHandle& b) {
        return std::memcmp(a.data(), b.data(), a.size()) < 0;
      });
  return *m;
}
}  // namespace

Result<Event> Event::Create(int device, bool interprocess, bool blocking_sync) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  unsigned flags = cudaEventDisableTiming;
  if (interprocess) flags |= cudaEventInterprocess;
  if (blocking_sync) flags |= cudaEventBlockingSync;
  cudaEvent_t e = nullptr;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags)));
  Event out;
  out.event_ = e;
  out.device_ = device;
  return out;
}

Result<Event> Event::OpenIpc(const IpcHandle& handle, int device) {
  {
    std::lock_guard lock(LocalEventsMu());
    if (auto it = LocalEvents().find(handle); it != LocalEvents().end()) {
      Event out;
      out.event_ = it->second.first;
      out.device_ = it->second.second;
      out.owned_ = false;
      return out;
    }
  }
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  cudaIpcEventHandle_t h;
  std::memcpy(&h, handle.data(), sizeof(h));
  cudaEvent_t e = nullptr;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaIpcOpenEventHandle(&e, h)));
  Event out;
  out.event_ = e;
  out.device_ = device;
  return out;
}

Event::Event(Event&& o) noexcept
    : event_(std::exchange(o.event_, nullptr)),
      device_(o.device_),
      owned_(o.owned_),
      exported_(std::exchange(o.exported_, false)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    this->~Event();
    event_ = std::exchange(o.event_, nullptr);
    device_ = o.device_;
    owned_ = o.owned_;
    exported_ = std::exchange(o.exported_, false);
  }
  return *this;
}

Event::~Event() {
  if (event_ == nullptr) return;
  if (exported_) {
    std::lock_guard lock(LocalEventsMu());
    for (auto it = LocalEvents().begin(); it != LocalEvents().end();) {
      it = it->second.first == event_ ? LocalEvents().erase(it) : std::next(it);
    }
  }
  if (owned_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  event_ = nullptr;
}

Result<IpcHandle> Event::ExportIpc() {
  cudaIpcEventHandle_t h;
  BATCHCAST_RETURN_IF_ERROR(
      BATCHCAST_CUDA_CHECK(cudaIpcGetEventHandle(&h, static_cast<cudaEvent_t>(event_))));
  IpcHandle out;
  std::memcpy(out.data(), &h, sizeof(h));
  std::lock_guard lock(LocalEventsMu());
  LocalEvents()[out] = {event_, device_};
  exported_ = true;
  return out;
}

Status Event::Record(CudaStreamRef stream) const {
  if (stream == nullptr) {
    // The legacy default stream is the current device's: make it the event's.
    DeviceGuard g(device_);
    BATCHCAST_RETURN_IF_ERROR(g.status());
    return BATCHCAST_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), nullptr));
  }
  return BATCHCAST_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream.handle())));
}

Status Event::BlockStream(CudaStreamRef stream) const {
  if (stream == nullptr) {
    DeviceGuard g(device_);
    BATCHCAST_RETURN_IF_ERROR(g.status());
    return BATCHCAST_CUDA_CHECK(cudaStreamWaitEvent(nullptr, static_cast<cudaEvent_t>(event_), 0));
  }
  return BATCHCAST_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.handle()), static_cast<cudaEvent_t>(event_), 0));
}

Result<bool> Event::Query() const {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  return BATCHCAST_CUDA_CHECK(e);
}

Status Event::Synchronize() const {
  return BATCHCAST_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}

// ---- IPC mapping cache ----
//
// Note [CUDA IPC lifetimes]
// The server's ring is one cudaMalloc allocation, exported once with
// cudaIpcGetMemHandle; its handle and one interprocess event per slot travel
// in WELCOME. A consumer process maps the allocation once (cudaIpcOpenMemHandle
// costs a millisecond or more) and keeps the mapping while its connection
// lives: the client's Session holds the shared_ptr<IpcMapping> (through its
// CUDA ring view), and every Batch holds the Session, so the mapping outlives
// every view a user may still have.
// The cache below keys mappings by handle bytes, so two consumers of one
// server in one process share one mapping (CUDA refuses to open a handle twice
// in one context); the last holder's release closes it. Before a Session
// drops its mapping it waits for the GPU work its batches were used by (Note
// [Device leases] in client/src/lease_ledger.h), since closing a mapping that
// queued kernels still read is undefined.
// A handle exported by this very process (a consumer in the server's process,
// e.g. Python tests) cannot be opened through CUDA IPC; ExportIpc registers
// the allocation here so that OpenIpcMemory returns a non-owning view of it.
// Such a view must not outlive the server (the server outlives its in-process
// consumers' batches in every supported use: Server::Stop waits for nothing,
// so an in-process consumer must drop its batches before stopping the server).
// A server that exits (even by SIGKILL) while consumers still map the ring
// does not invalidate their mappings: the driver frees the memory when the
// last process that maps it closes it or exits.

namespace {

struct HandleLess {
  bool operator()(const IpcHandle& a, const IpcHandle& b) const {
    return std::memcmp(a.data(), b.data(), a.size()) < 0;
  }
};

struct IpcRegistry {
  std::mutex mu;
  std::map<IpcHandle, std::weak_ptr<IpcMapping>, HandleLess> opened;
  // Allocations of this process: handle -> (pointer, device).
  std::map<IpcHandle, std::pair<uint8_t*, int>, HandleLess> local;
};

IpcRegistry& Registry() {
  static auto* r = new IpcRegistry();  // never destroyed: used from destructors at exit
  return *r;
}

}  // namespace

IpcMapping::~IpcMapping() {
  if (owned_ && data_ != nullptr) {
    DeviceGuard g(device_);
    (void)cudaIpcCloseMemHandle(data_);
  }
}

Result<std::shared_ptr<IpcMapping>> OpenIpcMemory(const IpcHandle& handle, int device) {
  IpcRegistry& r = Registry();
  std::lock_guard lock(r.mu);
  if (auto it = r.opened.find(handle); it != r.opened.end()) {
    if (auto m = it->second.lock()) return m;
  }
  std::shared_ptr<IpcMapping> m(new IpcMapping());
  m->handle_ = handle;
  m->device_ = device;
  if (auto it = r.local.find(handle); it != r.local.end()) {
    m->data_ = it->second.first;
    m->device_ = it->second.second;
    m->owned_ = false;
  } else {
    DeviceGuard g(device);
    BATCHCAST_RETURN_IF_ERROR(g.status());
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.data(), sizeof(h));
    void* p = nullptr;
    BATCHCAST_RETURN_IF_ERROR(
        BATCHCAST_CUDA_CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess)));
    m->data_ = static_cast<uint8_t*>(p);
    m->owned_ = true;
  }
  r.opened[handle] = m;
  return m;
}

// ---- DeviceBuffer ----

Result<DeviceBuffer> DeviceBuffer::Create(int device, size_t bytes) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  void* p = nullptr;
  Status s = BATCHCAST_CUDA_CHECK(cudaMalloc(&p, bytes));
  if (!s.ok()) {
    return Status(s.code(), "cannot allocate " + std::to_string(bytes >> 20) + " MiB on cuda:" +
                                std::to_string(device) + ": " + s.message());
  }
  DeviceBuffer out;
  out.data_ = static_cast<uint8_t*>(p);
  out.size_ = bytes;
  out.device_ = device;
  return out;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(o.size_),
      device_(o.device_),
      exported_(std::exchange(o.exported_, false)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    data_ = std::exchange(o.data_, nullptr);
    size_ = o.size_;
    device_ = o.device_;
    exported_ = std::exchange(o.exported_, false);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ == nullptr) return;
  if (exported_) {
    IpcRegistry& r = Registry();
    std::lock_guard lock(r.mu);
    for (auto it = r.local.begin(); it != r.local.end();) {
      it = it->second.first == data_ ? r.local.erase(it) : std::next(it);
    }
  }
  DeviceGuard g(device_);
  (void)cudaFree(data_);
  data_ = nullptr;
}

Result<IpcHandle> DeviceBuffer::ExportIpc() {
  cudaIpcMemHandle_t h;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaIpcGetMemHandle(&h, data_)));
  IpcHandle out;
  std::memcpy(out.data(), &h, sizeof(h));
  IpcRegistry& r = Registry();
  std::lock_guard lock(r.mu);
  r.local[out] = {data_, device_};
  exported_ = true;
  return out;
}

// ---- PinnedBuffer ----

Result<PinnedBuffer> PinnedBuffer::Create(size_t bytes) {
  void* p = nullptr;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaMallocHost(&p, bytes)));
  PinnedBuffer out;
  out.data_ = static_cast<uint8_t*>(p);
  out.size_ = bytes;
  return out;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(o.size_) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    this->~PinnedBuffer();
    data_ = std::exchange(o.data_, nullptr);
    size_ = o.size_;
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
  data_ = nullptr;
}

// ---- copies, pools ----

Status CopyAsync(void* dst, const void* src, size_t bytes, CudaStreamRef stream) {
  if (bytes == 0) return Status::Ok();
  return BATCHCAST_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream.handle())));
}

Status Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  return BATCHCAST_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

Status MemsetAsync(void* dst, int value, size_t bytes, CudaStreamRef stream) {
  if (bytes == 0) return Status::Ok();
  return BATCHCAST_CUDA_CHECK(
      cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream.handle())));
}

Status SynchronizeStream(CudaStreamRef stream) {
  return BATCHCAST_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle())));
}

namespace {
Result<cudaMemPool_t> PoolFor(int device) {
  static std::mutex mu;
  static auto* pools = new std::map<int, cudaMemPool_t>();
  std::lock_guard lock(mu);
  if (auto it = pools->find(device); it != pools->end()) return it->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaMemPoolCreate(&pool, &props)));
  uint64_t keep = UINT64_MAX;  // keep freed blocks for reuse
  BATCHCAST_RETURN_IF_ERROR(
      BATCHCAST_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep)));
  (*pools)[device] = pool;
  return pool;
}
}  // namespace

Result<void*> AllocAsync(int device, size_t bytes, CudaStreamRef stream) {
  BATCHCAST_ASSIGN_OR_RETURN(cudaMemPool_t pool, PoolFor(device));
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  void* p = nullptr;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(
      cudaMallocFromPoolAsync(&p, bytes, pool, static_cast<cudaStream_t>(stream.handle()))));
  return p;
}

Status FreeAsync(int device, void* ptr, CudaStreamRef stream) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  return BATCHCAST_CUDA_CHECK(cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream.handle())));
}

Result<MemInfo> GetMemInfo(int device) {
  DeviceGuard g(device);
  BATCHCAST_RETURN_IF_ERROR(g.status());
  MemInfo m;
  BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaMemGetInfo(&m.free, &m.total)));
  return m;
}

}  // namespace batchcast::cuda
