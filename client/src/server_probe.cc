#include "server_probe.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/src/endpoint.h"
#include "core/src/runtime_dir.h"

namespace batchcast::internal {

Status CheckLocalServer(const std::string& endpoint, std::string_view endpoint_or_name) {
  const std::string path = IpcPath(endpoint);
  if (path.empty()) return Status::Ok();
  const bool by_name = endpoint_or_name.find("://") == std::string_view::npos;
  const std::string given(endpoint_or_name);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      if (by_name) {
        return NotFoundError("no batchcast server named '" + given + "' (no socket at " + path +
                             "); start one with `batchcast-server serve ... --name " + given + "`");
      }
      return NotFoundError("no batchcast server at " + endpoint +
                           " (no such socket); start one with `batchcast-server serve ... "
                           "--endpoint " +
                           endpoint + "`");
    }
    return UnavailableError("cannot reach " + endpoint + ": " + std::strerror(err) +
                            (err == EACCES ? " (is it another user's runtime directory?)" : ""));
  }
  if (by_name) {
    const ServerProbe probe = ProbeServer(given);
    if (probe.state == ServerProbe::State::kNotRunning) {
      return UnavailableError("server '" + given + "' is not running (its process" +
                              (probe.pid > 0 ? " " + std::to_string(probe.pid) : std::string()) +
                              " exited without cleaning up; `batchcast-server serve ... --name " +
                              given + "` starts it again)");
    }
    return Status::Ok();
  }
  if (ProbeSocket(path) == ServerProbe::State::kNotRunning) {
    return UnavailableError("no server is listening at " + endpoint +
                            " (the socket file was left by a server that exited)");
  }
  return Status::Ok();
}

}  // namespace batchcast::internal
