// MpsProbe: whether NVIDIA MPS (Multi-Process Service) serves this process'
// CUDA contexts, for the server's start log and stats (`mps`, docs/stats.md).
//
// There is no CUDA attribute that says so; the probe uses a documented
// heuristic (CUDA MPS docs: a client connects to the control daemon through
// the named pipe `control` in CUDA_MPS_PIPE_DIRECTORY, default
// /tmp/nvidia-mps):
//   on       the pipe directory this process uses has a `control` FIFO (or
//            Unix socket) and an
//            nvidia-cuda-mps-control or -server process is visible in /proc;
//   off      no `control` FIFO there (MPS processes running elsewhere, with
//            another pipe directory, do not serve this process: the reason
//            says so);
//   unknown  a `control` FIFO but no MPS process visible (a stale pipe, or a
//            daemon in another PID namespace, e.g. on the host of this
//            container), or /proc cannot be read.
// The roots are injectable so that tests use fake trees.
//
// Thread-safety: a pure function of the file system and its arguments.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace batchcast {

struct MpsProbeRoots {
  std::string proc = "/proc";
  // CUDA_MPS_PIPE_DIRECTORY of this process; unset: the default below.
  std::optional<std::string> pipe_dir_env;
  std::string default_pipe_dir = "/tmp/nvidia-mps";

  // The roots of this process (its CUDA_MPS_PIPE_DIRECTORY).
  static MpsProbeRoots FromEnvironment();
};

struct MpsState {
  enum class Kind { kOff, kOn, kUnknown };
  Kind kind = Kind::kUnknown;
  std::string reason;  // one line for people: what was found

  // "on", "off" or "unknown".
  std::string_view name() const;
};

MpsState ProbeMps(const MpsProbeRoots& roots = MpsProbeRoots::FromEnvironment());

}  // namespace batchcast
