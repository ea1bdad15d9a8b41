// batchcast::cuda: the CUDA runtime behind opaque C++ types (no CUDA headers).
//
// Only files under cuda/ and cuda_image/ include CUDA headers (DESIGN.md
// "Layout"); everything else uses these RAII wrappers, which hold CUDA handles
// as void*.
// A build without CUDA (no nvcc, or BATCHCAST_WITH_CUDA=OFF) has the same API:
// BuiltWithCuda() is false and every call fails with Unavailable.
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
  int previous_ = -1;
  bool restore_ = false;
  Status status_;
};

// A non-blocking stream (cudaStreamNonBlocking) on one device.
class Stream {
 public:
  static Result<Stream> Create(int device);
  Stream() = default;
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  ~Stream();
  CudaStreamRef ref() const { return CudaStreamRef(stream_); }
  int device() const { return device_; }
  Status Synchronize() const;

 private:
  void* stream_ = nullptr;
  int device_ = -1;
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
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  ~Event();

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
  bool valid() const { return event_ != nullptr; }
  int device() const { return device_; }
  void* handle() const { return event_; }

 private:
  void* event_ = nullptr;
  int device_ = -1;
  bool owned_ = true;
  bool exported_ = false;
};

// One cudaMalloc allocation.
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> Create(int device, size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  int device() const { return device_; }
  // cudaIpcGetMemHandle of the allocation. Also registers the allocation in
  // this process's IPC cache, so that OpenIpcMemory in the same process (a
  // consumer in the server's process) finds it without CUDA IPC, which does
  // not work inside one process.
  Result<IpcHandle> ExportIpc();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int device_ = -1;
  bool exported_ = false;
};

// Page-locked host memory (cudaMallocHost), for fast asynchronous copies.
class PinnedBuffer {
 public:
  static Result<PinnedBuffer> Create(size_t bytes);
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  ~PinnedBuffer();
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A device allocation of another process, mapped into this one.
class IpcMapping {
 public:
  ~IpcMapping();
  IpcMapping(const IpcMapping&) = delete;
  IpcMapping& operator=(const IpcMapping&) = delete;
  uint8_t* data() const { return data_; }
  int device() const { return device_; }

 private:
  friend Result<std::shared_ptr<IpcMapping>> OpenIpcMemory(const IpcHandle&, int);
  IpcMapping() = default;
  uint8_t* data_ = nullptr;
  int device_ = -1;
  bool owned_ = false;  // false: an allocation of this very process
  IpcHandle handle_{};
};

// Maps the allocation behind `handle` (cudaIpcOpenMemHandle with
// cudaIpcMemLazyEnablePeerAccess, in the context of `device`, the exporter's
// device). Mappings are cached per process: opening the same handle again
// returns the same mapping while any holder keeps it; it is closed
// (cudaIpcCloseMemHandle) when the last holder drops it.
// See Note [CUDA IPC lifetimes].
Result<std::shared_ptr<IpcMapping>> OpenIpcMemory(const IpcHandle& handle, int device);

// cudaMemcpyAsync with cudaMemcpyDefault (unified addressing picks the direction).
Status CopyAsync(void* dst, const void* src, size_t bytes, CudaStreamRef stream);
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
