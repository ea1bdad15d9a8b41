#include "fuzz_run.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "batchcast/client/consumer.h"
#include "checked_reader.h"
#include "core/src/runtime_dir.h"
#include "fuzz_attacks.h"
#include "processes.h"

namespace batchcast::stress {
namespace {

using Ms = std::chrono::milliseconds;

constexpr uint64_t kSamples = 4096;
constexpr uint64_t kSeed = 11;

// How often each attack is picked (Attack order).
constexpr int kWeights[] = {20, 10, 10, 5, 25, 5, 10, 10, 3, 3, 3};
static_assert(std::size(kWeights) == static_cast<size_t>(Attack::kCount));

Attack PickAttack(FrameFuzzer& fz) {
  int total = 0;
  for (int w : kWeights) total += w;
  int r = static_cast<int>(fz.U(0, static_cast<uint64_t>(total - 1)));
  for (size_t i = 0; i < std::size(kWeights); ++i) {
    if (r < kWeights[i]) return static_cast<Attack>(i);
    r -= kWeights[i];
  }
  return Attack::kFrames;
}

class FuzzTransport {
 public:
  FuzzTransport(const FuzzOptions& o, std::string transport, std::string dir)
      : o_(o), transport_(std::move(transport)), dir_(std::move(dir)) {}
  // 0: came through; 1: failed; 2: could not start.
  int Run();

 private:
  void Fail(const std::string& what) {
    std::lock_guard lock(fail_mu_);
    failures_.push_back(what);
    std::fprintf(stderr, "bc_fuzz_peer (%s): FAILED: %s\n", transport_.c_str(), what.c_str());
  }
  bool failed() const {
    std::lock_guard lock(fail_mu_);
    return !failures_.empty();
  }
  void GoodConsumer();
  void Monitor(int64_t until_ms, bool attacking);
  void Summary(double seconds) const;

