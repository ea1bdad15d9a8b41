// The fuzz run of bc_fuzz_peer (fuzz_main.cc says what it does and checks).
#pragma once

#include <cstdint>
#include <string>

namespace batchcast::stress {

struct FuzzOptions {
  double seconds = 10;  // per transport
  uint64_t seed = 1;
  std::string transport = "both";  // ipc, tcp or both
  int workers = 3;
  int connections = 200;
  int64_t huge_mib = 0;  // an occasional frame of this size (0: only just above 1 MiB)
  int64_t max_stall_ms = 3000;
  std::string server_bin = BC_SERVER_BIN;
  std::string log_dir;
  bool verbose = false;
};

// Runs the fuzzer on each transport and prints a summary per transport: 0
// when the server and the good consumer came through, 1 otherwise, 2 when it
// could not start.
int RunFuzz(const FuzzOptions& options);

}  // namespace batchcast::stress
