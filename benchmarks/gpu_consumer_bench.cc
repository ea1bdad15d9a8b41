// gpu_consumer_bench: one consumer of a CUDA-ring server (benchmarks/gpu_bench.sh).
//
//   gpu_consumer_bench NAME [--batch-size 256] [--batches 2000] [--sleep-us 0]
//                      [--checksum] [--server-pid PID] [--linger-s 0]
//
// Measures samples/s over --batches batches and the time of each Next() (from
// the call to a device view ordered on the consumer's stream: the consumer
// overhead when the batch is already there, with --sleep-us giving the
// producer time to stay ahead). --checksum launches a kernel reading every
// batch on the stream (so its lease ends after real GPU work). --server-pid
// reports the server's CPU time per wall second (cores used). --linger-s keeps
// the connection (and its CUDA context) open afterwards, for memory readings.
// Prints one JSON object.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "batchcast/client/consumer.h"
#include "batchcast/cuda/kernels.h"
#include "batchcast/cuda/runtime.h"
#include "tools/consumer_cli.h"

namespace {
using Clock = std::chrono::steady_clock;

double ProcessCpuSeconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  std::istringstream s(line.substr(line.rfind(')') + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && s >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}
}  // namespace

int main(int argc, char** argv) {
  using namespace batchcast;
  CLI::App app{"batchcast GPU consumer benchmark"};
  ConsumerOptions o;
  o.batch_size = 256;
  o.timeout = std::chrono::seconds(60);
  int64_t batches = 2000, sleep_us = 0, server_pid = 0;
  double linger_s = 0;
  bool checksum = false;
  app.add_option("name", o.endpoint)->required();
  AddConsumerOptions(&app, o);
  app.add_option("--batches", batches, "batches measured (after 20 of warm-up)")
      ->capture_default_str();
  app.add_option("--sleep-us", sleep_us, "sleep after each batch (the producer stays ahead)");
  app.add_option("--server-pid", server_pid, "report this process's CPU cores (the server's)");
  app.add_option("--linger-s", linger_s, "stay connected this long afterwards (memory readings)");
  app.add_flag("--checksum", checksum, "run a kernel over each batch's images on the stream");
  CLI11_PARSE(app, argc, argv);

  // Batches are delivered on a stream of this process, on the ring's device.
  auto connected = ConnectOnOwnStream(o);
  if (!connected.ok()) {
    std::cerr << connected.status().ToString() << "\n";
    return 1;
  }
  Consumer* consumer = connected->consumer.get();
  const CudaStreamRef stream = connected->stream_ref();
  auto sum = cuda::DeviceBuffer::Create(std::max(0, consumer->device().index), 8);
  // Warm up (first batches, context, pools).
  for (int i = 0; i < 20; ++i) {
    auto b = consumer->Next();
    if (!b.ok()) return 1;
  }
  std::vector<double> next_us;
  next_us.reserve(static_cast<size_t>(batches));
  int64_t samples = 0, gathered = 0;
  const double cpu0 = server_pid > 0 ? ProcessCpuSeconds(static_cast<int>(server_pid)) : 0;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < batches;) {
    const auto a = Clock::now();
    auto b = consumer->Next();
    auto image =
        b.ok() && !b->end_of_epoch() ? b->field("image") : Result<FieldView>(NotFoundError(""));
    const auto z = Clock::now();
    if (!b.ok()) {
      std::cerr << b.status().ToString() << "\n";
      return 1;
    }
    if (b->end_of_epoch()) continue;
    next_us.push_back(std::chrono::duration<double, std::micro>(z - a).count());
    samples += static_cast<int64_t>(b->size());
    gathered += b->zero_copy() ? 0 : 1;
    if (checksum && image.ok()) {
      (void)cuda::ChecksumAsync(image->data, image->bytes, reinterpret_cast<uint64_t*>(sum->data()),
                                stream);
    }
    ++i;
    if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }
  (void)cuda::SynchronizeStream(stream);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  nlohmann::json j = {{"batch_size", o.batch_size},
                      {"batches", batches},
                      {"gathered_batches", gathered},
                      {"samples_per_s", samples / wall},
                      {"next_us_p50", Percentile(next_us, 0.5)},
                      {"next_us_p90", Percentile(next_us, 0.9)},
                      {"next_us_p99", Percentile(next_us, 0.99)},
                      {"sleep_us", sleep_us},
                      {"checksum", checksum}};
  if (server_pid > 0) {
    j["server_cpu_cores"] = (ProcessCpuSeconds(static_cast<int>(server_pid)) - cpu0) / wall;
  }
  std::cout << j.dump() << std::endl;
  if (linger_s > 0) {
    std::cout << "LINGER" << std::endl;
    std::this_thread::sleep_for(std::chrono::duration<double>(linger_s));
  }
  return 0;
}
