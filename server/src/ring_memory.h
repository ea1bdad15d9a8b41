// RingMemory: the server's shared allocations of a RingLayout, one per memory
// kind in use, and their descriptions for WELCOME.
//
// Host memory is a HostSharedMemory named after the server (removed on
// destruction; a leftover of a killed server is replaced at creation, see
// Note [Server instance lock]).
//
// Thread-safety: immutable after Create().
#pragma once

#include <memory>
#include <vector>

#include "batchcast/core/host_shm.h"
#include "batchcast/core/protocol.h"
#include "batchcast/core/ring_layout.h"

namespace batchcast {

class RingMemory {
 public:
  static Result<std::unique_ptr<RingMemory>> Create(const RingLayout& layout,
                                                    const std::string& server_name);
  // Base address of the allocation of `kind`. REQUIRES: the layout uses it.
  uint8_t* base(MemoryKind kind) const;
  const std::vector<proto::Allocation>& allocations() const { return allocations_; }

 private:
  RingMemory() = default;
  std::unique_ptr<HostSharedMemory> host_;
  std::vector<proto::Allocation> allocations_;
};

}  // namespace batchcast
