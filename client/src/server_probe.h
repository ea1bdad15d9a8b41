// CheckLocalServer: whether a server on this machine can be reached at an
// ipc:// endpoint, decided at once instead of by a connect timeout.
//
// A socket file that exists says little: a server killed with SIGKILL leaves
// it behind. For a server name, its instance lock says whether the server is
// alive (Note [Server instance lock], core/src/runtime_dir.h); for an
// ipc://PATH given as such, whether anything listens on the socket. Paths
// that cannot be examined (another user's runtime directory: permission
// denied; a symbolic-link loop; a name too long) are errors, never a throw.
//
// Thread-safety: pure (reads the file system).
#pragma once

#include <string>
#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast::internal {

// `endpoint` is ResolveEndpoint(`endpoint_or_name`). OK for tcp:// (nothing
// to check here) and for a server that may be running; NotFound when no
// socket exists (saying how to start a server there); Unavailable when the
// path cannot be examined or the server behind it is not running.
Status CheckLocalServer(const std::string& endpoint, std::string_view endpoint_or_name);

}  // namespace batchcast::internal
