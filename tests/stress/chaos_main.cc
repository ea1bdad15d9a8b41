// bc_chaos: kill -9 of consumers and of the server, restarts with the same
// name, consumers reconnecting; every survivor's epochs checked.
//
//   bc_chaos [--seconds 20] [--seed 1] [--consumers 4] [--transport ipc|tcp]
//            [--samples 600] [--stall-ms 15000] [--detect-ms 5000] [--log-dir DIR]
//
// Runs a batchcast-server (--synthetic SAMPLES, endless) and up to
// --consumers consumer processes (`bc_chaos consume`, consumer_process.h:
// random batch size, join policy, drop_last and prefetch; they reconnect
// when the server goes). Every --mean-interval-ms on average it does one
// seeded random thing: kill -9 one consumer or several, kill -9 the server,
// stop it with SIGTERM, both at once, start another consumer; killed ones are
// replaced and the server restarted after a random delay. Every consumer
// checks every batch it gets (ReadChecked: each byte against the synthetic
// formula; each sample's position against Sampler::EpochOrder; every
// completed epoch exact) and reports; this program fails (exit 1) when any
// reports a violation, when a consumer made no progress for --stall-ms while
// the server was up, when a consumer noticed its server's death later than
// --detect-ms, when a process crashed or exited by itself, when a stopped
// server left its socket or ring behind, or when after the chaos a consumer
// does not complete an exact epoch within --recover-ms. A watchdog kills
// everything (exit 3) if the program itself hangs. The seed fixes the
// sequence of actions, not the timing of the processes.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <random>

#include "chaos_run.h"
#include "stress_main.h"

int main(int argc, char** argv) {
  if (int rc = 0; batchcast::stress::RunAsConsumer(argc, argv, rc)) return rc;
  batchcast::stress::ChaosOptions o;
  CLI::App app{"bc_chaos: kill -9 consumers and servers at random; check every survivor"};
  app.add_option("--seconds", o.seconds, "duration of the chaos")->capture_default_str();
  batchcast::stress::AddSeedAndTransport(app, o.seed, "actions", o.transport, {"ipc", "tcp"});
  app.add_option("--consumers", o.consumers, "consumer processes at most")->capture_default_str();
  app.add_option("--samples", o.samples, "synthetic samples (epoch length)")->capture_default_str();
  app.add_option("--mean-interval-ms", o.mean_interval_ms)->capture_default_str();
  app.add_option("--stall-ms", o.stall_ms, "no progress while the server is up")
      ->capture_default_str();
  app.add_option("--detect-ms", o.detect_ms, "bound on noticing a dead server")
      ->capture_default_str();
  app.add_option("--recover-ms", o.recover_ms, "bound on an exact epoch after the chaos")
      ->capture_default_str();
  app.add_option("--check-seed", o.check_seed,
                 "seed the consumers check against (default: the server's; another one must "
                 "fail: a self-test of the checks)");
  batchcast::stress::AddRunOptions(app, o.server_bin, o.log_dir);
  app.add_flag("--verbose", o.verbose, "print every action");
  CLI11_PARSE(app, argc, argv);
  batchcast::stress::SeedFromClock(o.seed);
  o.self_bin = batchcast::stress::SelfExe();
  return batchcast::stress::RunWatched("bc_chaos", std::chrono::seconds(int64_t(o.seconds) + 180),
                                       [&] { return batchcast::stress::RunChaos(o); });
}
