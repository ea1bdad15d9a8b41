#include "tools/stat_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "tools/stat_view.h"

namespace batchcast {
namespace {

using Clock = std::chrono::steady_clock;

std::string LocalTime() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

// Sleeps until `until` or until `stop` is set; true when stopped.
bool SleepUntil(Clock::time_point until, const std::atomic<int>& stop) {
  while (stop == 0) {
    const Clock::time_point now = Clock::now();
    if (now >= until) return false;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(until - now, std::chrono::milliseconds(50)));
  }
  return true;
}

}  // namespace

int WatchStats(const WatchOptions& options, const StatsQuery& query, const std::atomic<int>& stop,
               std::ostream& out, std::ostream& err) {
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.interval_s));
  const Clock::time_point start = Clock::now();
  WatchView view;
  bool answered = false;  // the server answered once
  size_t drawn = 0;       // lines of the frame on the screen
  Clock::time_point next = start;
  while (!SleepUntil(next, stop)) {
    next = std::max(next + interval, Clock::now());  // a slow answer delays, never bunches
    Result<std::string> text = query();
    if (stop != 0) break;
    nlohmann::json stats = nlohmann::json::parse(text.ok() ? *text : "", nullptr, false);
    if (!text.ok() || stats.is_discarded()) {
      const std::string why = text.ok() ? "unreadable stats" : text.status().ToString();
      if (answered) {
        err << "batchcast-server stat: server '" << options.name << "' went away: " << why << "\n";
      } else {
        err << "batchcast-server stat: " << why << "\n";
      }
      return 1;
    }
    answered = true;
    if (options.json) {
      out << stats.dump() << std::endl;
      continue;
    }
    view.Update(std::move(stats), std::chrono::duration<double>(Clock::now() - start).count());
    if (!options.terminal) {
      for (const std::string& line : view.Lines(LocalTime())) out << line << "\n";
      out.flush();
      continue;
    }
    // Back to the frame's first line, overwrite each line, clear what is left.
    std::string screen = drawn > 0 ? fmt::format("\033[{}A\r", drawn) : "";
    const TerminalSize size = options.terminal_size();
    const std::vector<std::string> frame = view.Frame(size.columns, size.rows);
    for (const std::string& line : frame) screen += line + "\033[K\n";
    out << screen << "\033[J" << std::flush;
    drawn = frame.size();
  }
  return 0;
}

}  // namespace batchcast
