// batchcast-server: run a batchcast producer, or query a running one.
//
//   batchcast-server serve [DATA] [options]   serve a dataset (or --synthetic N)
//   batchcast-server serve --help-markdown    the options as Markdown (docs/options.md)
//   batchcast-server stat NAME [--json]       print a running server's stats
//   batchcast-server stat NAME --watch        ... refreshed every --interval seconds
//   batchcast-server key [FILE] [--new]       the CURVE key of tcp:// endpoints
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "batchcast/client/consumer.h"
#include "batchcast/server/option_table.h"
#include "batchcast/server/server.h"
#include "core/src/logging.h"
#include "tools/key_command.h"
#include "tools/server_options_cli.h"
#include "tools/stat_view.h"
#include "tools/stat_watch.h"

namespace {

std::atomic<int> g_signal{0};
std::atomic<bool> g_serving{false};
// Before the server is up (a long dataset scan), SIGINT/SIGTERM end the
// process at once (nothing to clean up yet; a ring or socket made in the
// last moments is reclaimed by the next server, Note [Server instance lock]);
// afterwards they stop the server cleanly.
void OnSignal(int sig) {
  if (!g_serving.load()) {  // `serve` while starting
    static const char kMsg[] = "batchcast-server: stopped by a signal while starting\n";
    [[maybe_unused]] ssize_t n = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    _exit(128 + sig);
  }
  g_signal = sig;
}

batchcast::TerminalSize StdoutTerminalSize() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0) return {};
  return {ws.ws_col, ws.ws_row};
}

// Without MPS a trainer fed from this process gets the GPU by time slices
// shared with it: says so, with what to do instead, once at start (README,
// "PyTorch, one job"; docs/performance.md, "What to do").
void AdviseWithoutMps(const batchcast::Server& server) {
  const nlohmann::json j =
      nlohmann::json::parse(server.StatsJson(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("mps") || !j["mps"].is_boolean() || j["mps"].get<bool>()) {
    return;
  }
  std::cerr << "batchcast-server: MPS is off, so a trainer on this GPU fed from this process "
               "shares the GPU with it by time slices and loses part of its speed; for one "
               "job, run the server in the training process (batchcast.Server); for several, "
               "use MPS (batchcast-launch) or host the server in one of the jobs (README, "
               "\"Several jobs on one GPU\"; docs/performance.md); with a ring per GPU, let each "
               "trainer decode its own GPU's ring (batchcast.Loader(..., produce=True))\n";
}

// A number of seconds in [0, 1 day], finite: "" when it is one, else why not.
std::string SecondsInADay(const std::string& text) {
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) return "expected a number of seconds, got '" + text + "'";
  } catch (const std::exception&) {
    return "expected a number of seconds, got '" + text + "'";
  }
  if (!std::isfinite(v) || v < 0 || v > 86400) {
    return "expected seconds from 0 to 86400, got '" + text + "'";
  }
  return "";
}

