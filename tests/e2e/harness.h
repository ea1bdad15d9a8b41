// Shared by the end-to-end suites (tests/e2e, tests/gpu): start a server or a
// consumer process, wait for a server, read its stats, connect in-process.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/client/consumer.h"
#include "process.h"

namespace batchcast::testing {

// The whole file at `path` ("" when it cannot be read).
inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Waits until a server answers STATS; returns its stats.
inline nlohmann::json WaitForServer(const std::string& name,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = QueryStats(name, std::chrono::milliseconds(500));
    if (r.ok()) return nlohmann::json::parse(*r);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "server " << name << " did not come up";
  return {};
}

inline nlohmann::json Stats(const std::string& name) {
  auto r = QueryStats(name, std::chrono::seconds(2));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? nlohmann::json::parse(*r) : nlohmann::json();
}

// `server_bin serve --name NAME --status-interval 0 EXTRA...`, once it answers.
inline std::unique_ptr<Process> StartServerProcess(const std::string& server_bin,
                                                   const std::string& name,
                                                   const std::vector<std::string>& extra,
                                                   const std::string& log = "",
                                                   nlohmann::json* stats = nullptr,
                                                   const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {server_bin, "serve", "--name", name, "--status-interval", "0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto p = std::make_unique<Process>(argv, log, env);
  nlohmann::json st = WaitForServer(name);
  if (stats != nullptr) *stats = std::move(st);
  return p;
}

// `consumer_bin --endpoint NAME --out OUT EXTRA...`
inline std::unique_ptr<Process> StartConsumerProcess(const std::string& consumer_bin,
                                                     const std::string& name,
                                                     const std::string& out,
                                                     const std::vector<std::string>& extra,
                                                     const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {consumer_bin, "--endpoint", name, "--out", out};
  argv.insert(argv.end(), extra.begin(), extra.end());
  // No consumer group from a launcher the tests may run under (a SLURM step,
  // torchrun): only the ones a test names or sets up in `env`.
  std::vector<std::string> child_env = env;
  bool names_group = false;
  for (const std::string& e : env) names_group = names_group || e.starts_with("BATCHCAST_GROUP=");
  if (!names_group) child_env.push_back("BATCHCAST_GROUP=none");
  return std::make_unique<Process>(argv, "", child_env);
}

// Reads the batches of `c`'s current epoch up to its end-of-epoch marker,
// calling on_batch(batch) for each. Stops at an error (a fatal failure) and at
// a fatal failure in on_batch: call it in ASSERT_NO_FATAL_FAILURE.
template <typename F>
void ForEachBatchOfEpoch(Consumer* c, F on_batch) {
  while (true) {
    auto b = c->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (b->end_of_epoch()) return;
    on_batch(*b);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Options of a consumer of server `name` reading batches of `batch`.
inline ConsumerOptions ReaderOptions(const std::string& name, uint32_t batch, JoinPolicy join,
                                     std::chrono::seconds timeout) {
  return ConsumerOptions{.endpoint = name, .batch_size = batch, .join = join, .timeout = timeout};
}

// An in-process consumer (null and a test failure if it cannot connect).
inline std::unique_ptr<Consumer> ConnectConsumer(const std::string& name, uint32_t batch,
                                                 JoinPolicy join, uint16_t prefetch = 2,
                                                 CudaStreamRef cuda_stream = {}) {
  ConsumerOptions o = ReaderOptions(name, batch, join, std::chrono::seconds(20));
  o.prefetch = prefetch;
  o.cuda_stream = cuda_stream;
  auto c = Consumer::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// read(consumer) for every consumer at once, one thread each: what each read,
// in the consumers' order.
template <typename Read>
auto ReadTogether(const std::vector<std::unique_ptr<Consumer>>& consumers, Read read)
    -> std::vector<decltype(read(*consumers.front()))> {
  std::vector<decltype(read(*consumers.front()))> out(consumers.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < consumers.size(); ++k) {
    threads.emplace_back([&, k] { out[k] = read(*consumers[k]); });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace batchcast::testing
