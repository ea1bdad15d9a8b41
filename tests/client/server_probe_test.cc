// CheckLocalServer (client/src/server_probe.h): a consumer of a server on
// this machine learns at once whether it is there and alive, by the lock for
// a name and by the socket for an ipc://PATH, and gets a Status (never an
// exception) for a path it cannot examine.
#include "client/src/server_probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "../core/runtime_dir_fixture.h"

namespace batchcast {
namespace {

using testing::KillAndReap;
using testing::RuntimeDirTest;
using testing::StartFakeServer;

Status Check(const std::string& endpoint_or_name) {
  Result<std::string> endpoint = ResolveEndpoint(endpoint_or_name);
  EXPECT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  return internal::CheckLocalServer(*endpoint, endpoint_or_name);
}

TEST_F(RuntimeDirTest, NoSocketIsNotFoundWithHowToStartOne) {
  const Status by_name = Check("absent");
  EXPECT_EQ(by_name.code(), StatusCode::kNotFound);
  EXPECT_NE(by_name.message().find("--name absent"), std::string::npos) << by_name.message();
  const std::string path = "ipc://" + xdg_ + "/elsewhere.sock";
  const Status by_path = Check(path);
  EXPECT_EQ(by_path.code(), StatusCode::kNotFound);
  EXPECT_NE(by_path.message().find("--endpoint " + path), std::string::npos) << by_path.message();
  EXPECT_EQ(by_path.message().find("--name"), std::string::npos) << by_path.message();
  EXPECT_TRUE(Check("tcp://127.0.0.1:5555").ok());  // nothing to check here
}

TEST_F(RuntimeDirTest, ALiveServerPassesAndADeadOneIsNamed) {
  ASSERT_TRUE(RuntimeDir().ok());
  const pid_t pid = StartFakeServer("alive", dir());
  EXPECT_TRUE(Check("alive").ok());
  EXPECT_TRUE(Check("ipc://" + dir() + "/alive.sock").ok());
  KillAndReap(pid);
  const Status by_name = Check("alive");
  EXPECT_EQ(by_name.code(), StatusCode::kUnavailable);
  EXPECT_NE(by_name.message().find("server 'alive' is not running (its process " +
                                   std::to_string(pid) + " exited"),
            std::string::npos)
      << by_name.message();
  const Status by_path = Check("ipc://" + dir() + "/alive.sock");
  EXPECT_EQ(by_path.code(), StatusCode::kUnavailable);
  EXPECT_NE(by_path.message().find("no server is listening"), std::string::npos)
      << by_path.message();
  HostSharedMemory::Remove(HostRingShmName("alive"));
}

TEST_F(RuntimeDirTest, APathThatCannotBeExaminedIsUnavailable) {
  ASSERT_EQ(symlink("loop", (xdg_ + "/loop").c_str()), 0);
  const Status s = Check("ipc://" + xdg_ + "/loop/x.sock");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("cannot reach"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace batchcast
