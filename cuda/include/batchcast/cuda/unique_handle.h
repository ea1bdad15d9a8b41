// UniqueHandle<Traits>: the one owner of a CUDA resource (a stream, an event, a
// device or pinned allocation, an IPC mapping), in the style of DALI's
// UniqueHandle. Every RAII type of batchcast/cuda/runtime.h holds one, so that
// ownership, moves and destruction are written once:
//
//   struct StreamTraits {
//     struct Handle { CUstream_st* stream = nullptr; int device = -1; };
//     static bool IsNull(const Handle& h) { return h.stream == nullptr; }
//     static void Destroy(const Handle& h) noexcept;  // cudaStreamDestroy
//   };
//   class Stream { ... UniqueHandle<StreamTraits> handle_; };
//
// Traits::Handle is a small value type (default-constructed: the null handle)
// that carries everything Destroy needs (the device to make current, whether
// the resource is owned or was exported, its size). Move is swap + reset: the
// moved-from object ends up null, and the resource the target held before is
// destroyed; nothing ever writes members of a destroyed object.
//
// Thread-safety: none (a value type); Destroy may be called from any thread.
#pragma once

#include <utility>

namespace batchcast::cuda {

template <typename Traits>
class UniqueHandle {
 public:
  using Handle = typename Traits::Handle;

  UniqueHandle() = default;
  // Takes ownership of `handle` (the null handle owns nothing).
  explicit UniqueHandle(const Handle& handle) : handle_(handle) {}
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(std::exchange(other.handle_, Handle())) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      std::swap(handle_, other.handle_);
      other.reset();
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  // Destroys the resource (if any); the handle is null afterwards.
  void reset() noexcept {
    if (!Traits::IsNull(handle_)) Traits::Destroy(handle_);
    handle_ = Handle();
  }
  // Gives up ownership without destroying: the caller owns the result.
  [[nodiscard]] Handle release() noexcept { return std::exchange(handle_, Handle()); }

  const Handle& get() const { return handle_; }
  const Handle* operator->() const { return &handle_; }
  // State that travels with the resource (e.g. "exported"); not the resource itself.
  Handle* mutable_handle() { return &handle_; }
  explicit operator bool() const { return !Traits::IsNull(handle_); }

 private:
  Handle handle_{};
};

}  // namespace batchcast::cuda
