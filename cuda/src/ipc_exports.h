// IpcExports: what this process exported through CUDA IPC, by handle bytes.
//
// CUDA IPC cannot open a handle in the process that exported it, yet a
// consumer may live in the server's process (Python tests, batchcast.Producer
// with an in-process Loader). So DeviceBuffer::ExportIpc and Event::ExportIpc
// register the exported resource here, and OpenIpcMemory / Event::OpenIpc look
// here first and return a non-owning view of it. An exported resource
// unregisters itself when it is destroyed (its UniqueHandle traits).
// See Note [CUDA IPC lifetimes] in ipc_memory.cc.
//
// Thread-safety: thread-safe (one mutex per registry). Lock order: the IPC
// mapping cache's mutex (ipc_memory.cc) may be held while calling Find; never
// the reverse.
#pragma once

#include <cstring>
#include <map>
#include <optional>

#include "batchcast/cuda/runtime.h"
#include "core/src/mutex.h"

namespace batchcast::cuda::internal {

class IpcExports {
 public:
  struct Entry {
    void* pointer = nullptr;  // the allocation's base or the cudaEvent_t
    int device = -1;
  };

  // Registers `entry` under a raw CUDA IPC handle (cudaIpcMemHandle_t,
  // cudaIpcEventHandle_t); returns the handle's bytes.
  template <typename Raw>
  IpcHandle Add(const Raw& raw, Entry entry);
  std::optional<Entry> Find(const IpcHandle& handle) const;
  // Forgets every handle of `pointer`.
  void Remove(const void* pointer);

 private:
  void AddBytes(const IpcHandle& handle, Entry entry);

  mutable Mutex mu_;
  std::map<IpcHandle, Entry> entries_ BC_GUARDED_BY(mu_);
};

// A CUDA IPC handle (cudaIpcMemHandle_t, cudaIpcEventHandle_t: 64 bytes) as
// the bytes that travel in WELCOME, and back.
template <typename Raw>
IpcHandle HandleBytes(const Raw& raw) {
  static_assert(sizeof(Raw) == sizeof(IpcHandle));
  IpcHandle out;
  std::memcpy(out.data(), &raw, sizeof(raw));
  return out;
}
template <typename Raw>
Raw RawHandle(const IpcHandle& bytes) {
  static_assert(sizeof(Raw) == sizeof(IpcHandle));
  Raw raw;
  std::memcpy(&raw, bytes.data(), sizeof(raw));
  return raw;
}

template <typename Raw>
IpcHandle IpcExports::Add(const Raw& raw, Entry entry) {
  const IpcHandle bytes = HandleBytes(raw);
  AddBytes(bytes, entry);
  return bytes;
}

// The process's registries of exported allocations and events; never destroyed
// (destructors of static objects may still unregister at exit).
IpcExports& ExportedMemory();
IpcExports& ExportedEvents();

}  // namespace batchcast::cuda::internal
