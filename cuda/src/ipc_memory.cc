// OpenIpcMemory and IpcMapping of batchcast/cuda/runtime.h (CUDA builds): the
// process-wide cache of mapped IPC allocations.
#include <cuda_runtime_api.h>

#include <map>
#include <memory>

#include "batchcast/cuda/check.h"
#include "batchcast/cuda/runtime.h"
#include "core/src/mutex.h"
#include "ipc_exports.h"

namespace batchcast::cuda {

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
// the allocation (and each exported event) in IpcExports (ipc_exports.h) so
// that OpenIpcMemory (Event::OpenIpc) returns a non-owning view of it.
// Such a view must not outlive the server (the server outlives its in-process
// consumers' batches in every supported use: Server::Stop waits for nothing,
// so an in-process consumer must drop its batches before stopping the server).
// The mapping is opened with the exporter's device (the ring's) current, and
// used only with that device current (Note [Consumers on another GPU],
// client/src/cuda_ring_view.cc), whatever device the consumer computes on;
// with a ring per GPU, another GPU's ring is opened in the context of the
// consumer's GPU where it has peer access (Note [Peer rings]).
// A server that exits (even by SIGKILL) while consumers still map the ring
// does not invalidate their mappings: the driver frees the memory when the
// last process that maps it closes it or exits.

namespace {

// Mappings opened by this process, by handle bytes; an entry whose mapping
// has been closed stays until the handle is opened again.
struct MappingCache {
  Mutex mu;  // held while opening, so that a handle is opened once
  std::map<IpcHandle, std::weak_ptr<IpcMapping>> opened BC_GUARDED_BY(mu);
};

MappingCache& Cache() {
  static auto* cache = new MappingCache();  // never destroyed: used from destructors at exit
  return *cache;
}

}  // namespace

void internal::IpcMappingTraits::Destroy(const Handle& h) noexcept {
  if (!h.owned) return;
  DeviceGuard g(h.device);
  (void)cudaIpcCloseMemHandle(h.data);
}

Result<std::shared_ptr<IpcMapping>> OpenIpcMemory(const IpcHandle& handle, int device) {
  MappingCache& cache = Cache();
  MutexLock lock(&cache.mu);
  if (auto it = cache.opened.find(handle); it != cache.opened.end()) {
    if (auto m = it->second.lock()) return m;
  }
  IpcMapping::Traits::Handle h;
  if (auto local = internal::ExportedMemory().Find(handle)) {
    h = {.data = static_cast<uint8_t*>(local->pointer), .device = local->device, .owned = false};
  } else {
    DeviceGuard g(device);
    BATCHCAST_RETURN_IF_ERROR(g.status());
    void* p = nullptr;
    BATCHCAST_RETURN_IF_ERROR(BATCHCAST_CUDA_CHECK(cudaIpcOpenMemHandle(
        &p, internal::RawHandle<cudaIpcMemHandle_t>(handle), cudaIpcMemLazyEnablePeerAccess)));
    h = {.data = static_cast<uint8_t*>(p), .device = device, .owned = true};
  }
  std::shared_ptr<IpcMapping> m(new IpcMapping(h));
  cache.opened[handle] = m;
  return m;
}

}  // namespace batchcast::cuda
