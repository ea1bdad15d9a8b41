// bc_soak: a long, checked run through a C++ consumer and a Python Loader,
// with the memory of every process sampled.
//
//   bc_soak [--batches 1000000] [--samples 1000] [--size 8] [--warmup 0.2]
//           [--max-growth-mib 16] [--no-python] [--log-dir DIR]
//
// Starts a batchcast-server (--synthetic SAMPLES, window 8, batch 64,
// min_consumers = the number of consumers, so both start at producer epoch 0)
// and two consumers that each read --batches batches with join=next_epoch and
// drop_last off: `bc_soak consume` (C++, batch 48: zero-copy and gathered
// batches; consumer_process.h) and tests/stress/soak_loader.py (a
// batchcast.Loader, batch 64). Both check every byte; every epoch each
// reports must be exact: its digest equal to that of Sampler::EpochOrder(k)
// for its k-th epoch. The resident memory of the server and of both
// consumers is sampled every --sample-ms; after --warmup (the fraction of
// the batches read by the slower consumer) the private memory (RssAnon) of
// none may grow by more than --max-growth-mib. Fails (exit 1) on any
// violation, on growth, on a consumer that stops making progress for
// --stall-ms, on a crash, or on a server that does not stop cleanly.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "consumer_process.h"
#include "core/src/runtime_dir.h"
#include "epoch_checker.h"
#include "report.h"
#include "stress_main.h"

namespace batchcast::stress {
namespace {

using Ms = std::chrono::milliseconds;

struct SoakOptions {
  int64_t batches = 1000000;
  uint64_t samples = 1000;
  int size = 8;
  uint64_t seed = 3;
  int64_t check_seed = -1;  // the seed the epochs are checked against; -1: seed
  double warmup = 0.2;
  double max_growth_mib = 16;
  int64_t sample_ms = 500;
  int64_t stall_ms = 30000;
  bool python = BC_PYTHON[0] != '\0';
  std::string python_bin = BC_PYTHON;
  std::string server_bin = BC_SERVER_BIN;
  std::string log_dir;
};

// One process whose memory is watched.
struct Watched {
  std::string name;
  testing::Process* process = nullptr;
  int64_t baseline_kib = -1;  // RssAnon after the warm-up
  int64_t max_kib = -1;
  int64_t max_rss_kib = -1;
};

// A consumer process and what it reported.
struct SoakConsumer {
  std::string name;
  std::unique_ptr<testing::Process> process;
  std::string log;
  uint64_t batches = 0;
  uint64_t epochs = 0;
  int64_t progress_ms = 0;
  bool done = false;
};

class Soak {
 public:
  explicit Soak(SoakOptions o) : o_(std::move(o)) {}
  int Run();

 private:
  void Fail(const std::string& what) {
    failures_.push_back(what);
    std::fprintf(stderr, "bc_soak: FAILED: %s\n", what.c_str());
  }
  uint64_t ExpectedDigest(uint64_t epoch) {
    auto it = digests_.find(epoch);
    if (it == digests_.end()) {
      it = digests_.emplace(epoch, OrderDigest(sampler_->EpochOrder(epoch))).first;
    }
    return it->second;
  }
  void HandleLine(SoakConsumer& c, const std::string& line);
  void SampleMemory(bool warm);

