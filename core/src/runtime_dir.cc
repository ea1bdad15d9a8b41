#include "core/src/runtime_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/src/host_shm.h"

namespace batchcast {

Result<std::string> RuntimeDir() {
  std::string base;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR");
      xdg != nullptr && *xdg != '\0' && access(xdg, W_OK) == 0) {
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

Result<std::string> AttachEndpoint(std::string_view name, uint32_t ring) {
  BATCHCAST_RETURN_IF_ERROR(ValidateServerName(name));
  BATCHCAST_ASSIGN_OR_RETURN(std::string dir, RuntimeDir());
  return "ipc://" + dir + "/" + std::string(name) + "+" + std::to_string(ring) + ".sock";
}

Result<std::string> ResolveEndpoint(std::string_view endpoint_or_name, EndpointUse use) {
  if (endpoint_or_name.find("://") != std::string_view::npos) {
    BATCHCAST_RETURN_IF_ERROR(ValidateEndpoint(endpoint_or_name, use));
    return std::string(endpoint_or_name);
  }
  return DefaultEndpoint(endpoint_or_name);
}

Result<std::string> LockPath(std::string_view name) {
  BATCHCAST_RETURN_IF_ERROR(ValidateServerName(name));
  BATCHCAST_ASSIGN_OR_RETURN(std::string dir, RuntimeDir());
  return dir + "/" + std::string(name) + ".lock";
}

Result<std::string> ListingPath(std::string_view name) {
  BATCHCAST_RETURN_IF_ERROR(ValidateServerName(name));
  BATCHCAST_ASSIGN_OR_RETURN(std::string dir, RuntimeDir());
  return dir + "/" + std::string(name) + ".listing";
}

std::string LegacyHostRingShmName(std::string_view server_name) {
  return "batchcast-" + std::to_string(getuid()) + "-" + std::string(server_name) + "-ring";
}

std::string HostRingShmName(std::string_view server_name, uint32_t ring) {
  return "batchcast-" + std::to_string(getuid()) + "-" + std::string(server_name) +
         (ring > 0 ? "+" + std::to_string(ring) : "") + ".ring";
}

namespace {

// How long Acquire keeps trying while the lock is held by a process that is
// not the server named in the file (a probe or a reclaim holds it briefly).
constexpr auto kAcquirePatience = std::chrono::seconds(2);

int PidIn(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  return n > 0 ? std::atoi(buf) : 0;
}

// True when `fd` is the file at `path` now (not unlinked or replaced).
bool StillAtPath(int fd, const std::string& path) {
  struct stat held {
  }, at_path{};
  return fstat(fd, &held) == 0 && lstat(path.c_str(), &at_path) == 0 &&
         held.st_dev == at_path.st_dev && held.st_ino == at_path.st_ino;
}

}  // namespace

Result<InstanceLock> InstanceLock::Acquire(std::string_view name) {
  BATCHCAST_ASSIGN_OR_RETURN(std::string path, LockPath(name));
  const auto deadline = std::chrono::steady_clock::now() + kAcquirePatience;
  while (true) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      return UnavailableError("cannot open lock file " + path + ": " + std::strerror(errno));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (!StillAtPath(fd, path)) {  // removed by its last holder meanwhile: take the new one
        close(fd);
        continue;
      }
      const std::string pid = std::to_string(getpid()) + "\n";
      if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
        // The pid in the file is only informative; the flock is what matters.
      }
      return InstanceLock(fd, std::move(path));
    }
    const int holder = PidIn(fd);
    close(fd);
    // A live server holds it; or a probe or a reclaim of a dead server's
    // name does, for a moment: then wait.
    if ((holder > 0 && ProcessAlive(holder)) || std::chrono::steady_clock::now() >= deadline) {
      return UnavailableError("a batchcast server named '" + std::string(name) +
                              "' is already running (pid " +
                              (holder > 0 ? std::to_string(holder) : std::string("unknown")) +
                              "); stop it or pick another --name");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

InstanceLock::InstanceLock(InstanceLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

InstanceLock& InstanceLock::operator=(InstanceLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

InstanceLock::~InstanceLock() { Release(); }

// Unlinking while the lock is held is safe: a process that opened the old
// file meanwhile finds, once it gets the lock, that it is no longer at the
// path and starts again (Acquire).
void InstanceLock::Release() {
  if (fd_ < 0) return;
  if (StillAtPath(fd_, path_)) unlink(path_.c_str());
  close(fd_);
  fd_ = -1;
}

int LockFilePid(const std::string& lock_path) {
  const int fd = open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return 0;
  const int pid = PidIn(fd);
  close(fd);
  return pid;
}

ServerProbe ProbeServer(std::string_view name) {
  ServerProbe probe;
  Result<std::string> path = LockPath(name);
  if (!path.ok()) return probe;
  const int fd = open(path->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return probe;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    probe.pid = PidIn(fd);
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
      probe.state = ServerProbe::State::kNotRunning;
      flock(fd, LOCK_UN);
    } else if (errno == EWOULDBLOCK) {
      probe.state = ServerProbe::State::kRunning;
    }
  }
  close(fd);
  return probe;
}

ServerProbe::State ProbeSocket(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return ServerProbe::State::kUnknown;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ServerProbe::State::kUnknown;
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int err = rc == 0 ? 0 : errno;
  close(fd);
  if (rc == 0 || err == EINPROGRESS || err == EAGAIN) return ServerProbe::State::kRunning;
  if (err == ECONNREFUSED || err == ENOENT) return ServerProbe::State::kNotRunning;
  return ServerProbe::State::kUnknown;
}

bool ProcessAlive(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc here: the signal said alive
  const size_t paren = line.rfind(')');        // the state follows "(command) "
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace batchcast
