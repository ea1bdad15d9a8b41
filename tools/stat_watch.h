// WatchStats: the loop of `batchcast-server stat NAME --watch`: query the
// server's stats every interval and show them (tools/stat_view.h):
//   - on a terminal, a compact view redrawn in place (ANSI cursor movement);
//   - otherwise plain text lines, stamped with the local time (a log or a pipe);
//   - with --json, one stats object per line (the machine interface).
// It runs until `stop` becomes non-zero (Ctrl-C: exit status 0) or the server
// cannot be reached (a clear message on `err`, exit status 1).
#pragma once

#include <atomic>
#include <functional>
#include <ostream>
#include <string>

#include "batchcast/core/status.h"

namespace batchcast {

struct TerminalSize {
  int columns = 0;  // 0: unknown
  int rows = 0;
};

struct WatchOptions {
  std::string name;         // the server's name or endpoint, for messages
  double interval_s = 1.0;  // between two queries
  bool json = false;        // one JSON object per line
  bool terminal = false;    // redraw in place
  std::function<TerminalSize()> terminal_size = [] { return TerminalSize{}; };
};

// Returns the stats JSON text of the server (QueryStats), or why not.
using StatsQuery = std::function<Result<std::string>()>;

// Returns the process exit status (see above).
int WatchStats(const WatchOptions& options, const StatsQuery& query, const std::atomic<int>& stop,
               std::ostream& out, std::ostream& err);

}  // namespace batchcast
