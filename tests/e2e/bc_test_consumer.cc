// bc_test_consumer: a consumer process for the end-to-end tests.
//
// Reads --epochs consumer epochs (or --batches batches) from a server, checks
// every byte of the synthetic `image` field and the `label` field against the
// formula of core/synthetic.h, and writes what it saw as JSON (--out):
//   {"epochs": [[indices...], ...], "batches": [[first_seq, size, t_ms], ...],
//    "mismatches": N, "error": "...", "error_code": "...", "batches_per_epoch": N,
//    "skipped": N}
// Prints "READY" after the first batch and "HOLDING" when --hold-at is reached
// (it then keeps that batch for --hold-ms without asking for more), so tests can
// synchronize on stdout.
//
// CUDA rings (the cuda instances of engine_test): batches are delivered on a
// stream of this process (ConnectOnOwnStream, tools/consumer_cli.h), copied to
// the host on it and checked there. A consumer in a group (--group, or the
// launcher's) also writes "group": {"name", "rank", "world_size", "source"}.
// The JSON also says "device" (the field's
// device index, -1 for host memory), "zero_copy"/"gathered" counts and
// "cuda_errors".
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "batchcast/client/consumer.h"
#include "device_util.h"
#include "tools/consumer_cli.h"

namespace {

// FormulaMismatches of the batch; a CUDA error is printed and counted.
int64_t CheckBatch(const batchcast::Batch& batch, batchcast::CudaStreamRef stream,
                   int64_t& cuda_errors) {
  batchcast::Result<int64_t> bad = batchcast::testing::FormulaMismatches(batch, stream);
  if (bad.ok()) return *bad;
  std::cerr << bad.status().ToString() << "\n";
  ++cuda_errors;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"batchcast test consumer"};
  batchcast::ConsumerOptions options;
  options.batch_size = 32;
  std::string out_path;
  uint32_t epochs = 1;
  int64_t max_batches = -1, sleep_ms = 0, hold_at = -1, hold_ms = 0;
  bool verify = true;
  app.add_option("--endpoint", options.endpoint)->required();
  batchcast::AddConsumerOptions(&app, options);
  app.add_option("--epochs", epochs);
  app.add_option("--batches", max_batches);
  app.add_option("--sleep-ms", sleep_ms);
  app.add_option("--hold-at", hold_at);
  app.add_option("--hold-ms", hold_ms);
  app.add_option("--out", out_path);
  app.add_flag("!--no-verify", verify);
  CLI11_PARSE(app, argc, argv);
  options.name = "test-consumer-" + std::to_string(options.batch_size);
  if (options.group && !options.group->empty()) {
    options.name += "-" + *options.group + "-" + std::to_string(options.rank.value_or(0));
  }

  nlohmann::json result;
  result["epochs"] = nlohmann::json::array();
  result["batches"] = nlohmann::json::array();
  int64_t mismatches = 0, cuda_errors = 0, zero_copy = 0, gathered = 0;
  int device = -1;
  auto write = [&] {
    result["mismatches"] = mismatches;
    result["cuda_errors"] = cuda_errors;
    result["zero_copy"] = zero_copy;
    result["gathered"] = gathered;
    result["device"] = device;
    if (!out_path.empty()) {
      std::ofstream(out_path + ".tmp") << result.dump();
      std::rename((out_path + ".tmp").c_str(), out_path.c_str());
    }
  };

  // On a CUDA ring, batches are delivered on a stream of this process.
  auto connected = batchcast::ConnectOnOwnStream(options);
  if (!connected.ok()) {
    result["error"] = connected.status().message();
    result["error_code"] = std::string(batchcast::StatusCodeName(connected.status().code()));
    write();
    std::cerr << connected.status().ToString() << "\n";
    return 3;
  }
  batchcast::Consumer* consumer = connected->consumer.get();
  result["batches_per_epoch"] = consumer->batches_per_epoch();
  if (const auto& g = consumer->group()) {
    result["group"] = {{"name", g->group},
                       {"rank", g->rank},
                       {"world_size", g->world_size},
                       {"source", g->source}};
  }
  const batchcast::CudaStreamRef stream_handle = connected->stream_ref();
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json current = nlohmann::json::array();
  int64_t delivered = 0;
  uint32_t done_epochs = 0;
  bool ready_printed = false;
  while (done_epochs < epochs && (max_batches < 0 || delivered < max_batches)) {
    auto batch = consumer->Next();
    const double t_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!batch.ok()) {
      std::cerr << "bc_test_consumer: " << batch.status().ToString() << "\n";
      result["error"] = batch.status().message();
      result["error_code"] = std::string(batchcast::StatusCodeName(batch.status().code()));
      result["error_t_ms"] = t_ms;
      break;
    }
    if (batch->end_of_epoch()) {
      result["epochs"].push_back(current);
      result["skipped"] = batch->skipped();
      current = nlohmann::json::array();
      ++done_epochs;
      continue;
    }
    for (int64_t idx : batch->indices()) current.push_back(idx);
    result["batches"].push_back(
        {batch->first_seq(), batch->size(), t_ms, batch->epoch(), batch->skipped()});
    result["skipped"] = batch->skipped();
    (batch->zero_copy() ? zero_copy : gathered) += 1;
    if (auto f = batch->field("image"); f.ok()) device = f->device.index;
    if (verify) mismatches += CheckBatch(*batch, stream_handle, cuda_errors);
    ++delivered;
    if (!ready_printed) {
      std::cout << "READY" << std::endl;
      ready_printed = true;
    }
    if (hold_at >= 0 && delivered == hold_at + 1) {
      std::cout << "HOLDING" << std::endl;
      std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
      if (verify) mismatches += CheckBatch(*batch, stream_handle, cuda_errors);
    }
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  }
  if (!current.empty()) result["partial_epoch"] = current;
  write();
  return result.contains("error") ? 4 : 0;
}
