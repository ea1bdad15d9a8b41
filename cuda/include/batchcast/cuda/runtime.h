// batchcast::cuda: the CUDA runtime behind opaque C++ types (no CUDA headers).
//
// Only files under cuda/ and cuda_image/ include CUDA headers (docs/design.md,
// "Layout"); everything else uses these RAII wrappers. Each owns its resource
// through one UniqueHandle (batchcast/cuda/unique_handle.h), whose moves are
// its only ones: move-only, moves leave the source empty, destruction
// releases the resource with the device it belongs to made current. CUDA's opaque stream and event
// types are only declared here (CUstream_st, CUevent_st), never defined. A build without CUDA (no
// nvcc, or BATCHCAST_WITH_CUDA=OFF) has the same API: BuiltWithCuda() is false and every call fails
// with Unavailable.
//
// Devices: every call that creates something takes the device index and makes
// it current only for its own duration (DeviceGuard), so the calling thread's
// current device (the user's, in a consumer) is left as it was.
//
// Streams are passed as CudaStreamRef (batchcast/core/cuda_stream.h), a typed
// non-owning cudaStream_t; the default one is the legacy default stream of the
// device concerned.
//
// Thread-safety: objects are not synchronized; distinct objects may be used
// from distinct threads (CUDA's own calls are thread-safe). The process-wide
// IPC mapping cache (OpenIpcMemory) is thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/status.h"
#include "batchcast/cuda/unique_handle.h"

// CUDA's opaque types behind cudaStream_t and cudaEvent_t (driver_types.h).
struct CUstream_st;
struct CUevent_st;

namespace batchcast::cuda {

// The bytes of a cudaIpcMemHandle_t or cudaIpcEventHandle_t (both 64 bytes),
// the same type as proto::IpcHandle.
using IpcHandle = std::array<uint8_t, 64>;

// True when this build has the CUDA runtime compiled in.
bool BuiltWithCuda();
// True when this build has nvJPEG (BATCHCAST_HAVE_NVJPEG).
bool BuiltWithNvJpeg();

// Number of CUDA devices. An error (Unavailable, with CUDA's reason: no driver,
// no device, ...) when there is none or no CUDA in this build.
Result<int> DeviceCount();
// OK when device `device` exists and can be used; Unavailable / InvalidArgument otherwise.
Status CheckDevice(int device);
// The calling thread's current device (cudaGetDevice). Initializes the CUDA
// runtime (so a process that forks afterwards cannot use CUDA in the child);
// an error when no device or no CUDA build.
Result<int> CurrentDevice();
// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" or the error text.
std::string DeviceDescription(int device);

// Makes `device` current for the scope, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  [[maybe_unused]] int previous_ = -1;  // unused in the stub build
  [[maybe_unused]] bool restore_ = false;
  Status status_;
};

// What each RAII type below owns, as the Traits of its UniqueHandle: the raw
// CUDA handle plus what destroying it needs. Destroy is defined next to the
// type's other functions (a no-op in the stub build, whose handles are always
// null).
namespace internal {

struct StreamTraits {
  struct Handle {
    CUstream_st* stream = nullptr;
    int device = -1;
  };
  static bool IsNull(const Handle& h) { return h.stream == nullptr; }
  // cudaStreamDestroy, with h.device current.
  static void Destroy(const Handle& h) noexcept;
};

struct EventTraits {
  struct Handle {
    CUevent_st* event = nullptr;
    int device = -1;
    // False for an event of this very process returned by Event::OpenIpc: a
    // reference to the exporter's event, which only the exporter destroys.
    bool owned = true;
    // Registered for Event::OpenIpc in this process (Event::ExportIpc).
    bool exported = false;
  };
  static bool IsNull(const Handle& h) { return h.event == nullptr; }
  // Unregisters an exported event, then cudaEventDestroy when owned.
  static void Destroy(const Handle& h) noexcept;
};

struct DeviceBufferTraits {
  struct Handle {
    uint8_t* data = nullptr;
    size_t size = 0;
    int device = -1;
    // Registered for OpenIpcMemory in this process (DeviceBuffer::ExportIpc).
    bool exported = false;
  };
  static bool IsNull(const Handle& h) { return h.data == nullptr; }
  // Unregisters an exported allocation, then cudaFree with h.device current.
  static void Destroy(const Handle& h) noexcept;
};

struct PinnedBufferTraits {
  struct Handle {
    uint8_t* data = nullptr;
    size_t size = 0;
  };
  static bool IsNull(const Handle& h) { return h.data == nullptr; }
  // cudaFreeHost.
  static void Destroy(const Handle& h) noexcept;
};

struct IpcMappingTraits {
  struct Handle {
    uint8_t* data = nullptr;
    int device = -1;
    bool owned = false;  // false: an allocation of this very process
  };
  static bool IsNull(const Handle& h) { return h.data == nullptr; }
  // cudaIpcCloseMemHandle with h.device current, when owned.
  static void Destroy(const Handle& h) noexcept;
};

}  // namespace internal

// A non-blocking stream (cudaStreamNonBlocking) on one device, at CUDA's
// default priority or the device's greatest (StreamPriority::kHigh).
class Stream {
 public:
  static Result<Stream> Create(int device, StreamPriority priority = StreamPriority::kNormal);
  Stream() = default;
  CudaStreamRef ref() const { return CudaStreamRef(handle_->stream); }
  int device() const { return handle_->device; }
  // cudaStreamGetPriority: lower numbers are higher priorities, 0 the default.
  Result<int> Priority() const;
  Status Synchronize() const;

