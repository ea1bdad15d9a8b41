// An in-process batchcast server: serves a dataset (or synthetic data) with
// options given as on the batchcast-server command line, until Ctrl-C or the
// stream's end.
//
//   serve --synthetic 10000 --size 64 --name demo --epochs 3
//   serve /data/imagenet/train --name imnet --batch-size 256 --dtype float16
//
// Built against the installed package (examples/CMakeLists.txt:
// find_package(batchcast) + batchcast::server). The option table
// (batchcast/server/option_table.h) reads every `--name value` pair.
#include <batchcast/server/option_table.h>
#include <batchcast/server/server.h>

#include <csignal>
#include <cstdio>
#include <string>

namespace {
volatile std::sig_atomic_t g_stop = 0;
}

int main(int argc, char** argv) {
  batchcast::ServerOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool named = arg.starts_with("--");
    if (named && i + 1 >= argc) {
      std::fprintf(stderr, "serve: %s needs a value\n", arg.c_str());
      return 2;
    }
    const batchcast::Status s = named ? batchcast::SetServerOption(options, arg, argv[++i])
                                      : batchcast::SetServerOption(options, "data", arg);
    if (!s.ok()) {
      std::fprintf(stderr, "serve: %s\n", s.message().c_str());
      return 2;
    }
  }
  auto server = batchcast::Server::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "serve: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("serving '%s' on %s (%llu samples per epoch); Ctrl-C stops\n", options.name.c_str(),
              (*server)->endpoint().c_str(),
              static_cast<unsigned long long>((*server)->epoch_len()));
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  while (!g_stop && !(*server)->WaitFor(std::chrono::milliseconds(200))) {
  }
  (*server)->Stop();
  const batchcast::Status final_status = (*server)->status();
  std::printf("stopped: %s\n", final_status.ToString().c_str());
  return final_status.ok() ? 0 : 1;
}
