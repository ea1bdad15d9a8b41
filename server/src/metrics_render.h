// RenderMetrics: the server's stats as Prometheus metrics (docs/metrics.md).
//
// One source of truth: the metrics are made from the stats object, the same
// data as the stats JSON (docs/stats.md; Server::Impl::Stats), at each
// scrape, so the two never disagree on a value read at the same moment.
// Every series carries the label `server` (the server's name); a ring's
// series `ring` (its device: cpu, cuda:N); a consumer's `consumer` (its
// name), `consumer_id` (the server's number for it, which keeps two
// consumers of one name apart) and, for a rank of a group, `group` and
// `rank`. A field missing from the stats (a Producer has no source, a
// server without --epochs no stream end) leaves its series out.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "metrics_text.h"

namespace batchcast {

// The exposition text of `stats` (a stats object as docs/stats.md
// describes it).
std::string RenderMetrics(const nlohmann::json& stats);

// Every family RenderMetrics may write, in the order it writes them
// (docs/metrics.md lists each).
std::span<const MetricFamily* const> MetricFamilies();

}  // namespace batchcast