int Serve(batchcast::ServerOptions options, double status_interval) {
  auto server = batchcast::Server::Start(options);
  if (!server.ok()) {
    std::cerr << "batchcast-server: " << server.status().ToString() << "\n";
    return 1;
  }
  g_serving = true;
  std::cerr << "batchcast-server: serving '" << options.name << "' on " << (*server)->endpoint()
            << " (Ctrl-C stops)\n";
  AdviseWithoutMps(**server);
  const bool tty = isatty(STDERR_FILENO);
  uint64_t last_published = 0;
  auto last_time = std::chrono::steady_clock::now();
  auto next_status = last_time;
  while (g_signal == 0) {
    if ((*server)->WaitFor(std::chrono::milliseconds(100))) break;
    const auto now = std::chrono::steady_clock::now();
    if (status_interval > 0 && now >= next_status) {
      nlohmann::json j =
          nlohmann::json::parse((*server)->StatsJson(), nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && !j.contains("error")) {
        const uint64_t published = j.value("samples_published", uint64_t{0});
        const double dt = std::chrono::duration<double>(now - last_time).count();
        const double rate = dt > 0 ? static_cast<double>(published - last_published) / dt : 0.0;
        last_published = published;
        last_time = now;
        if (tty) {
          std::cerr << "\r\033[K" << batchcast::StatusLine(j, rate) << std::flush;
        } else {
          std::cerr << batchcast::StatusLine(j, rate) << "\n";
        }
      }
      next_status = now + std::chrono::milliseconds(static_cast<int64_t>(status_interval * 1000));
    }
  }
  if (tty && status_interval > 0) std::cerr << "\n";
  if (g_signal != 0) std::cerr << "batchcast-server: stopping (signal " << g_signal << ")\n";
  (*server)->Stop();
  batchcast::Status s = (*server)->status();
  if (!s.ok()) {
    std::cerr << "batchcast-server: " << s.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{
      "batchcast-server: decode and augment each sample once, share batches with "
      "several training processes"};
  app.require_subcommand(1);
  app.fallthrough();  // --log-level may follow the subcommand
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));

  batchcast::ServerOptions o;
  double status_interval = 1.0;
  CLI::App* serve = app.add_subcommand("serve", "serve a dataset (or synthetic data) to consumers");
  // Every server option comes from the option table (batchcast/server/option_table.h);
  // errors are collected and reported after parsing, with the option's name.
  std::vector<batchcast::Status> option_errors;
  batchcast::AddServerOptions(serve, o, option_errors);
  serve->add_option("--status-interval", status_interval, "seconds between status lines (0 = none)")
      ->check(CLI::Validator(SecondsInADay, "SECONDS"))
      ->capture_default_str();
  bool help_markdown = false;
  serve->add_flag("--help-markdown", help_markdown,
                  "print the server options as Markdown (docs/options.md) and exit");

  std::string stat_name;
  bool stat_json = false, watch = false;
  double interval = 1.0;
  CLI::App* stat = app.add_subcommand("stat", "print a running server's stats");
  stat->add_option("name", stat_name, "server name or endpoint")->required();
  stat->add_flag("--json", stat_json, "print JSON (with --watch: one object per line)");
  CLI::Option* watch_flag = stat->add_flag(
      "--watch", watch, "refresh until Ctrl-C: a live view on a terminal, plain lines otherwise");
  stat->add_option("--interval", interval, "seconds between refreshes (with --watch)")
      ->check(CLI::PositiveNumber & CLI::Validator(SecondsInADay, "SECONDS"))
      ->needs(watch_flag)
      ->capture_default_str();
  std::string stat_key_file;
  stat->add_option("--key-file", stat_key_file,
                   "tcp:// only: the server's key file (default: $BATCHCAST_KEY_FILE, else your "
                   "key on this machine)");

  std::string key_file;
  bool key_new = false;
  CLI::App* key = app.add_subcommand(
      "key", "print the CURVE key file of tcp:// endpoints (its path; made if missing)");
  key->add_option("file", key_file,
                  "a key file (default: $BATCHCAST_KEY_FILE, else your key in the runtime "
                  "directory)");
  key->add_flag("--new", key_new,
                "write a new key pair there, replacing the old one (running servers keep theirs "
                "until restarted)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  batchcast::SetLogLevel(log_level);

  if (*key) return batchcast::KeyCommand(key_file, key_new);

  if (*stat && watch) {
    g_serving = true;  // signals end the watch loop (exit 0), not the process
    signal(SIGINT, OnSignal);
    signal(SIGTERM, OnSignal);
    batchcast::WatchOptions w{stat_name, interval, stat_json, isatty(STDOUT_FILENO) != 0,
                              StdoutTerminalSize};
    auto query = [&] {
      return batchcast::QueryStats(stat_name, std::chrono::milliseconds(3000), stat_key_file);
    };
    return batchcast::WatchStats(w, query, g_signal, std::cout, std::cerr);
  }
  if (*stat) {
    auto r = batchcast::QueryStats(stat_name, std::chrono::milliseconds(3000), stat_key_file);
    if (!r.ok()) {
      std::cerr << "batchcast-server stat: " << r.status().ToString() << "\n";
      return 1;
    }
    const nlohmann::json j = nlohmann::json::parse(*r, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      std::cerr << "batchcast-server stat: the server's reply is not a JSON object\n";
      return 1;
    }
    if (j.contains("error")) {
      std::cerr << "batchcast-server stat: the server could not make its stats: "
                << j["error"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
      return 1;
    }
    if (stat_json) {
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << batchcast::StatsReport(j);
    }
    return 0;
  }

  if (help_markdown) {
    std::cout << batchcast::OptionTableMarkdown();
    return 0;
  }
  for (const batchcast::Status& e : option_errors) {
    std::cerr << "batchcast-server: " << e.message() << "\n";
  }
  if (!option_errors.empty()) return 2;
  for (batchcast::Status s : {o.Validate(), o.source.Validate()}) {
    if (!s.ok()) {
      std::cerr << "batchcast-server: " << s.message() << "\n";
      return 2;
    }
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  signal(SIGPIPE, SIG_IGN);
  return Serve(o, status_interval);
}

// Nothing a user types, a file name or a server's reply may abort the
// program: whatever escapes is reported (exit 1).
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "batchcast-server: unexpected error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "batchcast-server: unexpected error\n";
  }
  return 1;
}
