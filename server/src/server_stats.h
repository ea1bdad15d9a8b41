// The server's stats object (docs/stats.md): what STATS answers and
// Server::StatsJson returns, built from Server::Impl's rings (each Scheduler's
// counters and its Source's), its options and what it probed at start.
//
// Thread-safety: reads only what Impl sets before its threads start, and the
// Schedulers, Sources and ControlLoop through their thread-safe counters; so
// it may run on any thread (the control thread, a user's).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server_impl.h"

namespace batchcast {

// The stats of `impl` as JSON text. Text in the stats (consumer names, the
// dataset path) may be any bytes: invalid UTF-8 is replaced (U+FFFD), never
// a throw. Should building them fail, an object with the server's name, pid
// and the error.
std::string ServerStatsJson(const Server::Impl& impl);

// The stats object of `impl`, as ServerStatsJson writes it (the metrics
// endpoint renders it too: metrics_render.h). Throws what building it
// throws.
nlohmann::json ServerStats(const Server::Impl& impl);

}  // namespace batchcast
