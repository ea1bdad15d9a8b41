// ProbeMps (server/src/mps_probe.h) on fake /proc trees and pipe directories.
#include "server/src/mps_probe.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace batchcast {
namespace {

namespace fs = std::filesystem;

class MpsProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("bc-mps-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "proc");
    fs::create_directories(root_ / "pipes");
    roots_.proc = (root_ / "proc").string();
    roots_.default_pipe_dir = (root_ / "pipes").string();
    Process(1, "systemd");
    Process(42, "python3");
  }
  void TearDown() override { fs::remove_all(root_); }

  void Process(int pid, const std::string& comm) {
    fs::create_directories(root_ / "proc" / std::to_string(pid));
    std::ofstream(root_ / "proc" / std::to_string(pid) / "comm") << comm << "\n";
  }
  void ControlPipe(const fs::path& dir) {
    fs::create_directories(dir);
    ASSERT_EQ(mkfifo((dir / "control").c_str(), 0600), 0);
  }

  fs::path root_;
  MpsProbeRoots roots_;
};

TEST_F(MpsProbeTest, NoDaemonIsOff) {
  const MpsState s = ProbeMps(roots_);
  EXPECT_EQ(s.kind, MpsState::Kind::kOff);
  EXPECT_EQ(s.name(), "off");
  EXPECT_NE(s.reason.find("no MPS control daemon"), std::string::npos) << s.reason;
}

TEST_F(MpsProbeTest, ControlPipeAndProcessIsOn) {
  ControlPipe(root_ / "pipes");
  Process(777, "nvidia-cuda-mps");  // comm is cut at 15 characters
  const MpsState s = ProbeMps(roots_);
  EXPECT_EQ(s.kind, MpsState::Kind::kOn) << s.reason;
  EXPECT_NE(s.reason.find("777"), std::string::npos) << s.reason;
}

TEST_F(MpsProbeTest, ThePipeDirectoryOfTheEnvironmentIsTheOneThatCounts) {
  Process(777, "nvidia-cuda-mps");
  ControlPipe(root_ / "pipes");  // the default directory has a daemon...
  roots_.pipe_dir_env = (root_ / "private").string();
  fs::create_directories(root_ / "private");
  MpsState s = ProbeMps(roots_);  // ...but this process uses another one
  EXPECT_EQ(s.kind, MpsState::Kind::kOff) << s.reason;
  EXPECT_NE(s.reason.find("another pipe directory"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("CUDA_MPS_PIPE_DIRECTORY="), std::string::npos) << s.reason;
  ControlPipe(root_ / "private");
  s = ProbeMps(roots_);
  EXPECT_EQ(s.kind, MpsState::Kind::kOn) << s.reason;
}

// Some driver versions make `control` a Unix socket rather than a FIFO.
TEST_F(MpsProbeTest, ControlSocketCountsAsThePipe) {
  const fs::path dir = root_ / "pipes";
  const std::string path = (dir / "control").string();
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path)) << path;
  std::copy(path.begin(), path.end(), addr.sun_path);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << path;
  Process(777, "nvidia-cuda-mps");
  const MpsState s = ProbeMps(roots_);
  close(fd);
  EXPECT_EQ(s.kind, MpsState::Kind::kOn) << s.reason;
}

TEST_F(MpsProbeTest, PipeWithoutProcessIsUnknown) {
  ControlPipe(root_ / "pipes");
  const MpsState s = ProbeMps(roots_);
  EXPECT_EQ(s.kind, MpsState::Kind::kUnknown);
  EXPECT_NE(s.reason.find("stale"), std::string::npos) << s.reason;
}

TEST_F(MpsProbeTest, AFileNamedControlIsNotAPipe) {
  Process(777, "nvidia-cuda-mps");
  std::ofstream(root_ / "pipes" / "control") << "x";
  EXPECT_EQ(ProbeMps(roots_).kind, MpsState::Kind::kOff);
}

TEST_F(MpsProbeTest, UnreadableProcIsUnknown) {
  roots_.proc = (root_ / "no-such-proc").string();
  const MpsState s = ProbeMps(roots_);
  EXPECT_EQ(s.kind, MpsState::Kind::kUnknown);
  EXPECT_EQ(s.name(), "unknown");
}

}  // namespace
}  // namespace batchcast
