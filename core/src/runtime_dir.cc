#include "core/src/runtime_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/src/host_shm.h"

namespace batchcast {

Result<std::string> RuntimeDir() {
  std::string base;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0' &&
                                                         access(xdg, W_OK) == 0) {
    base = std::string(xdg) + "/batchcast";
  } else {
    base = "/tmp/batchcast-" + std::to_string(getuid());
  }
  if (mkdir(base.c_str(), 0700) != 0 && errno != EEXIST) {
    return UnavailableError("cannot create runtime directory " + base + ": " +
                            std::strerror(errno));
  }
  struct stat st {};
  if (stat(base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return UnavailableError("runtime directory " + base + " is not a directory");
  }
  if (st.st_uid != getuid()) {
    return UnavailableError("runtime directory " + base + " belongs to another user");
  }
  if ((st.st_mode & 077) != 0) chmod(base.c_str(), 0700);
  return base;
}

Status ValidateServerName(std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return InvalidArgumentError("server name must be 1-64 characters, got '" + std::string(name) +
                                "'");
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return InvalidArgumentError("server name '" + std::string(name) +
                                  "' may only hold letters, digits, '.', '_' and '-'");
    }
  }
  return Status::Ok();
}

Result<std::string> DefaultEndpoint(std::string_view name) {
  BATCHCAST_RETURN_IF_ERROR(ValidateServerName(name));
  BATCHCAST_ASSIGN_OR_RETURN(std::string dir, RuntimeDir());
  return "ipc://" + dir + "/" + std::string(name) + ".sock";
}

Result<std::string> ResolveEndpoint(std::string_view endpoint_or_name) {
  if (endpoint_or_name.find("://") != std::string_view::npos) {
    if (endpoint_or_name.starts_with("ipc://") || endpoint_or_name.starts_with("tcp://") ||
        endpoint_or_name.starts_with("inproc://")) {
      return std::string(endpoint_or_name);
    }
    return InvalidArgumentError("unsupported endpoint '" + std::string(endpoint_or_name) +
                                "' (expected ipc://PATH, tcp://HOST:PORT or a server name)");
  }
  return DefaultEndpoint(endpoint_or_name);
}

std::string HostRingShmName(std::string_view server_name) {
  return "batchcast-" + std::to_string(getuid()) + "-" + std::string(server_name) + "-ring";
}

Result<InstanceLock> InstanceLock::Acquire(std::string_view name) {
  BATCHCAST_RETURN_IF_ERROR(ValidateServerName(name));
  BATCHCAST_ASSIGN_OR_RETURN(std::string dir, RuntimeDir());
  std::string path = dir + "/" + std::string(name) + ".lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return UnavailableError("cannot open lock file " + path + ": " + std::strerror(errno));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return UnavailableError("a batchcast server named '" + std::string(name) +
                            "' is already running (pid " + pid + "); stop it or pick another --name");
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The pid in the file is only informative; the flock is what matters.
  }
  return InstanceLock(fd, std::move(path));
}

InstanceLock::InstanceLock(InstanceLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

InstanceLock& InstanceLock::operator=(InstanceLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

// The lock file is never deleted: unlinking it would let two servers lock two
// different inodes under one path (one that opened the old file before the
// unlink, one that created the new file after it).
InstanceLock::~InstanceLock() {
  if (fd_ >= 0) close(fd_);
}

bool ProcessAlive(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) == 0) return true;
  return errno != ESRCH;
}

}  // namespace batchcast
