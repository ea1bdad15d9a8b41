#include "consumer_process.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "checked_reader.h"
#include "tools/consumer_cli.h"

namespace batchcast::stress {

int RunConsumerProcess(int argc, char** argv) {
  CLI::App app{"a checked batchcast consumer (report lines on stdout)"};
  ConsumerOptions options;
  options.batch_size = 16;
  CheckedReadOptions read;
  bool reconnect = false;
  int64_t connect_timeout_ms = 2000, hold_ms = 0;
  app.add_option("--endpoint", options.endpoint)->required();
  AddConsumerOptions(&app, options);
  app.add_option("--samples", read.dataset_size, "the server's --synthetic")->required();
  app.add_option("--seed", read.sampler.seed, "the server's --seed");
  app.add_option("--batches", read.max_batches, "stop after this many batches (-1: never)");
  app.add_flag("--reconnect", reconnect, "connect again when the server is gone");
  app.add_option("--connect-timeout-ms", connect_timeout_ms);
  app.add_option("--hold-every", read.hold_every, "hold every n-th zero-copy batch");
  app.add_option("--hold-ms", hold_ms, "for this long");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  read.hold_for = std::chrono::milliseconds(hold_ms);
  options.connect_timeout = std::chrono::milliseconds(connect_timeout_ms);
  options.name = "stress-consumer-" + std::to_string(getpid());
  Reporter reporter(stdout);
  while (true) {
    Result<std::unique_ptr<Consumer>> consumer = Consumer::Connect(options);
    if (!consumer.ok()) {
      const StatusCode code = consumer.status().code();
      const bool no_server = code == StatusCode::kNotFound || code == StatusCode::kUnavailable ||
                             code == StatusCode::kDeadlineExceeded;
      if (!no_server) reporter.Violation("connect failed: " + consumer.status().ToString());
      if (!reconnect) return 4;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    Status s = ReadChecked(**consumer, options, read, reporter);
    if (s.ok()) {
      reporter.Done();
      return 0;
    }
    if (s.code() != StatusCode::kUnavailable) {
      reporter.Violation("Next() failed: " + s.ToString());
    }
    if (!reconnect) return 4;
  }
}

}  // namespace batchcast::stress
