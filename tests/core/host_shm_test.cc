// Tests of batchcast::HostSharedMemory and of the runtime directory helpers
// (server names, endpoints, the server instance lock).
#include "core/src/host_shm.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/src/runtime_dir.h"
#include "runtime_dir_fixture.h"

namespace batchcast {
namespace {

using testing::RuntimeDirTest;

// A name no other test (or concurrent test run) uses.
std::string UniqueShmName(const std::string& tag) {
  static int counter = 0;
  return "bctest-" + std::to_string(getpid()) + "-" + tag + "-" + std::to_string(counter++);
}

// Removes the name at the end of a test even when an assertion fails.
struct ShmNameGuard {
  std::string name;
  ~ShmNameGuard() { HostSharedMemory::Remove(name); }
};

bool ShmExists(const std::string& name) { return HostSharedMemory::Open(name).ok(); }

// Waits for a child and returns its wait status.
int Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// ---- HostSharedMemory ----

TEST(HostShmTest, ReaderSeesTheWritersBytes) {
  const std::string name = UniqueShmName("rw");
  ShmNameGuard guard{name};
  constexpr size_t kBytes = 3 * 4096 + 123;
  Result<std::unique_ptr<HostSharedMemory>> writer = HostSharedMemory::Create(name, kBytes);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  HostSharedMemory& w = **writer;
  EXPECT_EQ(w.name(), name);
  ASSERT_EQ(w.size(), kBytes);
  ASSERT_NE(w.data(), nullptr);
  for (size_t i = 0; i < kBytes; ++i) w.data()[i] = static_cast<uint8_t>(i * 13 + 1);

  Result<std::unique_ptr<HostSharedMemory>> reader = HostSharedMemory::Open(name);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const HostSharedMemory& r = **reader;
  EXPECT_EQ(r.name(), name);
  ASSERT_EQ(r.size(), kBytes);
  EXPECT_NE(r.data(), w.data());  // a second mapping, not the same pointer
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(r.data()[i], static_cast<uint8_t>(i * 13 + 1)) << "byte " << i;
  }
  // Later writes are visible through the existing mapping (it is shared).
  w.data()[0] = 0xAB;
  w.data()[kBytes - 1] = 0xCD;
  EXPECT_EQ(r.data()[0], 0xAB);
  EXPECT_EQ(r.data()[kBytes - 1], 0xCD);
}

TEST(HostShmTest, NewMemoryIsZeroed) {
  const std::string name = UniqueShmName("zero");
  ShmNameGuard guard{name};
  auto shm = HostSharedMemory::Create(name, 10000);
  ASSERT_TRUE(shm.ok()) << shm.status().ToString();
  for (size_t i = 0; i < 10000; ++i) ASSERT_EQ((*shm)->data()[i], 0) << i;
}

TEST(HostShmTest, ReaderIsAcrossProcesses) {
  const std::string name = UniqueShmName("xproc");
  ShmNameGuard guard{name};
  auto writer = HostSharedMemory::Create(name, 4096);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  std::memcpy((*writer)->data(), "hello from the server", 22);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto reader = HostSharedMemory::Open(name);
    const bool good = reader.ok() && (*reader)->size() == 4096 &&
                      std::memcmp((*reader)->data(), "hello from the server", 22) == 0;
    _exit(good ? 0 : 1);
  }
  const int status = Reap(pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

using HostShmDeathTest = ::testing::Test;

TEST_F(HostShmDeathTest, ReaderMappingIsReadOnly) {
  const std::string name = UniqueShmName("ro");
  ShmNameGuard guard{name};
  auto writer = HostSharedMemory::Create(name, 4096);
  ASSERT_TRUE(writer.ok());
  auto reader = HostSharedMemory::Open(name);
  ASSERT_TRUE(reader.ok());
  volatile uint8_t* p = (*reader)->data();
  EXPECT_DEATH(p[0] = 1, "");
  EXPECT_EQ((*writer)->data()[0], 0);
}

TEST(HostShmTest, OpenMissingIsNotFound) {
  const std::string name = UniqueShmName("missing");
  auto r = HostSharedMemory::Open(name);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().ToString();
}

TEST(HostShmTest, ZeroBytesIsInvalid) {
  const std::string name = UniqueShmName("empty");
  ShmNameGuard guard{name};
  auto r = HostSharedMemory::Create(name, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ShmExists(name));
}

TEST(HostShmTest, CreatorRemovesTheNameReaderKeepsItsMapping) {
  const std::string name = UniqueShmName("owner");
  ShmNameGuard guard{name};
  auto writer = HostSharedMemory::Create(name, 8192);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (size_t i = 0; i < 8192; ++i) (*writer)->data()[i] = static_cast<uint8_t>(i % 251);
  auto reader = HostSharedMemory::Open(name);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();

  writer->reset();  // the creator goes away
  // The name is gone...
  auto again = HostSharedMemory::Open(name);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kNotFound);
  // ...but the existing mapping still reads the bytes.
  const HostSharedMemory& r = **reader;
  ASSERT_EQ(r.size(), 8192u);
  for (size_t i = 0; i < 8192; ++i) ASSERT_EQ(r.data()[i], i % 251) << i;
  // A reader's destruction does not remove a name (here: a new object of that name).
  auto second = HostSharedMemory::Create(name, 4096);
  ASSERT_TRUE(second.ok());
  reader->reset();
  EXPECT_TRUE(ShmExists(name));
}

TEST(HostShmTest, CreateReplacesAStaleObject) {
  const std::string name = UniqueShmName("stale");
  ShmNameGuard guard{name};
  // A child creates the object and exits without running destructors, like a
  // server killed with SIGKILL.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto shm = HostSharedMemory::Create(name, 12345);
    if (!shm.ok()) _exit(1);
    std::memset((*shm)->data(), 0x5A, 12345);
    _exit(0);
  }
  const int status = Reap(pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  {
    auto stale = HostSharedMemory::Open(name);
    ASSERT_TRUE(stale.ok()) << "the child's object should have been left behind";
    EXPECT_EQ((*stale)->size(), 12345u);
    EXPECT_EQ((*stale)->data()[100], 0x5A);
  }
  // A new creator of that name gets a fresh object of its own size.
  auto fresh = HostSharedMemory::Create(name, 5000);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ((*fresh)->size(), 5000u);
  for (size_t i = 0; i < 5000; ++i) ASSERT_EQ((*fresh)->data()[i], 0) << i;
  auto reader = HostSharedMemory::Open(name);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->size(), 5000u);
}

