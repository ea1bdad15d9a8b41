// What every stress program's main() shares: the options that say where the
// server binary is and where logs go, and the run under an interrupt handler
// and a watchdog (processes.h).
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "consumer_process.h"
#include "processes.h"

namespace batchcast::stress {

// A program whose consumers run as `PROGRAM consume ...`
// (consumer_process.h): true, with `rc` their exit code, when argv is one's.
inline bool RunAsConsumer(int argc, char** argv, int& rc) {
  if (argc < 2 || std::string(argv[1]) != "consume") return false;
  rc = RunConsumerProcess(argc - 1, argv + 1);
  return true;
}

// --seed (0: from the clock, drawn after parsing by SeedFromClock) and
// --transport, one of `transports`.
inline void AddSeedAndTransport(CLI::App& app, uint64_t& seed, const std::string& seed_of,
                                std::string& transport, std::vector<std::string> transports) {
  app.add_option("--seed", seed, "seed of the " + seed_of + " (0: from the clock)")
      ->capture_default_str();
  app.add_option("--transport", transport)
      ->check(CLI::IsMember(std::move(transports)))
      ->capture_default_str();
}
inline void SeedFromClock(uint64_t& seed) {
  if (seed == 0) seed = std::random_device{}();
}

// --server-bin and --log-dir, into `server_bin` and `log_dir`.
inline void AddRunOptions(CLI::App& app, std::string& server_bin, std::string& log_dir) {
  app.add_option("--server-bin", server_bin)->capture_default_str();
  app.add_option("--log-dir", log_dir, "keep the logs here (default: a temporary directory)");
}

// Runs `run` after installing the interrupt handler and a watchdog that ends
// everything (exit 3) when `program` has not finished within `limit`.
template <typename Run>
int RunWatched(const std::string& program, std::chrono::seconds limit, Run&& run) {
  InstallInterruptHandler();
  StartWatchdog(program, limit, "the run did not finish");
  return run();
}

}  // namespace batchcast::stress
