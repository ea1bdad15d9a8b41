// RaiseOpenFileLimit: a server holds a descriptor per connection and reads
// its dataset's files on many threads at once, so under the common soft
// limit (ulimit -n 1024) a burst of connections could leave no descriptor
// for the files (EMFILE). Every Server::Start raises the soft
// RLIMIT_NOFILE to the hard limit first (once per process; never lowers
// it), and logs the change. What peers without a key can hold is bounded
// separately (Note [Handshake limits], curve_server.h).
//
// Thread-safety: safe to call from any thread; the change is made once.
#pragma once

#include <cstddef>

namespace batchcast {

void RaiseOpenFileLimit();

// The soft open-file limit now (RLIMIT_NOFILE; 1024 when unknown).
size_t OpenFileLimit();

}  // namespace batchcast