  SoakOptions o_;
  std::optional<Sampler> sampler_;
  std::map<uint64_t, uint64_t> digests_;
  std::vector<SoakConsumer> consumers_;
  std::vector<Watched> watched_;
  std::vector<std::string> failures_;
};

void Soak::HandleLine(SoakConsumer& c, const std::string& line) {
  const Report r = ParseReport(line);
  if (r.kind == "PROGRESS") {
    c.batches = r.U(0);
    c.progress_ms = NowMs();
  } else if (r.kind == "EPOCH") {
    const uint64_t k = r.U(0);
    if (k != c.epochs)
      Fail(c.name + " reported epoch " + std::to_string(k) + " after " + std::to_string(c.epochs));
    if (r.U(2) != sampler_->epoch_len() || r.U(3) != ExpectedDigest(k)) {
      Fail(c.name + "'s epoch " + std::to_string(k) + " is not Sampler::EpochOrder(" +
           std::to_string(k) + ")");
    }
    c.epochs = k + 1;
  } else if (r.kind == "DONE") {
    c.done = true;
    c.batches = r.U(0);
  } else if (r.kind == "VIOLATION") {
    Fail(c.name + ": " + r.rest);
  } else if (r.kind == "LOST") {
    Fail(c.name + " lost its server: " + (r.words.empty() ? "" : r.words[0]) + " " + r.rest);
  }
}

void Soak::SampleMemory(bool warm) {
  for (Watched& w : watched_) {
    const MemoryKib m = ReadMemory(w.process->pid());
    if (m.anon < 0) continue;
    if (!warm) continue;
    if (w.baseline_kib < 0) w.baseline_kib = m.anon;
    w.max_kib = std::max(w.max_kib, m.anon);
    w.max_rss_kib = std::max(w.max_rss_kib, m.rss);
  }
}

int Soak::Run() {
  const uint64_t check_seed = o_.check_seed >= 0 ? static_cast<uint64_t>(o_.check_seed) : o_.seed;
  SamplerOptions order;  // shuffled, one shard
  order.seed = check_seed;
  Result<Sampler> sampler = Sampler::Make(o_.samples, order);
  if (!sampler.ok()) return 2;
  sampler_.emplace(std::move(*sampler));
  const std::string dir = LogDir(o_.log_dir, "bc_soak");
  const std::string name = "soak-" + std::to_string(getpid());
  Result<std::string> endpoint = ResolveEndpoint(name);
  if (!endpoint.ok()) return 2;
  const int n_consumers = o_.python ? 2 : 1;
  std::printf("bc_soak: %lld batches through %s; %llu samples of %dx%d; logs in %s\n",
              static_cast<long long>(o_.batches),
              o_.python ? "a C++ consumer and a Python Loader" : "a C++ consumer",
              static_cast<unsigned long long>(o_.samples), o_.size, o_.size, dir.c_str());
  std::fflush(stdout);
  const std::string server_log = dir + "/server.log";
  std::vector<std::string> args = SyntheticServerArgs(o_.samples, o_.size, 64, 8, o_.seed);
  args.insert(args.end(),
              {"--min-consumers", std::to_string(n_consumers), "--status-interval", "0"});
  auto server = StartServer(o_.server_bin, name, *endpoint, args, server_log, Ms(20000));
  if (!server.ok()) {
    std::fprintf(stderr, "bc_soak: %s\n", server.status().ToString().c_str());
    return 2;
  }
  const std::string self_bin = SelfExe();
  const std::string batches = std::to_string(o_.batches);
  consumers_.push_back({"the C++ consumer", nullptr, dir + "/cpp.log"});
  consumers_.back().process =
      Spawn({self_bin, "consume", "--endpoint", name, "--samples", std::to_string(o_.samples),
             "--seed", std::to_string(check_seed), "--batch-size", "48", "--join", "next_epoch",
             "--no-drop-last", "--batches", batches, "--connect-timeout-ms", "20000"},
            consumers_.back().log);
  if (o_.python) {
    setenv("PYTHONPATH", BC_PYTHONPATH, 1);
    consumers_.push_back({"the Python Loader", nullptr, dir + "/python.log"});
    consumers_.back().process = Spawn(
        {o_.python_bin, BC_SOAK_LOADER, "--endpoint", name, "--samples", std::to_string(o_.samples),
         "--size", std::to_string(o_.size), "--batch-size", "64", "--batches", batches},
        consumers_.back().log);
  }
  watched_.push_back({"server", server->get()});
  for (SoakConsumer& c : consumers_) {
    c.progress_ms = NowMs();
    watched_.push_back({c.name, c.process.get()});
  }
  const int64_t t0 = NowMs();
  int64_t next_sample = 0;
  int running = static_cast<int>(consumers_.size());
  while (running > 0 && failures_.size() < 20) {
    for (SoakConsumer& c : consumers_) {
      std::vector<std::string> lines;
      c.process->ReadLines(&lines, Ms(0));
      for (const std::string& l : lines) HandleLine(c, l);
    }
    const int64_t now = NowMs();
    uint64_t slowest = UINT64_MAX;
    for (const SoakConsumer& c : consumers_) slowest = std::min(slowest, c.batches);
    if (now >= next_sample) {
      SampleMemory(static_cast<double>(slowest) >= o_.warmup * static_cast<double>(o_.batches));
      next_sample = now + o_.sample_ms;
    }
    running = 0;
    for (SoakConsumer& c : consumers_) {
      if (Reap(*c.process, Ms(0)) == -1) {
        ++running;
        if (now - c.progress_ms > o_.stall_ms) {
          Fail(c.name + " made no progress for " + std::to_string(now - c.progress_ms) + " ms");
          c.progress_ms = now;
        }
      }
    }
    if (Reap(**server, Ms(0)) != -1) {
      Fail("the server exited: " + Tail(server_log, 1500));
      break;
    }
    std::this_thread::sleep_for(Ms(20));
  }
  const double seconds = (NowMs() - t0) / 1000.0;
  for (SoakConsumer& c : consumers_) {
    int rc = Reap(*c.process, Ms(0));
    if (rc == -1) {
      c.process->Kill(SIGKILL);
      Reap(*c.process, Ms(10000));
    }
    std::vector<std::string> lines;  // the rest of its output, to the end
    while (c.process->ReadLines(&lines, Ms(1000))) {
    }
    for (const std::string& l : lines) HandleLine(c, l);
    if (rc > 0) {
      Fail(c.name + " exited with status " + std::to_string(rc) + ": " + Tail(c.log, 1500));
    }
    if (!c.done) Fail(c.name + " did not finish its batches");
    if (std::string r = SanitizerReport(c.log); !r.empty()) Fail(c.name + ": " + r);
  }
  (*server)->Kill(SIGTERM);
  if (const int rc = Reap(**server, Ms(15000)); rc != 0) {
    Fail("the server exited with status " + std::to_string(rc) + " after SIGTERM");
  }
  for (const std::string& f : ServerLeftovers(name, *endpoint)) Fail("the server left " + f);
  if (std::string r = SanitizerReport(server_log); !r.empty()) Fail("server: " + r);

  std::printf("bc_soak: %.1f s\n", seconds);
  for (const SoakConsumer& c : consumers_) {
    std::printf("  %-18s %llu batches (%.0f/s), %llu exact epochs (= Sampler::EpochOrder)\n",
                c.name.c_str(), static_cast<unsigned long long>(c.batches), c.batches / seconds,
                static_cast<unsigned long long>(c.epochs));
  }
  for (const Watched& w : watched_) {
    const double growth = (w.max_kib - w.baseline_kib) / 1024.0;
    std::printf(
        "  memory of %-18s RssAnon %.1f MiB after the warm-up, %.1f at most (+%.1f; bound "
        "%.0f); VmRSS at most %.1f MiB\n",
        w.name.c_str(), w.baseline_kib / 1024.0, w.max_kib / 1024.0, growth, o_.max_growth_mib,
        w.max_rss_kib / 1024.0);
    if (w.baseline_kib < 0) {
      Fail("no memory sample of " + w.name + " after the warm-up");
    } else if (growth > o_.max_growth_mib) {
      Fail("the private memory of " + w.name + " grew by " + std::to_string(growth) + " MiB");
    }
  }
  std::printf("  result: %s\n", failures_.empty() ? "ok" : "FAILED");
  for (const std::string& f : failures_) std::printf("  - %s\n", f.c_str());
  return FinishLogDir(dir, o_.log_dir, failures_.empty());
}

}  // namespace
}  // namespace batchcast::stress