TEST(HostShmTest, RemoveIsIdempotent) {
  const std::string name = UniqueShmName("remove");
  HostSharedMemory::Remove(name);  // missing: no-op
  auto shm = HostSharedMemory::Create(name, 100);
  ASSERT_TRUE(shm.ok());
  HostSharedMemory::Remove(name);
  EXPECT_FALSE(ShmExists(name));
  HostSharedMemory::Remove(name);
  (*shm)->data()[99] = 1;  // the mapping outlives the name
  EXPECT_EQ((*shm)->data()[99], 1);
}

// ---- runtime directory, names, endpoints ----

TEST_F(RuntimeDirTest, RuntimeDirIsPrivate) {
  Result<std::string> d = RuntimeDir();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, dir());
  struct stat st {};
  ASSERT_EQ(stat(d->c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Idempotent, and it tightens a directory that is too open.
  ASSERT_EQ(chmod(d->c_str(), 0755), 0);
  Result<std::string> again = RuntimeDir();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *d);
  ASSERT_EQ(stat(d->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(RuntimeDirTest, FallsBackToTmpWithoutXdg) {
  const std::string fallback = "/tmp/batchcast-" + std::to_string(getuid());
  setenv("XDG_RUNTIME_DIR", "", 1);
  Result<std::string> d = RuntimeDir();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, fallback);
  setenv("XDG_RUNTIME_DIR", (xdg_ + "/does-not-exist").c_str(), 1);
  d = RuntimeDir();
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, fallback);
}

TEST_F(RuntimeDirTest, ValidateServerName) {
  for (const std::string& good :
       {std::string("a"), std::string("demo"), std::string("Demo-2.run_3"), std::string("0"),
        std::string(64, 'x'), std::string("a.b-c_D9")}) {
    EXPECT_TRUE(ValidateServerName(good).ok()) << "'" << good << "'";
  }
  for (const std::string& bad :
       {std::string(""), std::string(65, 'x'), std::string("a/b"), std::string("../etc"),
        std::string("a b"), std::string("name!"), std::string("caf\xc3\xa9"),
        std::string("a\0b", 3), std::string("tab\t"), std::string("x:y"), std::string("a*")}) {
    const Status s = ValidateServerName(bad);
    EXPECT_FALSE(s.ok()) << "'" << bad << "'";
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  }
}

TEST_F(RuntimeDirTest, DefaultEndpoint) {
  Result<std::string> e = DefaultEndpoint("demo");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(*e, "ipc://" + dir() + "/demo.sock");
  EXPECT_FALSE(DefaultEndpoint("bad/name").ok());
  EXPECT_FALSE(DefaultEndpoint("").ok());
}

TEST_F(RuntimeDirTest, ResolveEndpoint) {
  Result<std::string> named = ResolveEndpoint("demo");
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(*named, "ipc://" + dir() + "/demo.sock");

  for (const std::string& given :
       {std::string("ipc:///tmp/x/y.sock"), std::string("tcp://127.0.0.1:5555"),
        std::string("tcp://*:7000")}) {
    Result<std::string> r = ResolveEndpoint(given);
    ASSERT_TRUE(r.ok()) << given << ": " << r.status().ToString();
    EXPECT_EQ(*r, given);
  }
  for (const std::string& bad :
       {std::string("http://x"), std::string("udp://127.0.0.1:1"), std::string("IPC://x"),
        std::string("://x"), std::string("bad name"), std::string(""), std::string("a/b"),
        std::string("inproc://test"), std::string("tcp://127.0.0.1:99999")}) {
    Result<std::string> r = ResolveEndpoint(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' resolved to " << (r.ok() ? *r : "");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  Result<std::string> http = ResolveEndpoint("http://x");
  EXPECT_NE(http.status().message().find("http://x"), std::string::npos)
      << http.status().ToString();
}

TEST_F(RuntimeDirTest, HostRingShmName) {
  const std::string a = HostRingShmName("demo");
  EXPECT_NE(a.find("demo"), std::string::npos);
  EXPECT_NE(a.find(std::to_string(getuid())), std::string::npos);
  EXPECT_EQ(a.find('/'), std::string::npos);
  EXPECT_NE(a, HostRingShmName("demo2"));
  EXPECT_EQ(a, HostRingShmName("demo"));
  // Usable as a shared memory name.
  ShmNameGuard guard{HostRingShmName("bctest-" + std::to_string(getpid()))};
  auto shm = HostSharedMemory::Create(guard.name, 64);
  EXPECT_TRUE(shm.ok()) << shm.status().ToString();
}

TEST(ProcessAliveTest, Basics) {
  EXPECT_TRUE(ProcessAlive(getpid()));
  EXPECT_TRUE(ProcessAlive(getppid()));
  EXPECT_FALSE(ProcessAlive(0));
  EXPECT_FALSE(ProcessAlive(-1));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(0);
  // Ended but not reaped (a zombie): gone, though it still takes signals.
  for (int i = 0; i < 1000 && ProcessAlive(pid); ++i) usleep(1000);
  EXPECT_FALSE(ProcessAlive(pid));
  EXPECT_EQ(kill(pid, 0), 0) << "still a zombie";
  Reap(pid);
  EXPECT_FALSE(ProcessAlive(pid));
}

// ---- InstanceLock ----

TEST_F(RuntimeDirTest, SecondAcquireFailsNamingThePid) {
  Result<InstanceLock> first = InstanceLock::Acquire("locked");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(dir() + "/locked.lock"));
  Result<InstanceLock> second = InstanceLock::Acquire("locked");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("pid " + std::to_string(getpid())), std::string::npos)
      << second.status().ToString();
  EXPECT_NE(second.status().message().find("locked"), std::string::npos);
  // Other names are independent.
  Result<InstanceLock> other = InstanceLock::Acquire("other");
  EXPECT_TRUE(other.ok()) << other.status().ToString();
  // Releasing the first lets the name be taken again.
  first = Result<InstanceLock>(UnavailableError("dropped"));
  Result<InstanceLock> third = InstanceLock::Acquire("locked");
  EXPECT_TRUE(third.ok()) << third.status().ToString();
}

TEST_F(RuntimeDirTest, AcquireRejectsBadNames) {
  for (const char* bad : {"", "a/b", "../x", "sp ace"}) {
    Result<InstanceLock> r = InstanceLock::Acquire(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST_F(RuntimeDirTest, MovedLockStaysHeld) {
  Result<InstanceLock> first = InstanceLock::Acquire("moved");
  ASSERT_TRUE(first.ok());
  {
    InstanceLock moved = std::move(*first);
    first = Result<InstanceLock>(UnavailableError("moved out"));  // destroys the moved-from lock
    EXPECT_FALSE(InstanceLock::Acquire("moved").ok()) << "moved-from destruction released it";
    Result<InstanceLock> other = InstanceLock::Acquire("moved-2");
    ASSERT_TRUE(other.ok());
    moved = std::move(*other);  // releases "moved", holds "moved-2"
    EXPECT_TRUE(InstanceLock::Acquire("moved").ok());
    EXPECT_FALSE(InstanceLock::Acquire("moved-2").ok());
  }
  EXPECT_TRUE(InstanceLock::Acquire("moved-2").ok());
}

TEST_F(RuntimeDirTest, LockOfAKilledHolderIsTaken) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    Result<InstanceLock> lock = InstanceLock::Acquire("killed");
    const char ok = lock.ok() ? 1 : 0;
    if (write(ready[1], &ok, 1) != 1 || !ok) _exit(1);
    for (;;) pause();  // hold until SIGKILL
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, 1) << "the child could not take the lock";

  Result<InstanceLock> while_alive = InstanceLock::Acquire("killed");
  ASSERT_FALSE(while_alive.ok());
  EXPECT_EQ(while_alive.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(while_alive.status().message().find("pid " + std::to_string(pid)), std::string::npos)
      << while_alive.status().ToString();

  ASSERT_EQ(kill(pid, SIGKILL), 0);
  const int status = Reap(pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  // The kernel dropped the flock; the stale lock file is still there.
  EXPECT_TRUE(std::filesystem::exists(dir() + "/killed.lock"));
  Result<InstanceLock> after = InstanceLock::Acquire("killed");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  // The file now names this process.
  Result<InstanceLock> again = InstanceLock::Acquire("killed");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("pid " + std::to_string(getpid())), std::string::npos)
      << again.status().ToString();
}

// Note [Server instance lock] promises that at most one live process holds the
// lock of a name (else a second server would remove the live socket and ring of
// the first as "leftovers"). Several processes take and release the lock in a
// tight loop and count, in shared memory, how many hold it at once.
TEST_F(RuntimeDirTest, AtMostOneHolderUnderContention) {
  struct Shared {
    std::atomic<int> holders;
    std::atomic<int> max_holders;
    std::atomic<long> acquisitions;
  };
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* shared = new (mem) Shared{};
  constexpr int kProcesses = 3;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
  std::vector<pid_t> children;
  for (int c = 0; c < kProcesses; ++c) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      while (std::chrono::steady_clock::now() < deadline && shared->max_holders.load() <= 1) {
        Result<InstanceLock> lock = InstanceLock::Acquire("contended");
        if (!lock.ok()) continue;
        const int now = shared->holders.fetch_add(1) + 1;
        int seen = shared->max_holders.load();
        while (now > seen && !shared->max_holders.compare_exchange_weak(seen, now)) {
        }
        shared->acquisitions.fetch_add(1);
        for (int spin = 0; spin < 2000; ++spin) asm volatile("" ::: "memory");
        shared->holders.fetch_sub(1);
      }  // the lock is released here, at the end of each iteration
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    const int status = Reap(pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  // Enough contention to mean something (unless a violation stopped the run early).
  if (shared->max_holders.load() <= 1) {
    EXPECT_GT(shared->acquisitions.load(), 100);
  }
  EXPECT_EQ(shared->max_holders.load(), 1)
      << "two processes held the instance lock of one name at the same time ("
      << shared->acquisitions.load() << " acquisitions)";
  munmap(mem, sizeof(Shared));
}

}  // namespace
}  // namespace batchcast
