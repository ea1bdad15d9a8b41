#include "chaos_run.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "core/src/runtime_dir.h"
#include "processes.h"
#include "report.h"

namespace batchcast::stress {
namespace {

using testing::Process;
using Ms = std::chrono::milliseconds;

// Violations printed at most (the summary counts them all).
constexpr size_t kShownViolations = 30;

// Consumer batch sizes: any from 1 to window * producer batch / 2 = 64.
constexpr uint32_t kBatchSizes[] = {1, 3, 16, 24, 37, 64};

struct ConsumerConfig {
  uint32_t batch = 16;
  bool next_epoch = false;
  bool drop_last = true;
  int prefetch = 2;
  bool hold = false;  // holds every 23rd zero-copy batch for 50 ms
  std::string Describe() const {
    return "batch " + std::to_string(batch) + (next_epoch ? ", next_epoch" : ", immediate") +
           (drop_last ? ", drop_last" : "") + ", prefetch " + std::to_string(prefetch) +
           (hold ? ", holding" : "");
  }
};

struct Child {
  int id = 0;
  ConsumerConfig config;
  std::unique_ptr<Process> process;
  std::string log;
  bool connected = false;
  bool connected_before = false;
  int64_t disconnected_ms = 0;    // since when it is not connected
  int64_t progress_ms = 0;        // its last progress (or connection)
  int64_t awaiting_loss_ms = -1;  // its server died then; not noticed yet
  uint64_t batches = 0;           // as last reported, over all its connections
  uint64_t epochs_after_chaos = 0;
};

class Chaos {
 public:
  explicit Chaos(const ChaosOptions& o) : o_(o), rng_(o.seed) {}
  int Run();

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  void Log(const std::string& what) const {
    if (o_.verbose) std::fprintf(stderr, "bc_chaos: %s\n", what.c_str());
  }
  void Violation(const std::string& what) {
    violations_.push_back(what);
    if (violations_.size() <= kShownViolations) {
      std::fprintf(stderr, "bc_chaos: VIOLATION: %s\n", what.c_str());
    }
  }
  std::string Name(const Child& c) const {
    return "consumer #" + std::to_string(c.id) + " (" + c.config.Describe() + ")";
  }
  uint64_t ServerSeed() const { return o_.seed % 1000; }
  uint64_t CheckSeed() const {
    return o_.check_seed >= 0 ? static_cast<uint64_t>(o_.check_seed) : ServerSeed();
  }
  bool StartServer();
  void StopServer(int sig);
  void SpawnConsumer();
  void KillConsumer(size_t i);
  void Poll(int64_t ms);
  void ReadLines(Child& c);
  void HandleLine(Child& c, const std::string& line);
  void CheckChildren();
  void Act();
  void Recover();
  void Finish();