int main(int argc, char** argv) {
  if (int rc = 0; batchcast::stress::RunAsConsumer(argc, argv, rc)) return rc;
  batchcast::stress::SoakOptions o;
  CLI::App app{"bc_soak: a long checked run with memory sampled"};
  app.add_option("--batches", o.batches, "batches each consumer reads")->capture_default_str();
  app.add_option("--samples", o.samples, "synthetic samples (epoch length)")->capture_default_str();
  app.add_option("--size", o.size, "image side")->capture_default_str();
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_option("--check-seed", o.check_seed,
                 "seed the epochs are checked against (default: --seed; another one must fail)");
  app.add_option("--warmup", o.warmup, "fraction of the batches before memory counts")
      ->capture_default_str();
  app.add_option("--max-growth-mib", o.max_growth_mib, "RssAnon growth allowed after the warm-up")
      ->capture_default_str();
  app.add_option("--sample-ms", o.sample_ms)->capture_default_str();
  app.add_option("--stall-ms", o.stall_ms)->capture_default_str();
  app.add_flag("!--no-python", o.python, "only the C++ consumer");
  app.add_option("--python", o.python_bin, "interpreter with torch")->capture_default_str();
  batchcast::stress::AddRunOptions(app, o.server_bin, o.log_dir);
  CLI11_PARSE(app, argc, argv);
  // 10^6 batches take minutes; the watchdog allows an hour per 10^6.
  const std::chrono::seconds limit(300 + o.batches * 3600 / 1000000);
  return batchcast::stress::RunWatched("bc_soak", limit,
                                       [&] { return batchcast::stress::Soak(std::move(o)).Run(); });
}
