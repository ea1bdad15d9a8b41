// ReclaimDeadServers: what servers of this user that died without cleaning
// up (kill -9, a crash, a power cut of the container) left behind.
//
// A server named N owns the lock file <runtime dir>/N.lock, the socket
// <runtime dir>/N.sock (unless it was given another --endpoint), its rings'
// attach sockets N+R.sock, the saved scan of its dataset N.listing and the
// host ring /dev/shm/batchcast-<uid>-N.ring. A lock file that no process holds
// belongs to a dead server (Note [Server instance lock]): ReclaimDeadServers
// takes that lock, removes the ring and the socket of that name and the lock
// file, and releases it. So a live server's files are never touched (its lock
// is held), nor another user's (the runtime directory is this user's, and
// only files this user owns are removed). A socket a dead server bound
// elsewhere (--endpoint ipc://PATH) is left; the next server binding that
// path replaces it, and consumers are told at once that nobody listens there.
// A host ring of this user whose lock file is gone with its runtime
// directory (a login session ended, a test's directory was removed) is
// reclaimed too, when no process holds its flock (a live server always does:
// core/src/host_shm.h) and it is older than a minute (a server creating one
// takes the flock at once; the minute covers that instant). Rings named as
// servers before this flock named them (LegacyHostRingShmName) are only
// reclaimed through their lock files: they may be a live older server's.
// Orphans are reported with `orphan` set and no pid.
//
// Thread-safety: may run in several processes at once (each name is
// reclaimed by whoever gets its lock).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace batchcast {

struct Reclaimed {
  std::string name;         // the dead server's name
  int pid = 0;              // its pid as the lock file says (0: unknown)
  uint64_t ring_bytes = 0;  // size of the host ring removed (0: none)
  bool socket = false;      // its socket file was removed
  bool orphan = false;      // a ring without a lock file (see above)
};

// Reclaims every dead server's files in this user's runtime directory, and
// the orphan rings older than `orphan_age` (see above). Never fails: what
// cannot be examined is left alone.
std::vector<Reclaimed> ReclaimDeadServers(
    std::chrono::seconds orphan_age = std::chrono::seconds(60));

}  // namespace batchcast