  ChaosOptions o_;
  std::mt19937_64 rng_;
  std::string name_, endpoint_, dir_;
  std::unique_ptr<Process> server_;
  std::string server_log_;
  int64_t server_up_ms_ = 0;
  int64_t last_death_ms_ = 0;  // when the last server was killed, stopped or died
  // When that server was reaped: a consumer may still connect to a server
  // between the signal and its end (it answers a HELLO while it stops, or
  // before a SIGKILL lands), and must then lose it.
  int64_t last_death_end_ms_ = 0;
  int64_t restart_at_ = -1;
  std::vector<Child> children_;
  std::vector<int64_t> spawn_at_;
  bool chaos_over_ = false;
  int next_id_ = 0, server_starts_ = 0, server_kills_ = 0, server_stops_ = 0;
  int consumer_starts_ = 0, consumer_kills_ = 0, reconnects_ = 0;
  uint64_t batches_gone_ = 0;  // of consumers no longer running
  uint64_t epochs_next_ = 0, epochs_immediate_ = 0, epochs_broken_ = 0;
  int64_t max_detect_ms_ = 0, max_gap_ms_ = 0;
  std::vector<std::string> violations_;
};

bool Chaos::StartServer() {
  server_log_ = dir_ + "/server-" + std::to_string(server_starts_) + ".log";
  std::vector<std::string> args = SyntheticServerArgs(o_.samples, 8, 16, 8, ServerSeed());
  args.insert(args.end(), {"--status-interval", "0"});
  if (o_.transport == "tcp") args.insert(args.end(), {"--endpoint", endpoint_});
  auto p = stress::StartServer(o_.server_bin, name_, endpoint_, args, server_log_, Ms(20000));
  if (!p.ok()) {
    Violation("the server did not start: " + p.status().message());
    restart_at_ = NowMs() + 1000;
    return false;
  }
  server_ = std::move(*p);
  server_up_ms_ = NowMs();
  ++server_starts_;
  Log("server started (pid " + std::to_string(server_->pid()) + ")");
  return true;
}

void Chaos::StopServer(int sig) {
  if (!server_) return;
  const int64_t t = NowMs();
  last_death_ms_ = t;
  server_->Kill(sig);
  for (Child& c : children_) {
    if (c.connected && c.awaiting_loss_ms < 0) c.awaiting_loss_ms = t;
  }
  const int rc = Reap(*server_, Ms(sig == SIGKILL ? 10000 : 20000));
  last_death_end_ms_ = NowMs();
  Log(std::string(sig == SIGKILL ? "kill -9 server" : "SIGTERM server") + ": status " +
      std::to_string(rc));
  if (sig == SIGKILL) {
    ++server_kills_;
  } else {
    ++server_stops_;
    if (rc != 0) Violation("the server exited with " + std::to_string(rc) + " after SIGTERM");
    for (const std::string& f : ServerLeftovers(name_, endpoint_)) {
      Violation("a stopped server left " + f + " behind");
    }
  }
  if (rc == -1) {
    Violation("the server did not exit after signal " + std::to_string(sig));
    server_->Kill(SIGKILL);
    Reap(*server_, Ms(10000));
  }
  if (std::string r = SanitizerReport(server_log_); !r.empty()) {
    Violation("server report: " + r + " (" + server_log_ + ")");
  }
  server_.reset();
}

void Chaos::SpawnConsumer() {
  Child c;
  c.id = next_id_++;
  c.config = {kBatchSizes[Uniform(0, std::size(kBatchSizes) - 1)], Uniform(0, 1) == 1,
              Uniform(0, 1) == 1, static_cast<int>(Uniform(1, 4)), Uniform(0, 3) == 0};
  c.log = dir_ + "/consumer-" + std::to_string(c.id) + ".log";
  std::vector<std::string> argv = {o_.self_bin,    "consume",
                                   "--endpoint",   endpoint_,
                                   "--samples",    std::to_string(o_.samples),
                                   "--seed",       std::to_string(CheckSeed()),
                                   "--batch-size", std::to_string(c.config.batch),
                                   "--join",       c.config.next_epoch ? "next_epoch" : "immediate",
                                   "--prefetch",   std::to_string(c.config.prefetch),
                                   "--reconnect",  "--connect-timeout-ms",
                                   "2000"};
  if (!c.config.drop_last) argv.push_back("--no-drop-last");
  if (c.config.hold) argv.insert(argv.end(), {"--hold-every", "23", "--hold-ms", "50"});
  c.process = Spawn(argv, c.log);
  c.disconnected_ms = c.progress_ms = NowMs();
  ++consumer_starts_;
  Log("started " + Name(c));
  children_.push_back(std::move(c));
}

void Chaos::KillConsumer(size_t i) {
  Child& c = children_[i];
  c.process->Kill(SIGKILL);
  Reap(*c.process, Ms(10000));  // reaped at once, so the server sees its pid gone
  ReadLines(c);
  batches_gone_ += c.batches;
  ++consumer_kills_;
  Log("kill -9 " + Name(c));
  children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(i));
}

void Chaos::ReadLines(Child& c) {
  std::vector<std::string> lines;
  c.process->ReadLines(&lines, Ms(0));
  for (const std::string& l : lines) HandleLine(c, l);
}

void Chaos::HandleLine(Child& c, const std::string& line) {
  const Report r = ParseReport(line);
  const int64_t now = NowMs();
  if (r.kind == "CONNECTED") {
    if (c.connected_before) ++reconnects_;
    c.connected = c.connected_before = true;
    c.progress_ms = now;
    // Connected to a server that died (or was dying) before this line was
    // read: it must notice the loss, counted from the later of the two.
    const auto connected_ms = static_cast<int64_t>(r.U(2));
    if (connected_ms <= last_death_end_ms_) {
      c.awaiting_loss_ms = std::max(connected_ms, last_death_ms_);
    }
  } else if (r.kind == "PROGRESS") {
    if (server_ && c.connected && c.progress_ms >= server_up_ms_) {
      max_gap_ms_ = std::max(max_gap_ms_, now - c.progress_ms);
    }
    c.progress_ms = now;
    c.batches = r.U(0);
  } else if (r.kind == "EPOCH") {
    c.progress_ms = now;
    if (r.U(2) == 0) {
      ++epochs_broken_;
    } else {
      ++(c.config.next_epoch ? epochs_next_ : epochs_immediate_);
      if (chaos_over_) ++c.epochs_after_chaos;
    }
  } else if (r.kind == "LOST") {
    c.connected = false;
    c.disconnected_ms = now;
    if (c.awaiting_loss_ms >= 0) {
      const int64_t latency = static_cast<int64_t>(r.U(1)) - c.awaiting_loss_ms;
      max_detect_ms_ = std::max(max_detect_ms_, latency);
      if (latency > o_.detect_ms) {
        Violation(Name(c) + " noticed its server's death after " + std::to_string(latency) + " ms");
      }
      c.awaiting_loss_ms = -1;
    } else {
      Violation(Name(c) + " lost a running server: " + r.words[0] + " " + r.rest);
    }
  } else if (r.kind == "VIOLATION") {
    Violation(Name(c) + ": " + r.rest);
  }
}

void Chaos::CheckChildren() {
  const int64_t now = NowMs();
  if (server_) {
    if (const int rc = Reap(*server_, Ms(0)); rc != -1) {
      Violation("the server exited by itself with status " + std::to_string(rc) + ": " +
                Tail(server_log_, 1500));
      last_death_ms_ = last_death_end_ms_ = now;
      server_.reset();
      restart_at_ = now;
    }
  }
  for (size_t i = 0; i < children_.size();) {
    Child& c = children_[i];
    if (const int rc = Reap(*c.process, Ms(0)); rc != -1) {
      ReadLines(c);
      Violation(Name(c) + " exited by itself with status " + std::to_string(rc) + ": " +
                Tail(c.log, 1500));
      batches_gone_ += c.batches;
      children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(i));
      spawn_at_.push_back(now);
      continue;
    }
    if (c.awaiting_loss_ms >= 0 && now - c.awaiting_loss_ms > o_.detect_ms) {
      Violation(Name(c) + " did not notice its server's death within " +
                std::to_string(o_.detect_ms) + " ms");
      c.awaiting_loss_ms = -1;
    }
    if (server_ && now - server_up_ms_ > o_.stall_ms) {
      if (c.connected && now - std::max(c.progress_ms, server_up_ms_) > o_.stall_ms) {
        Violation(Name(c) + " made no progress for " + std::to_string(now - c.progress_ms) +
                  " ms while the server was up");
        c.progress_ms = now;
      } else if (!c.connected && c.awaiting_loss_ms < 0 &&
                 now - std::max(c.disconnected_ms, server_up_ms_) > o_.stall_ms) {
        Violation(Name(c) + " could not connect for " + std::to_string(o_.stall_ms) +
                  " ms while the server was up");
        c.disconnected_ms = now;
      }
    }
    ++i;
  }
}

