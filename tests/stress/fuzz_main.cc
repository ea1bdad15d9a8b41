// bc_fuzz_peer: hostile peers over the server's real socket while a good
// consumer reads and checks every batch.
//
//   bc_fuzz_peer [--seconds 10] [--seed 1] [--transport ipc|tcp|both]
//                [--workers 3] [--connections 200] [--huge-mib 0]
//                [--max-stall-ms 3000] [--log-dir DIR]
//
// For each transport (ipc://, tcp://127.0.0.1) it starts a batchcast-server
// (--synthetic 4096, lag policy skip with lag_timeout 0.3 s, max_leases 4,
// heartbeat_timeout 1 s, a status line every 0.2 s so that the stats are
// rendered all the time), connects a good consumer in this process
// (ReadChecked: every byte against the synthetic formula, every position
// against the sampler, every 37th batch held for 250 ms and checked again),
// and runs --workers threads of seeded attacks (fuzz_attacks.h: random,
// truncated, mutated and oversized frames, multi-frame messages, floods,
// sessions with absurd HELLOs and forged RELEASE/BYE lease ids, connection
// churn, raw bytes into the stream socket, chosen routing ids). It fails
// (exit 1) when the server dies or stops answering STATS, when the good
// consumer gets an error, a wrong byte or a wrong position, or nothing for
// --max-stall-ms, when it gets nothing after the attacks, when the server
// does not exit 0 on SIGTERM or leaves its socket or ring behind, or when its
// log holds a sanitizer report. A watchdog kills everything (exit 3) if the
// program hangs.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <random>

#include "fuzz_run.h"
#include "stress_main.h"

int main(int argc, char** argv) {
  batchcast::stress::FuzzOptions o;
  CLI::App app{"bc_fuzz_peer: hostile peers against a server while a good consumer checks"};
  app.add_option("--seconds", o.seconds, "attack time per transport")->capture_default_str();
  batchcast::stress::AddSeedAndTransport(app, o.seed, "attacks", o.transport,
                                         {"ipc", "tcp", "both"});
  app.add_option("--workers", o.workers, "attacking threads")->capture_default_str();
  app.add_option("--connections", o.connections, "connections at once (churn)")
      ->capture_default_str();
  app.add_option("--huge-mib", o.huge_mib, "size of an occasional oversized frame")
      ->capture_default_str();
  app.add_option("--max-stall-ms", o.max_stall_ms, "longest the good consumer may wait")
      ->capture_default_str();
  batchcast::stress::AddRunOptions(app, o.server_bin, o.log_dir);
  CLI11_PARSE(app, argc, argv);
  batchcast::stress::SeedFromClock(o.seed);
  // The attacks hold hundreds of connections at once (several descriptors
  // each): this process's open-file limit up to its hard limit.
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  return batchcast::stress::RunWatched("bc_fuzz_peer",
                                       std::chrono::seconds(2 * int64_t(o.seconds) + 180),
                                       [&] { return batchcast::stress::RunFuzz(o); });
}
