// IpcExports (see ipc_exports.h).
#include "ipc_exports.h"

namespace batchcast::cuda::internal {

void IpcExports::AddBytes(const IpcHandle& handle, Entry entry) {
  MutexLock lock(&mu_);
  entries_[handle] = entry;
}

std::optional<IpcExports::Entry> IpcExports::Find(const IpcHandle& handle) const {
  MutexLock lock(&mu_);
  if (auto it = entries_.find(handle); it != entries_.end()) return it->second;
  return std::nullopt;
}

void IpcExports::Remove(const void* pointer) {
  MutexLock lock(&mu_);
  std::erase_if(entries_, [&](const auto& kv) { return kv.second.pointer == pointer; });
}

IpcExports& ExportedMemory() {
  static auto* exports = new IpcExports();
  return *exports;
}

IpcExports& ExportedEvents() {
  static auto* exports = new IpcExports();
  return *exports;
}

}  // namespace batchcast::cuda::internal
