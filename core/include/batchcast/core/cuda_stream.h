// CudaStreamRef: a typed, non-owning reference to a CUDA stream.
//
// Streams cross the public API (ConsumerOptions::cuda_stream,
// Batch::RecordStream) and the project's internal ones without CUDA headers.
// A CudaStreamRef holds a cudaStream_t of some device without owning it; the
// default-constructed one is the legacy default stream (nullptr) of the device
// concerned. It converts implicitly from a cudaStream_t (or nullptr), so C++
// callers pass their streams as they are; Python passes torch's
// `stream.cuda_stream` integer through FromAddress.
//
// Thread-safety: a value type.
#pragma once

#include <cstddef>
#include <cstdint>

namespace batchcast {

// The scheduling priority of a stream's kernels (cudaStreamCreateWithPriority).
// It orders work of one CUDA context only: the kernels of a server's
// high-priority streams go before a trainer's kernels when both run in one
// process (an in-process batchcast.Server), and may preempt them; between
// processes without MPS the GPU time-slices whole contexts and priorities
// do not apply. A server's priority (--gpu-priority) covers every stream
// its GPU work runs on: decode, augmentation and the copies into the ring.
enum class StreamPriority : uint8_t {
  kNormal = 0,  // CUDA's default priority
  kHigh = 1,    // the greatest priority the device offers
};

class CudaStreamRef {
 public:
  constexpr CudaStreamRef() = default;
  constexpr CudaStreamRef(std::nullptr_t) {}  // NOLINT: the legacy default stream
  // From a cudaStream_t (a pointer to CUDA's opaque CUstream_st).
  template <typename T>
  CudaStreamRef(T* stream) : handle_(static_cast<void*>(stream)) {}  // NOLINT: implicit
  // From an address held as an integer (torch.cuda.Stream.cuda_stream).
  static CudaStreamRef FromAddress(uintptr_t address) {
    return CudaStreamRef(reinterpret_cast<void*>(address));
  }

  // The cudaStream_t, as void* (cast it back in files that include CUDA headers).
  void* handle() const { return handle_; }
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(handle_); }
  bool is_legacy_default() const { return handle_ == nullptr; }
  bool operator==(const CudaStreamRef& other) const { return handle_ == other.handle_; }
  bool operator!=(const CudaStreamRef& other) const { return handle_ != other.handle_; }

 private:
  void* handle_ = nullptr;
};

}  // namespace batchcast