 private:
  using Traits = internal::StreamTraits;
  explicit Stream(const Traits::Handle& h) : handle_(h) {}
  UniqueHandle<Traits> handle_;
};

// A CUDA event without timing (cudaEventDisableTiming), optionally
// interprocess (cudaEventInterprocess).
class Event {
 public:
  // blocking_sync: Synchronize() sleeps instead of spinning (cudaEventBlockingSync).
  static Result<Event> Create(int device, bool interprocess = false, bool blocking_sync = false);
  // Opens an event exported by another process (cudaIpcOpenEventHandle) on
  // `device` (the exporter's device). An event exported by this process is
  // returned as a non-owning reference to it (see OpenIpcMemory).
  static Result<Event> OpenIpc(const IpcHandle& handle, int device);
  Event() = default;

  // cudaIpcGetEventHandle; registers the event for OpenIpc in this process.
  Result<IpcHandle> ExportIpc();
  // cudaEventRecord(event, stream).
  Status Record(CudaStreamRef stream) const;
  // cudaStreamWaitEvent(stream, event): work queued on `stream` later waits
  // for the event's last record. No host synchronization.
  Status BlockStream(CudaStreamRef stream) const;
  // True when the work before the last record has completed (cudaEventQuery).
  Result<bool> Query() const;
  Status Synchronize() const;
  bool valid() const { return static_cast<bool>(handle_); }
  int device() const { return handle_->device; }
  void* handle() const { return handle_->event; }

 private:
  using Traits = internal::EventTraits;
  explicit Event(const Traits::Handle& h) : handle_(h) {}
  UniqueHandle<Traits> handle_;
};

// One cudaMalloc allocation.
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> Create(int device, size_t bytes);
  DeviceBuffer() = default;

  uint8_t* data() const { return handle_->data; }
  size_t size() const { return handle_->size; }
  int device() const { return handle_->device; }
  // cudaIpcGetMemHandle of the allocation. Also registers the allocation in
  // this process's IPC cache, so that OpenIpcMemory in the same process (a
  // consumer in the server's process) finds it without CUDA IPC, which does
  // not work inside one process.
  Result<IpcHandle> ExportIpc();

 private:
  using Traits = internal::DeviceBufferTraits;
  explicit DeviceBuffer(const Traits::Handle& h) : handle_(h) {}
  UniqueHandle<Traits> handle_;
};

// Page-locked host memory (cudaMallocHost), for fast asynchronous copies.
class PinnedBuffer {
 public:
  static Result<PinnedBuffer> Create(size_t bytes);
  PinnedBuffer() = default;
  uint8_t* data() const { return handle_->data; }
  size_t size() const { return handle_->size; }

 private:
  using Traits = internal::PinnedBufferTraits;
  explicit PinnedBuffer(const Traits::Handle& h) : handle_(h) {}
  UniqueHandle<Traits> handle_;
};

// A device allocation of another process, mapped into this one (or, for an
// allocation of this process, a non-owning view of it). Not movable: held
// through the shared_ptr of OpenIpcMemory.
class IpcMapping {
 public:
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  uint8_t* data() const { return handle_->data; }
  int device() const { return handle_->device; }

 private:
  using Traits = internal::IpcMappingTraits;
  friend Result<std::shared_ptr<IpcMapping>> OpenIpcMemory(const IpcHandle&, int);
  explicit IpcMapping(const Traits::Handle& h) : handle_(h) {}
  UniqueHandle<Traits> handle_;
};

// Maps the allocation behind `handle` (cudaIpcOpenMemHandle with
// cudaIpcMemLazyEnablePeerAccess, in the context of `device`: the exporter's
// device, or one with peer access to it). IpcMapping::device() is the device
// it was opened in (the first opener's when the cache returns it). Mappings are cached per process:
// opening the same handle again returns the same mapping while any holder keeps it; it is closed
// (cudaIpcCloseMemHandle) when the last holder drops it.
// See Note [CUDA IPC lifetimes].
Result<std::shared_ptr<IpcMapping>> OpenIpcMemory(const IpcHandle& handle, int device);

// cudaMemcpyAsync with cudaMemcpyDefault (unified addressing picks the direction).
Status CopyAsync(void* dst, const void* src, size_t bytes, CudaStreamRef stream);
// Whether `device` can read memory of `peer` directly (cudaDeviceCanAccessPeer:
// NVLink or PCIe peer access).
Result<bool> CanAccessPeer(int device, int peer);
// cudaMemcpyPeerAsync: `bytes` from `src` on device `src_device` to `dst` on
// `dst_device`, in the order of `stream`; works with or without peer access
// between the devices (through the host when there is none).
Status CopyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                     CudaStreamRef stream);
// Synchronous copy (cudaMemcpy, cudaMemcpyDefault).
Status Copy(void* dst, const void* src, size_t bytes);
// cudaMemsetAsync.
Status MemsetAsync(void* dst, int value, size_t bytes, CudaStreamRef stream);
// cudaStreamSynchronize.
Status SynchronizeStream(CudaStreamRef stream);

// Stream-ordered device memory from a private pool of `device` (kept, not
// returned to the driver, between uses), for the client's gather buffers.
Result<void*> AllocAsync(int device, size_t bytes, CudaStreamRef stream);
// Frees memory of AllocAsync (of `device`) after the work queued on `stream`.
Status FreeAsync(int device, void* ptr, CudaStreamRef stream);

struct MemInfo {
  size_t free = 0;
  size_t total = 0;
};
// cudaMemGetInfo on `device` (creates the device's context if needed).
Result<MemInfo> GetMemInfo(int device);

}  // namespace batchcast::cuda
