// Test fixture: XDG_RUNTIME_DIR points at a fresh private directory for the
// test (so RuntimeDir(), locks and sockets are the test's own); and a fake
// server process that holds what a real one holds (lock, ring, socket).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/src/host_shm.h"
#include "core/src/runtime_dir.h"

namespace batchcast::testing {

class RuntimeDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* old = std::getenv("XDG_RUNTIME_DIR")) old_ = old;
    char tmpl[] = "/tmp/bctest-xdg-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    xdg_ = tmpl;
    setenv("XDG_RUNTIME_DIR", xdg_.c_str(), 1);
  }
  void TearDown() override {
    if (old_) {
      setenv("XDG_RUNTIME_DIR", old_->c_str(), 1);
    } else {
      unsetenv("XDG_RUNTIME_DIR");
    }
    std::error_code ec;
    std::filesystem::remove_all(xdg_, ec);
  }
  std::string dir() const { return xdg_ + "/batchcast"; }

  std::optional<std::string> old_;
  std::string xdg_;
};

// A listening Unix socket at `path` (closed by the caller, or by death).
inline int Listen(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 4) != 0) {
    ADD_FAILURE() << "cannot listen at " << path << ": " << std::strerror(errno);
  }
  return fd;
}

// Forks a "server" named `name` that takes its lock, makes its `rings` host
// rings of 1 MiB and binds its socket as a real one does, then waits;
// returns its pid once ready.
inline pid_t StartFakeServer(const std::string& name, const std::string& dir, uint32_t rings = 1) {
  int ready[2];
  EXPECT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    Result<InstanceLock> lock = InstanceLock::Acquire(name);
    bool made = true;
    std::vector<std::unique_ptr<HostSharedMemory>> held;
    for (uint32_t k = 0; k < rings; ++k) {
      auto ring = HostSharedMemory::Create(HostRingShmName(name, k), 1 << 20);
      made = made && ring.ok();
      if (ring.ok()) held.push_back(std::move(*ring));
    }
    const int sock = Listen(dir + "/" + name + ".sock");
    const char ok = lock.ok() && made && sock >= 0 ? 1 : 0;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    for (;;) pause();
  }
  close(ready[1]);
  char ok = 0;
  EXPECT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  EXPECT_EQ(ok, 1);
  return pid;
}

inline void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace batchcast::testing
