// The chaos run of bc_chaos (chaos_main.cc says what it does and checks).
#pragma once

#include <cstdint>
#include <string>

namespace batchcast::stress {

struct ChaosOptions {
  double seconds = 20;
  uint64_t seed = 1;
  // The sampler seed the consumers check against; another one than the
  // server's makes every batch a violation (a self-test of the checks).
  int64_t check_seed = -1;  // -1: the server's
  int consumers = 4;
  std::string transport = "ipc";
  uint64_t samples = 600;
  int64_t mean_interval_ms = 300;
  int64_t stall_ms = 15000;
  int64_t detect_ms = 5000;
  int64_t recover_ms = 30000;
  std::string server_bin = BC_SERVER_BIN;
  std::string self_bin;  // this program, for `consume`
  std::string log_dir;
  bool verbose = false;
};

// Runs the chaos and prints its summary: 0 when nothing was violated, 1
// otherwise, 2 when it could not start.
int RunChaos(const ChaosOptions& options);

}  // namespace batchcast::stress
