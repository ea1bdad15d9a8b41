// What the instance lock tells about dead servers (Note [Server instance
// lock], core/src/runtime_dir.h): ProbeServer, ProbeSocket, lock files that
// go away with their holder, ReclaimDeadServers (core/src/reclaim.h); and a
// host ring that does not fit in /dev/shm (core/src/host_shm.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "core/src/host_shm.h"
#include "core/src/reclaim.h"
#include "core/src/runtime_dir.h"
#include "runtime_dir_fixture.h"

namespace batchcast {
namespace {

using testing::KillAndReap;
using testing::RuntimeDirTest;
using testing::StartFakeServer;

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

bool RingExists(const std::string& name, uint32_t ring = 0) {
  return Exists("/dev/shm/" + HostRingShmName(name, ring));
}

TEST_F(RuntimeDirTest, ProbeSaysWhoIsAlive) {
  ASSERT_TRUE(RuntimeDir().ok());
  EXPECT_EQ(ProbeServer("nobody").state, ServerProbe::State::kUnknown);  // no lock file
  const pid_t pid = StartFakeServer("probed", dir());
  ServerProbe alive = ProbeServer("probed");
  EXPECT_EQ(alive.state, ServerProbe::State::kRunning);
  EXPECT_EQ(alive.pid, pid);
  EXPECT_EQ(ProbeSocket(dir() + "/probed.sock"), ServerProbe::State::kRunning);
  // The probe did not disturb the holder: the name is still taken.
  EXPECT_FALSE(InstanceLock::Acquire("probed").ok());
  KillAndReap(pid);
  ServerProbe dead = ProbeServer("probed");
  EXPECT_EQ(dead.state, ServerProbe::State::kNotRunning);
  EXPECT_EQ(dead.pid, pid);
  EXPECT_EQ(ProbeSocket(dir() + "/probed.sock"), ServerProbe::State::kNotRunning);
  EXPECT_EQ(ProbeSocket(dir() + "/missing.sock"), ServerProbe::State::kNotRunning);
  HostSharedMemory::Remove(HostRingShmName("probed"));
}

TEST_F(RuntimeDirTest, TheLockFileGoesWithItsHolder) {
  {
    Result<InstanceLock> lock = InstanceLock::Acquire("tidy");
    ASSERT_TRUE(lock.ok());
    EXPECT_TRUE(Exists(dir() + "/tidy.lock"));
  }
  EXPECT_FALSE(Exists(dir() + "/tidy.lock"));
  EXPECT_TRUE(InstanceLock::Acquire("tidy").ok());
}

TEST_F(RuntimeDirTest, ReclaimRemovesWhatDeadServersLeftAndNothingElse) {
  ASSERT_TRUE(RuntimeDir().ok());
  const pid_t dead = StartFakeServer("dead", dir(), /*rings=*/2);
  const pid_t live = StartFakeServer("live", dir());
  KillAndReap(dead);
  ASSERT_TRUE(RingExists("dead"));
  ASSERT_TRUE(Exists(dir() + "/dead.sock"));
  // Note [Shared listing]: a saved scan, whole or cut short by the death.
  for (const char* listing : {"/dead.listing", "/dead.listing.tmp", "/live.listing"}) {
    std::ofstream(dir() + listing) << "x";
  }

  std::vector<Reclaimed> r = ReclaimDeadServers();
  std::erase_if(r, [](const Reclaimed& x) { return x.orphan; });  // other runs' leftovers
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].name, "dead");
  EXPECT_EQ(r[0].pid, dead);
  EXPECT_EQ(r[0].ring_bytes, 2u << 20) << "both host rings";
  EXPECT_TRUE(r[0].socket);
  EXPECT_FALSE(RingExists("dead"));
  EXPECT_FALSE(RingExists("dead", 1));
  EXPECT_FALSE(Exists(dir() + "/dead.sock"));
  EXPECT_FALSE(Exists(dir() + "/dead.lock"));
  EXPECT_FALSE(Exists(dir() + "/dead.listing"));
  EXPECT_FALSE(Exists(dir() + "/dead.listing.tmp"));
  // The live server's files are untouched; its name stays taken.
  EXPECT_TRUE(Exists(dir() + "/live.listing"));
  EXPECT_TRUE(RingExists("live"));
  EXPECT_EQ(ProbeSocket(dir() + "/live.sock"), ServerProbe::State::kRunning);
  EXPECT_EQ(ProbeServer("live").state, ServerProbe::State::kRunning);
  r = ReclaimDeadServers();
  std::erase_if(r, [](const Reclaimed& x) { return x.orphan; });
  EXPECT_TRUE(r.empty());
  KillAndReap(live);
  HostSharedMemory::Remove(HostRingShmName("live"));
}