void Chaos::Poll(int64_t ms) {
  const int64_t until = NowMs() + ms;
  do {
    for (Child& c : children_) ReadLines(c);
    CheckChildren();
    const int64_t now = NowMs();
    if (!server_ && restart_at_ >= 0 && now >= restart_at_) {
      restart_at_ = -1;
      StartServer();
    }
    for (size_t i = 0; i < spawn_at_.size();) {
      if (now < spawn_at_[i]) {
        ++i;
        continue;
      }
      spawn_at_.erase(spawn_at_.begin() + static_cast<std::ptrdiff_t>(i));
      if (static_cast<int>(children_.size()) < o_.consumers) SpawnConsumer();
    }
    std::this_thread::sleep_for(Ms(10));
  } while (NowMs() < until);
}

void Chaos::Act() {
  const int64_t now = NowMs();
  const int64_t r = Uniform(0, 99);
  auto kill_random_consumer = [&] {
    if (children_.empty()) return;
    KillConsumer(static_cast<size_t>(Uniform(0, static_cast<int64_t>(children_.size()) - 1)));
    spawn_at_.push_back(now + Uniform(0, 400));
  };
  if (r < 35) {
    kill_random_consumer();
  } else if (r < 45) {
    for (int64_t n = Uniform(1, std::max<int64_t>(1, children_.size())); n > 0; --n) {
      kill_random_consumer();
    }
  } else if (r < 62) {
    if (server_) restart_at_ = now + Uniform(0, 600);
    StopServer(SIGKILL);
  } else if (r < 67) {
    if (server_) restart_at_ = now + Uniform(0, 300);
    StopServer(SIGTERM);
  } else if (r < 72) {
    kill_random_consumer();
    if (server_) restart_at_ = now + Uniform(0, 600);
    StopServer(SIGKILL);
  } else if (r < 87) {
    if (static_cast<int>(children_.size() + spawn_at_.size()) < o_.consumers) SpawnConsumer();
  }
  if (children_.empty() && spawn_at_.empty()) spawn_at_.push_back(now);
}

