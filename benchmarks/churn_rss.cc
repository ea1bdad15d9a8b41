// churn_rss: does the server's memory grow under connection churn?
//
//   churn_rss [--server-bin PATH] [--cycles 10000] [--every 1000]
//             [--no-consumer] [--no-stats] [--no-garbage] [--no-silent]
//             [--concurrent N] [--flood N] [--stats-flood N]
//
// Starts `batchcast-server serve --synthetic ...` and, each cycle, from fresh
// connections: a consumer that connects, reads one batch and leaves; a STATS;
// a malformed frame; a HELLO that is never followed by anything (each may be
// left out, to see which costs what); optionally N connections at once that
// each send a STATS, and one peer that sends N malformed frames or N STATS
// without reading the replies. Every
// `--every` cycles it prints the server's VmRSS and RssAnon (KiB) and the
// cycle rate; at the end the growth of RssAnon after the first sample. The
// server binary may be any build (compare before/after a change); the test
// Hardening.ConnectionChurnDoesNotGrowServerMemory runs a short version.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "batchcast/client/consumer.h"
#include "core/src/protocol.h"
#include "core/src/runtime_dir.h"

extern char** environ;

namespace {

using namespace std::chrono_literals;

// VmRSS and RssAnon of `pid`, KiB.
std::pair<long, long> Rss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  long rss = -1, anon = -1;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stol(line.substr(6));
    if (line.rfind("RssAnon:", 0) == 0) anon = std::stol(line.substr(8));
  }
  return {rss, anon};
}

void SendOnce(zmq::context_t& ctx, const std::string& endpoint, const std::string& frame,
              bool wait_reply) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 100);
  s.connect(endpoint);
  s.send(zmq::buffer(frame), zmq::send_flags::dontwait);
  if (wait_reply) {
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(2000));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"connection churn against a batchcast server; prints its memory"};
  std::string server_bin = BC_SERVER_BIN;
  int cycles = 10000, every = 1000;
  bool consumer = true, stats_peer = true, garbage = true, silent = true;
  int concurrent = 0, flood = 0, stats_flood = 0;
  app.add_option("--server-bin", server_bin, "batchcast-server to run")->capture_default_str();
  app.add_option("--cycles", cycles, "connect/leave cycles")->capture_default_str();
  app.add_option("--every", every, "cycles between samples")->capture_default_str();
  app.add_flag("!--no-consumer", consumer, "leave out the consumer");
  app.add_flag("!--no-stats", stats_peer, "leave out the STATS peer");
  app.add_flag("!--no-garbage", garbage, "leave out the malformed frame");
  app.add_flag("!--no-silent", silent, "leave out the silent HELLO");
  app.add_option("--concurrent", concurrent, "connections at once, each sending a STATS");
  app.add_option("--flood", flood, "malformed frames from one peer that never reads");
  app.add_option("--stats-flood", stats_flood, "STATS from one peer that never reads");
  CLI11_PARSE(app, argc, argv);

  const std::string name = "churn-" + std::to_string(getpid());
  std::vector<std::string> args = {server_bin,    "serve", "--synthetic",       "1000000",
                                   "--size",      "4",     "--batch-size",      "16",
                                   "--name",      name,    "--status-interval", "0",
                                   "--log-level", "error"};
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  pid_t server = 0;
  if (posix_spawn(&server, cargs[0], nullptr, nullptr, cargs.data(), environ) != 0) {
    std::fprintf(stderr, "cannot start %s\n", server_bin.c_str());
    return 1;
  }
  const auto endpoint = batchcast::ResolveEndpoint(name);
  for (int i = 0; i < 500 && !batchcast::QueryStats(name, 200ms).ok(); ++i) {
    std::this_thread::sleep_for(20ms);
  }
  zmq::context_t ctx;
  const std::string stats = batchcast::proto::Encode(batchcast::proto::Stats{});
  const std::string hello = batchcast::proto::Encode(
      batchcast::proto::Hello{"churn-silent", static_cast<uint32_t>(getpid()), 16, true,
                              batchcast::JoinPolicy::kImmediate, 2, /*device=*/"", /*group=*/""});
  long first_anon = -1;
  auto t0 = std::chrono::steady_clock::now();
  std::printf("%8s %12s %12s %10s\n", "cycle", "VmRSS KiB", "RssAnon KiB", "cycles/s");
  int rc = 0;
  for (int i = 1; i <= cycles; ++i) {
    if (consumer) {
      batchcast::ConsumerOptions o;
      o.endpoint = name;
      o.batch_size = 16;
      o.timeout = 10s;
      auto c = batchcast::Consumer::Connect(o);
      if (!c.ok() || !(*c)->Next().ok()) {
        std::fprintf(stderr, "cycle %d: %s\n", i,
                     c.ok() ? "no batch" : c.status().ToString().c_str());
        rc = 1;
        break;
      }
    }
    if (stats_peer) SendOnce(ctx, *endpoint, stats, true);
    if (garbage) SendOnce(ctx, *endpoint, "BC garbage " + std::to_string(i), true);
    if (silent) SendOnce(ctx, *endpoint, hello, true);
    if (concurrent > 0) {
      std::vector<zmq::socket_t> peers;
      for (int k = 0; k < concurrent; ++k) {
        peers.emplace_back(ctx, zmq::socket_type::dealer);
        peers.back().set(zmq::sockopt::linger, 0);
        peers.back().connect(*endpoint);
        peers.back().send(zmq::buffer(stats), zmq::send_flags::dontwait);
      }
      std::this_thread::sleep_for(200ms);
    }
    for (const auto& [count, frame] :
         {std::pair{flood, std::string("BC garbage")}, std::pair{stats_flood, stats}}) {
      if (count == 0) continue;
      zmq::socket_t s(ctx, zmq::socket_type::dealer);
      s.set(zmq::sockopt::linger, 0);
      s.set(zmq::sockopt::sndhwm, 0);
      s.connect(*endpoint);
      for (int k = 0; k < count; ++k) s.send(zmq::buffer(frame), zmq::send_flags::none);
      std::this_thread::sleep_for(300ms);
    }
    if (i % every == 0) {
      const auto [rss, anon] = Rss(server);
      if (first_anon < 0) first_anon = anon;
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%8d %12ld %12ld %10.0f\n", i, rss, anon, every / secs);
      std::fflush(stdout);
      t0 = std::chrono::steady_clock::now();
    }
  }
  const auto [rss, anon] = Rss(server);
  std::printf("RssAnon growth after the first sample: %ld KiB\n", anon - first_anon);
  kill(server, SIGTERM);
  int status = 0;
  waitpid(server, &status, 0);
  return rc;
}