// A dead server whose runtime directory is gone too (a login session's
// /run/user/UID, a test's temporary folder) left only its ring: the next
// server reclaims it, since no process holds its flock; a live server's
// ring (held) and a young one are left alone.
TEST_F(RuntimeDirTest, ReclaimRemovesARingWhoseLockFileIsGone) {
  ASSERT_TRUE(RuntimeDir().ok());
  const std::string dead = "orphan-" + std::to_string(getpid());
  const std::string live = "held-" + std::to_string(getpid());
  const pid_t owner = StartFakeServer(dead, dir(), /*rings=*/2);
  KillAndReap(owner);
  ASSERT_EQ(unlink((dir() + "/" + dead + ".lock").c_str()), 0);  // the directory's loss
  auto held = HostSharedMemory::Create(HostRingShmName(live), 4096);
  ASSERT_TRUE(held.ok());
  auto young = ReclaimDeadServers();  // a minute by default: too young
  EXPECT_TRUE(RingExists(dead));
  std::vector<Reclaimed> r = ReclaimDeadServers(std::chrono::seconds(0));
  std::erase_if(r, [&](const Reclaimed& x) { return x.name != dead && x.name != live; });
  ASSERT_EQ(r.size(), 2u) << "both of its host rings, each under its server's name";
  for (const Reclaimed& x : r) {
    EXPECT_EQ(x.name, dead);
    EXPECT_TRUE(x.orphan);
    EXPECT_EQ(x.ring_bytes, 1u << 20);
  }
  EXPECT_FALSE(RingExists(dead));
  EXPECT_FALSE(RingExists(dead, 1));
  EXPECT_TRUE(RingExists(live)) << "a live server's ring is held";
}

// As root, a ring of another user under this user's ring name (planted) is
// left alone.
TEST_F(RuntimeDirTest, ReclaimLeavesAnotherUsersRing) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to plant a file of another user";
  ASSERT_TRUE(RuntimeDir().ok());
  const std::string shm = HostRingShmName("foreign");
  const int fd = open(("/dev/shm/" + shm).c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchown(fd, 65534, 65534), 0);
  close(fd);
  const int lock =
      open((dir() + "/foreign.lock").c_str(), O_CREAT | O_RDWR, 0600);  // nobody holds it
  close(lock);
  ReclaimDeadServers();
  EXPECT_TRUE(RingExists("foreign"));
  unlink(("/dev/shm/" + shm).c_str());
}

// A name squatted by something the server cannot remove is refused with
// what is there, not "File exists (is /dev/shm large enough?)".
TEST(HostShmSquat, ANameThatCannotBeReplacedIsRefusedWithWhatIsThere) {
  const std::string name = "bctest-" + std::to_string(getpid()) + "-squat";
  const std::string path = "/dev/shm/" + name;
  ASSERT_EQ(mkdir(path.c_str(), 0700), 0);  // unlinkable by shm_unlink, even for root
  auto r = HostSharedMemory::Create(name, 4096);
  rmdir(path.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find(path + " already exists and cannot be replaced"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().message().find("large enough"), std::string::npos) << r.status().message();
}

TEST(HostShmSpace, ARingLargerThanDevShmIsRefusedWithTheSizes) {
  const std::string name = "bctest-" + std::to_string(getpid()) + "-huge";
  const size_t huge = size_t{1} << 46;  // 64 TiB
  auto r = HostSharedMemory::Create(name, huge);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("/dev/shm has"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("65536.0 GiB"), std::string::npos) << r.status().message();
  EXPECT_FALSE(HostSharedMemory::Open(name).ok()) << "nothing is left behind";
}

}  // namespace
}  // namespace batchcast
