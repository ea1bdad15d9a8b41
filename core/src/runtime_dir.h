// Where a named server lives on this machine: its ZeroMQ endpoint, its lock
// file and its shared memory names.
//
// Note [Server instance lock]
// A server named N holds an exclusive flock on <runtime dir>/batchcast/N.lock
// for its whole life. The kernel drops the lock when the process dies, even by
// SIGKILL. So at start, a server that gets the lock knows that any socket file
// or shared memory object named after N is a leftover of a dead server and
// removes it; a server that cannot get the lock reports that N is already
// running (with the pid written in the lock file).
// The lock also says who is dead: a lock file that nobody holds belongs to a
// server that exited without cleaning up (kill -9). A consumer probes it
// (ProbeServer: a shared flock taken and dropped at once) to fail at once
// instead of waiting for an answer; a starting server reclaims the ring and
// socket of every such name (ReclaimDeadServers, core/src/reclaim.h), holding
// the lock while it does. Since probes and reclaims hold a lock for a moment,
// Acquire retries for a while when the pid in the file is not alive.
// Lock files are removed by their holder (at exit, or by the reclaimer) while
// the lock is held; Acquire checks, once it holds the lock, that the file it
// locked is still the one at the path (else it starts again), so two servers
// can never hold locks on two files of one name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "batchcast/core/status.h"
#include "core/src/endpoint.h"

namespace batchcast {

// $XDG_RUNTIME_DIR/batchcast, else /tmp/batchcast-<uid>; created with mode 0700.
Result<std::string> RuntimeDir();

// A server name is 1-64 characters of [A-Za-z0-9._-].
Status ValidateServerName(std::string_view name);

// "ipc://<runtime dir>/<name>.sock".
Result<std::string> DefaultEndpoint(std::string_view name);

// An endpoint as given ("ipc://...", "tcp://...", checked by ValidateEndpoint
// for `use`, core/src/endpoint.h) or, for a bare name, the default endpoint of
// that name.
Result<std::string> ResolveEndpoint(std::string_view endpoint_or_name,
                                    EndpointUse use = EndpointUse::kConnect);

// "ipc://<runtime dir>/<name>+<ring>.sock": ring `ring`'s attach socket
// (Note [Attached producers], server/src/attach_point.h; '+' is in no server
// name).
Result<std::string> AttachEndpoint(std::string_view name, uint32_t ring);
// "<runtime dir>/<name>.lock" (Note [Server instance lock]).
Result<std::string> LockPath(std::string_view name);
// "<runtime dir>/<name>.listing": the server's saved scan of its dataset,
// for its attached producers (Note [Shared listing],
// sources/src/dataset_listing.cc).
Result<std::string> ListingPath(std::string_view name);

// The POSIX shared memory name of a server's host ring:
// "batchcast-<uid>-<name>.ring"; of its host ring k > 0 (several host rings
// stand in for GPUs in tests, ServerOptions::host_rings)
// "batchcast-<uid>-<name>+<k>.ring" ('+' is in no server name), so that
// reclaiming finds every ring. (Servers before the ring's flock, see
// core/src/host_shm.h, named it "...-<name>-ring": LegacyHostRingShmName.)
inline constexpr uint32_t kMaxHostRings = 64;
std::string HostRingShmName(std::string_view server_name, uint32_t ring = 0);
std::string LegacyHostRingShmName(std::string_view server_name);

// Holds Note [Server instance lock] while alive.
class InstanceLock {
 public:
  // Takes the lock for `name`, writing this pid into the file. Unavailable
  // (naming the holder's pid) when another live server holds it.
  static Result<InstanceLock> Acquire(std::string_view name);
  InstanceLock(InstanceLock&& other) noexcept;
  InstanceLock& operator=(InstanceLock&& other) noexcept;
  // Removes the lock file (while still holding the lock) and releases it.
  ~InstanceLock();

 private:
  InstanceLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void Release();
  int fd_ = -1;
  std::string path_;
};

// What a server's lock file says about it (Note [Server instance lock]).
struct ServerProbe {
  enum class State {
    kRunning,     // a live process holds the lock
    kNotRunning,  // the lock file exists and nobody holds it: the server exited
    kUnknown,     // no lock file, or it cannot be read
  };
  State state = State::kUnknown;
  int pid = 0;  // the pid written in the lock file (the last holder), 0 if none
};
// Probes the lock of server `name` without keeping it (a shared flock taken
// and dropped at once).
ServerProbe ProbeServer(std::string_view name);

// Whether something listens on the Unix socket at `path` (a non-blocking
// connect): kRunning when it is accepted, kNotRunning when it is refused
// (a socket file nobody listens on: its server exited), kUnknown otherwise.
ServerProbe::State ProbeSocket(const std::string& path);

// The pid written in the lock file at `lock_path` (its last holder), 0 if none.
int LockFilePid(const std::string& lock_path);

// True when a process with this pid exists (kill(pid, 0) does not say ESRCH)
// and has not ended: a process that ended but was not reaped yet (a zombie,
// whose parent has not waited for it) still takes signals, and /proc says it
// is gone.
bool ProcessAlive(int pid);

}  // namespace batchcast