  const FuzzOptions& o_;
  std::string transport_, dir_, name_, endpoint_, log_;
  std::unique_ptr<testing::Process> server_;
  std::atomic<bool> stop_attacks_{false}, stop_consumer_{false};
  Reporter reporter_{nullptr, [this](const std::string& v) { Fail("the good consumer: " + v); }};
  std::atomic<bool> consumer_failed_{false};
  bool server_died_ = false;
  FuzzTally tally_;
  int64_t max_gap_ms_ = 0;
  int stats_failures_ = 0;
  MemoryKib mem_start_, mem_max_, mem_end_;
  mutable std::mutex fail_mu_;
  std::vector<std::string> failures_;  // guarded by fail_mu_ (the good consumer adds too)
};

void FuzzTransport::GoodConsumer() {
  ConsumerOptions options;
  options.endpoint = endpoint_;
  options.batch_size = 24;  // zero-copy and gathered batches
  options.connect_timeout = Ms(10000);
  options.name = "good-consumer";
  Result<std::unique_ptr<Consumer>> c = Consumer::Connect(options);
  if (!c.ok()) {
    Fail("the good consumer could not connect: " + c.status().ToString());
    consumer_failed_ = true;
    return;
  }
  CheckedReadOptions read;
  read.dataset_size = kSamples;
  read.sampler.seed = kSeed;
  read.hold_every = 37;
  read.hold_for = Ms(250);
  read.stop = &stop_consumer_;
  Status s = ReadChecked(**c, options, read, reporter_);
  if (!s.ok()) {
    Fail("the good consumer's Next() failed: " + s.ToString());
    consumer_failed_ = true;
  }
}

void FuzzTransport::Monitor(int64_t until_ms, bool attacking) {
  int64_t next_stats = 0;
  while (NowMs() < until_ms && !failed()) {
    std::this_thread::sleep_for(Ms(50));
    if (const int rc = Reap(*server_, Ms(0)); rc != -1) {
      server_died_ = true;
      Fail("the server exited with status " + std::to_string(rc) + ": " + Tail(log_, 1500));
      return;
    }
    const int64_t now = NowMs();
    if (reporter_.batches() > 0) {
      const int64_t gap = now - reporter_.last_batch_ms();
      max_gap_ms_ = std::max(max_gap_ms_, gap);
      if (gap > o_.max_stall_ms && !consumer_failed_) {
        Fail("the good consumer got nothing for " + std::to_string(gap) + " ms" +
             (attacking ? " under attack" : " after the attacks"));
        return;
      }
    }
    if (now >= next_stats) {
      next_stats = now + 1000;
      const MemoryKib m = ReadMemory(server_->pid());
      mem_max_.rss = std::max(mem_max_.rss, m.rss);
      mem_max_.anon = std::max(mem_max_.anon, m.anon);
      if (QueryStats(endpoint_, Ms(2000)).ok()) {
        stats_failures_ = 0;
      } else if (++stats_failures_ >= 3) {
        Fail("the server did not answer STATS three times in a row");
        return;
      }
    }
  }
}

int FuzzTransport::Run() {
  name_ = "fuzz-" + std::to_string(getpid()) + "-" + transport_;
  if (transport_ == "tcp") {
    Result<int> port = FreeTcpPort();
    if (!port.ok()) return 2;
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(*port);
  } else {
    Result<std::string> e = ResolveEndpoint(name_);
    if (!e.ok()) return 2;
    endpoint_ = *e;
  }
  log_ = dir_ + "/server-" + transport_ + ".log";
  // skip + a short lag_timeout + few leases per consumer: a silent hostile
  // consumer costs the good one at most lag_timeout (block would let any
  // valid consumer pace everyone, by design) and hostile leases pin at most
  // half the ring; heartbeat_timeout 1 s drops silent ones quickly.
  std::vector<std::string> args = SyntheticServerArgs(kSamples, 8, 16, 8, kSeed);
  args.insert(args.end(), {"--lag-policy", "skip", "--lag-timeout", "0.3", "--max-leases", "4",
                           "--heartbeat-timeout", "1", "--status-interval", "0.2"});
  if (transport_ == "tcp") args.insert(args.end(), {"--endpoint", endpoint_});
  auto server = StartServer(o_.server_bin, name_, endpoint_, args, log_, Ms(20000));
  if (!server.ok()) {
    std::fprintf(stderr, "bc_fuzz_peer: %s\n", server.status().ToString().c_str());
    return 2;
  }
  server_ = std::move(*server);
  mem_start_ = mem_max_ = ReadMemory(server_->pid());
  std::thread good([this] { GoodConsumer(); });
  const int64_t t0 = NowMs();
  while (reporter_.batches() == 0 && NowMs() - t0 < 10000 && !consumer_failed_) {
    std::this_thread::sleep_for(Ms(10));
  }
  FuzzTarget target{endpoint_, static_cast<size_t>(o_.huge_mib) << 20, o_.connections};
  zmq::context_t context;
  // ZeroMQ allows 1023 sockets per context by default; every worker may
  // churn --connections at once.
  context.set(zmq::ctxopt::max_sockets, o_.workers * std::max(10, o_.connections) + 256);
  std::vector<std::thread> workers;
  for (int w = 0; w < o_.workers; ++w) {
    workers.emplace_back([&, w] {
      FrameFuzzer fz(o_.seed * 1000 + static_cast<uint64_t>(w) + (transport_ == "tcp" ? 100 : 0));
      while (!stop_attacks_) {
        // Only worker 0 may keep leases and go silent, so hostile leases pin
        // at most max_leases (4) of the 8 slots at any time.
        try {
          RunAttack(PickAttack(fz), context, target, fz, tally_, w == 0);
        } catch (const zmq::error_t& e) {
          // The attacker's own failure (no sockets or descriptors left): a
          // broken run, said so, not an abort.
          Fail(std::string("an attacking peer failed: ") + e.what());
          break;
        }
      }
    });
  }
  Monitor(NowMs() + static_cast<int64_t>(o_.seconds * 1000), true);
  stop_attacks_ = true;
  for (std::thread& w : workers) w.join();
  // After the attacks the good consumer goes on, and the server stops cleanly.
  const uint64_t before = reporter_.batches();
  Monitor(NowMs() + 2000, false);
  if (!failed() && reporter_.batches() <= before) {
    Fail("the good consumer got no batch after the attacks");
  }
  mem_end_ = ReadMemory(server_->pid());
  stop_consumer_ = true;
  if (!server_died_) {
    server_->Kill(SIGTERM);
    const int rc = Reap(*server_, Ms(15000));
    if (rc != 0) Fail("the server exited with status " + std::to_string(rc) + " after SIGTERM");
    if (rc == -1) {
      server_->Kill(SIGKILL);
      Reap(*server_, Ms(10000));
    }
    for (const std::string& f : ServerLeftovers(name_, endpoint_)) {
      Fail("the stopped server left " + f + " behind");
    }
  }
  good.join();
  if (std::string r = SanitizerReport(log_); !r.empty()) Fail("server report: " + r);
  Summary((NowMs() - t0) / 1000.0);
  return failed() ? 1 : 0;
}

void FuzzTransport::Summary(double seconds) const {
  std::string attacks;
  for (size_t i = 0; i < tally_.attacks.size(); ++i) {
    attacks += std::string(i ? ", " : "") + AttackName(static_cast<Attack>(i)) + " " +
               std::to_string(tally_.attacks[i].load());
  }
  std::printf(
      "bc_fuzz_peer %s (%s): %.1f s\n"
      "  attacks:  %s\n"
      "  sent:     %llu frames, %.1f MiB, %llu connections; the server welcomed %llu hostile "
      "consumers, gave them %llu batches, answered %llu errors\n"
      "  good consumer: %llu batches (every byte and position checked), %llu exact epochs, "
      "%llu epochs broken by skips; %llu violations; largest gap %lld ms (bound %lld)\n"
      "  server memory: RSS %.1f MiB at start, %.1f at most, %.1f at the end (anon %.1f, %.1f, "
      "%.1f)\n"
      "  result: %s\n",
      transport_.c_str(), endpoint_.c_str(), seconds, attacks.c_str(),
      static_cast<unsigned long long>(tally_.frames.load()), tally_.bytes.load() / 1048576.0,
      static_cast<unsigned long long>(tally_.connections.load()),
      static_cast<unsigned long long>(tally_.welcomes.load()),
      static_cast<unsigned long long>(tally_.batches.load()),
      static_cast<unsigned long long>(tally_.errors.load()),
      static_cast<unsigned long long>(reporter_.batches()),
      static_cast<unsigned long long>(reporter_.exact_epochs()),
      static_cast<unsigned long long>(reporter_.broken_epochs()),
      static_cast<unsigned long long>(reporter_.violations()), static_cast<long long>(max_gap_ms_),
      static_cast<long long>(o_.max_stall_ms), mem_start_.rss / 1024.0, mem_max_.rss / 1024.0,
      mem_end_.rss / 1024.0, mem_start_.anon / 1024.0, mem_max_.anon / 1024.0,
      mem_end_.anon / 1024.0, failed() ? "FAILED" : "ok");
  std::lock_guard lock(fail_mu_);
  for (const std::string& f : failures_) std::printf("  - %s\n", f.c_str());
  std::fflush(stdout);
}

}  // namespace

int RunFuzz(const FuzzOptions& options) {
  // Every attacking worker may hold --connections descriptors at once.
  rlimit fds{};
  const auto wanted =
      static_cast<rlim_t>(options.workers * std::max(10, options.connections) + 1024);
  if (getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur < wanted) {
    fds.rlim_cur = std::min(wanted, fds.rlim_max);
    setrlimit(RLIMIT_NOFILE, &fds);
  }
  const std::string dir = LogDir(options.log_dir, "bc_fuzz_peer");
  std::printf("bc_fuzz_peer: seed %llu, %.0f s per transport, %d attacking threads; logs in %s\n",
              static_cast<unsigned long long>(options.seed), options.seconds, options.workers,
              dir.c_str());
  std::fflush(stdout);
  int worst = 0;
  for (const char* t : {"ipc", "tcp"}) {
    if (options.transport != "both" && options.transport != t) continue;
    worst = std::max(worst, FuzzTransport(options, t, dir).Run());
  }
  return worst == 2 ? 2 : FinishLogDir(dir, options.log_dir, worst == 0);
}

}  // namespace batchcast::stress
