// HostSharedMemory: a named POSIX shared memory region (Boost.Interprocess).
//
// The server Create()s the ring's host allocation under a name derived from the
// server name; consumers Open() it read-only by the name sent in WELCOME.
// The creator removes the name when the object is destroyed; a server killed
// with SIGKILL leaves the name behind, and the next server this user starts
// (of any name) removes it (ReclaimDeadServers, core/src/reclaim.h; Note
// [Server instance lock] in runtime_dir.h). The creator also holds a shared
// flock on the object while it lives, so that a ring whose server is gone can
// be told from a live one even when the dead server's runtime directory is
// gone too (a login session's /run/user/UID, a test's temporary directory).
//
// Thread-safety: the mapping is immutable after construction; the bytes inside
// are synchronized by the protocol (Note [Leases]).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "batchcast/core/status.h"

namespace batchcast {

class HostSharedMemory {
 public:
  // Creates (replacing any stale object of that name) and maps read-write.
  // Every page is reserved at once, so that running out of /dev/shm is this
  // ResourceExhausted error (naming the sizes) and never a SIGBUS later.
  static Result<std::unique_ptr<HostSharedMemory>> Create(const std::string& name, size_t bytes);
  // Maps an existing object read-only (consumers), or read-write (an
  // attached producer, which writes slots it was granted). NotFound if it
  // does not exist.
  static Result<std::unique_ptr<HostSharedMemory>> Open(const std::string& name,
                                                        bool writable = false);
  // Removes the name if it exists (the memory lives on while mapped).
  static void Remove(const std::string& name);

  ~HostSharedMemory();
  HostSharedMemory(const HostSharedMemory&) = delete;
  HostSharedMemory& operator=(const HostSharedMemory&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  struct Impl;
  HostSharedMemory(std::string name, bool owner, std::unique_ptr<Impl> impl);
  std::string name_;
  bool owner_ = false;
  std::unique_ptr<Impl> impl_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace batchcast