void Chaos::Recover() {
  chaos_over_ = true;
  if (!server_) StartServer();
  restart_at_ = -1;
  spawn_at_.clear();
  while (static_cast<int>(children_.size()) < std::min(2, o_.consumers)) SpawnConsumer();
  const int64_t deadline = NowMs() + o_.recover_ms;
  while (NowMs() < deadline) {
    Poll(50);
    if (std::all_of(children_.begin(), children_.end(),
                    [](const Child& c) { return c.epochs_after_chaos > 0; })) {
      return;
    }
  }
  for (const Child& c : children_) {
    if (c.epochs_after_chaos == 0) {
      Violation(Name(c) + " completed no exact epoch within " + std::to_string(o_.recover_ms) +
                " ms after the chaos");
    }
  }
}

void Chaos::Finish() {
  StopServer(SIGTERM);  // every consumer must hear of it
  const int64_t deadline = NowMs() + o_.detect_ms + 1000;
  while (NowMs() < deadline && std::any_of(children_.begin(), children_.end(), [](const Child& c) {
           return c.awaiting_loss_ms >= 0;
         })) {
    Poll(20);
  }
  CheckChildren();
  while (!children_.empty()) KillConsumer(0);
}

int Chaos::Run() {
  name_ = "chaos-" + std::to_string(getpid());
  dir_ = LogDir(o_.log_dir, "bc_chaos");
  if (o_.transport == "tcp") {
    Result<int> port = FreeTcpPort();
    if (!port.ok()) {
      std::fprintf(stderr, "bc_chaos: %s\n", port.status().ToString().c_str());
      return 2;
    }
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(*port);
  } else {
    Result<std::string> e = ResolveEndpoint(name_);
    if (!e.ok()) {
      std::fprintf(stderr, "bc_chaos: %s\n", e.status().ToString().c_str());
      return 2;
    }
    endpoint_ = *e;
  }
  o_.consumers = std::max(1, o_.consumers);
  std::printf("bc_chaos: seed %llu, %.0f s over %s, %llu samples, up to %d consumers; logs in %s\n",
              static_cast<unsigned long long>(o_.seed), o_.seconds, endpoint_.c_str(),
              static_cast<unsigned long long>(o_.samples), o_.consumers, dir_.c_str());
  std::fflush(stdout);
  const int64_t t0 = NowMs();
  if (!StartServer()) return 2;
  for (int i = 0; i < std::min(2, o_.consumers); ++i) SpawnConsumer();
  const int64_t end = t0 + static_cast<int64_t>(o_.seconds * 1000);
  while (NowMs() < end) {
    Poll(Uniform(o_.mean_interval_ms / 4, o_.mean_interval_ms * 7 / 4));
    if (NowMs() < end) Act();
  }
  const int64_t t_chaos = NowMs();
  Recover();
  const int64_t t_recover = NowMs();
  Finish();
  std::printf(
      "bc_chaos: %.1f s of chaos, %.1f s to recover\n"
      "  server:    %d kill -9, %d SIGTERM, %d starts\n"
      "  consumers: %d started, %d killed, %d reconnects\n"
      "  checked:   %llu exact next_epoch epochs (each = Sampler::EpochOrder), %llu exact "
      "immediate epochs, %llu batches; %llu epochs broken by skips\n"
      "  bounds:    server death noticed within %lld ms (bound %lld); largest gap in progress "
      "while the server was up %lld ms (bound %lld)\n"
      "  violations: %zu\n",
      (t_chaos - t0) / 1000.0, (t_recover - t_chaos) / 1000.0, server_kills_, server_stops_,
      server_starts_, consumer_starts_, consumer_kills_, reconnects_,
      static_cast<unsigned long long>(epochs_next_),
      static_cast<unsigned long long>(epochs_immediate_),
      static_cast<unsigned long long>(batches_gone_),
      static_cast<unsigned long long>(epochs_broken_), static_cast<long long>(max_detect_ms_),
      static_cast<long long>(o_.detect_ms), static_cast<long long>(max_gap_ms_),
      static_cast<long long>(o_.stall_ms), violations_.size());
  for (size_t i = 0; i < violations_.size() && i < kShownViolations; ++i) {
    std::printf("  - %s\n", violations_[i].c_str());
  }
  if (violations_.size() > kShownViolations) {
    std::printf("  - ... and %zu more\n", violations_.size() - kShownViolations);
  }
  return FinishLogDir(dir_, o_.log_dir, violations_.empty());
}

}  // namespace

int RunChaos(const ChaosOptions& options) { return Chaos(options).Run(); }

}  // namespace batchcast::stress
