// bench_roundtrip: the cost of Consumer::Next() against a real server process
// over ipc:// and tcp://127.0.0.1 (CURVE, as every tcp:// endpoint), with a
// zero-copy result (consumer batch = producer batch); and the ZeroMQ floor:
// a bare ping-pong over ipc://, plain tcp:// and tcp:// with CURVE.
//
//   build/benchmarks/bench_roundtrip [--benchmark_min_time=2]
//
// Reports the mean per Next() (Google Benchmark's time) and, as counters, the
// p50/p99 latency of single calls in microseconds. prefetch=1 measures a full
// NEXT -> BATCH round trip; prefetch=2 (the default) what a training loop sees.
#include <benchmark/benchmark.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "batchcast/client/consumer.h"

extern char** environ;

namespace {

class ServerProcess {
 public:
  // endpoint: "" = by name (ipc://).
  ServerProcess(const std::string& name, const std::string& endpoint) {
    std::vector<std::string> args = {
        BC_SERVER_BIN,       "serve", "--synthetic", "1000000", "--size",    "16",
        "--batch-size",      "64",    "--window",    "8",       "--name",    name,
        "--status-interval", "0",     "--log-level", "warn",    "--workers", "1"};
    if (!endpoint.empty()) args.insert(args.end(), {"--endpoint", endpoint});
    const std::string& target = endpoint.empty() ? name : endpoint;
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ);
    for (int i = 0; i < 200; ++i) {
      if (batchcast::QueryStats(target, std::chrono::milliseconds(200)).ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ServerProcess() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
};

// A free tcp port on 127.0.0.1 (bound by ZeroMQ, then released).
std::string FreeTcpEndpoint() {
  zmq::context_t ctx(1);
  zmq::socket_t s(ctx, zmq::socket_type::router);
  s.bind("tcp://127.0.0.1:*");
  return s.get(zmq::sockopt::last_endpoint);
}

// {prefetch, consumer batch, transport: 0 = ipc://, 1 = tcp:// (CURVE)}.
void BM_Next(benchmark::State& state) {
  const std::string name = "bench-rt-" + std::to_string(getpid()) + "-" +
                           std::to_string(state.range(0)) + "-" + std::to_string(state.range(1)) +
                           "-" + std::to_string(state.range(2));
  const std::string endpoint = state.range(2) == 1 ? FreeTcpEndpoint() : "";
  ServerProcess server(name, endpoint);
  batchcast::ConsumerOptions options;
  options.endpoint = endpoint.empty() ? name : endpoint;
  options.batch_size = static_cast<uint32_t>(state.range(1));
  options.prefetch = static_cast<uint16_t>(state.range(0));
  auto consumer = batchcast::Consumer::Connect(options);
  if (!consumer.ok()) {
    state.SkipWithError(consumer.status().ToString().c_str());
    return;
  }
  for (int i = 0; i < 200; ++i) (void)(*consumer)->Next();  // warm up
  std::vector<double> us;
  us.reserve(1 << 20);
  size_t zero_copy = 0, batches = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto batch = (*consumer)->Next();
    const auto t1 = std::chrono::steady_clock::now();
    if (!batch.ok()) {
      state.SkipWithError(batch.status().ToString().c_str());
      break;
    }
    if (!batch->end_of_epoch()) {
      ++batches;
      zero_copy += batch->zero_copy();
      benchmark::DoNotOptimize(batch->field("image"));
    }
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  if (!us.empty()) {
    state.counters["p50_us"] = us[us.size() / 2];
    state.counters["p99_us"] = us[us.size() * 99 / 100];
    state.counters["zero_copy"] = batches ? static_cast<double>(zero_copy) / batches : 0;
  }
}

// The floor: a bare ZeroMQ DEALER/ROUTER echo of a 40-byte message between two
// processes, measured the same way, over {0: ipc://, 1: plain tcp://, 2: tcp://
// with CURVE}. Latency on a VM varies with the host (idle cores wake slowly),
// so compare BM_Next with this floor from the same run.
void BM_ZmqPingPong(benchmark::State& state) {
  const int transport = static_cast<int>(state.range(0));
  const std::string endpoint = transport == 0
                                   ? "ipc:///tmp/bc-bench-pingpong-" + std::to_string(getpid())
                                   : FreeTcpEndpoint();
  char server_public[41] = {}, server_secret[41] = {}, client_public[41] = {},
       client_secret[41] = {};
  if (transport == 2 && (zmq_curve_keypair(server_public, server_secret) != 0 ||
                         zmq_curve_keypair(client_public, client_secret) != 0)) {
    state.SkipWithError("this libzmq has no CURVE");
    return;
  }
  const pid_t child = fork();
  if (child == 0) {
    zmq::context_t ctx(1);
    zmq::socket_t router(ctx, zmq::socket_type::router);
    if (transport == 2) {
      router.set(zmq::sockopt::curve_server, 1);
      router.set(zmq::sockopt::curve_secretkey, std::string(server_secret));
    }
    router.bind(endpoint);
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    while (true) {
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      zmq::message_t id, msg;
      while (router.recv(id, zmq::recv_flags::dontwait)) {
        (void)router.recv(msg);
        if (msg.size() == 1) _exit(0);
        router.send(id, zmq::send_flags::sndmore);
        router.send(msg, zmq::send_flags::none);
      }
    }
  }
  zmq::context_t ctx(1);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  if (transport == 2) {
    dealer.set(zmq::sockopt::curve_serverkey, std::string(server_public));
    dealer.set(zmq::sockopt::curve_publickey, std::string(client_public));
    dealer.set(zmq::sockopt::curve_secretkey, std::string(client_secret));
  }
  dealer.connect(endpoint);
  char payload[40] = {};
  auto round_trip = [&] {
    dealer.send(zmq::buffer(payload, sizeof(payload)), zmq::send_flags::none);
    zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
    zmq::message_t reply;
    while (!dealer.recv(reply, zmq::recv_flags::dontwait)) {
      zmq::poll(&item, 1, std::chrono::milliseconds(10));
    }
  };
  for (int i = 0; i < 200; ++i) round_trip();
  std::vector<double> us;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    round_trip();
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  dealer.send(zmq::buffer(payload, 1), zmq::send_flags::none);
  waitpid(child, nullptr, 0);
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[us.size() * 99 / 100];
}
BENCHMARK(BM_ZmqPingPong)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// {prefetch, consumer batch, transport}: 64 = the producer batch (one
// segment, zero copy).
BENCHMARK(BM_Next)
    ->Args({1, 64, 0})
    ->Args({2, 64, 0})
    ->Args({1, 64, 1})
    ->Args({2, 64, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
