// Where a named server lives on this machine: its ZeroMQ endpoint, its lock
// file and its shared memory names.
//
// Note [Server instance lock]
// A server named N holds an exclusive flock on <runtime dir>/batchcast/N.lock
// for its whole life. The kernel drops the lock when the process dies, even by
// SIGKILL. So at start, a server that gets the lock knows that any socket file
// or shared memory object named after N is a leftover of a dead server and
// removes it; a server that cannot get the lock reports that N is already
// running (with the pid written in the lock file). Consumers never take it.
#pragma once

#include <string>
#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast {

// $XDG_RUNTIME_DIR/batchcast, else /tmp/batchcast-<uid>; created with mode 0700.
Result<std::string> RuntimeDir();

// A server name is 1-64 characters of [A-Za-z0-9._-].
Status ValidateServerName(std::string_view name);

// "ipc://<runtime dir>/<name>.sock".
Result<std::string> DefaultEndpoint(std::string_view name);

// An endpoint as given ("ipc://...", "tcp://...") or, for a bare name, the
// default endpoint of that name.
Result<std::string> ResolveEndpoint(std::string_view endpoint_or_name);

// The POSIX shared memory name of a server's host ring.
std::string HostRingShmName(std::string_view server_name);

// Holds Note [Server instance lock] while alive.
class InstanceLock {
 public:
  // Takes the lock for `name`, writing this pid into the file. Unavailable
  // (naming the holder's pid) when another live server holds it.
  static Result<InstanceLock> Acquire(std::string_view name);
  InstanceLock(InstanceLock&& other) noexcept;
  InstanceLock& operator=(InstanceLock&& other) noexcept;
  ~InstanceLock();

 private:
  InstanceLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// True when a process with this pid exists (kill(pid, 0) does not say ESRCH).
bool ProcessAlive(int pid);

}  // namespace batchcast
