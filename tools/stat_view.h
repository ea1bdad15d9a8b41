// What `batchcast-server` shows a person of a server's stats. The stats JSON
// (Server::StatsJson, QueryStats, `stat NAME --json`) is the machine
// interface; its fields are listed in docs/stats.md. Here:
//   StatsReport  `batchcast-server stat NAME`: everything, once;
//   StatusLine   `batchcast-server serve`: one line per status interval;
//   WatchView    `batchcast-server stat NAME --watch`: a compact view with
//                rates computed from two successive stats.
//
// Stats a view wants that the server does not give yet are hooks: when the
// fields named in kStageTimesField / kConsumerWaitField appear, the view
// shows them (as the share of the interval spent); until then it leaves them
// out.
//
// Pure formatting: no I/O, no clock (tools/stat_watch.h runs the loop).
// Thread-compatible.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace batchcast {

// Producer time per pipeline stage: an object {stage: cumulative seconds},
// e.g. {"read": 1.5, "decode": 20.1, "augment": 4.2}.
inline constexpr char kStageTimesField[] = "producer_stage_s";
// Per consumer: cumulative seconds its Next() waited for data.
inline constexpr char kConsumerWaitField[] = "wait_s";

// 950, 12.3k, 1.23M.
std::string FormatCount(double v);

// The full report of `batchcast-server stat NAME` (several lines, each ending
// in '\n').
std::string StatsReport(const nlohmann::json& stats);

// "NAME: 12.3k samples/s | producer epoch 2 | 3 consumers | slowest lag 1.5
// slots | published N | COUNTER V ..." and, with several rings, "| decoded
// per ring 25% 75%" (each ring's share so far) (`rate`: samples/s, computed
// by the caller).
std::string StatusLine(const nlohmann::json& stats, double rate);

class WatchView {
 public:
  // Takes a stats sample read at `time_s` (seconds on a monotonic clock).
  // Rates are computed against the previous sample; a sample of another
  // server process (its pid changed: restarted) starts over.
  void Update(nlohmann::json stats, double time_s);

  // The compact view for a terminal: header, producer, stages (when the
  // stats have them), ring, each ring of a server of several (its decode
  // rate and share), source counters, then one row per consumer.
  // Lines are cut at `width` columns and the view at `height` - 1 lines
  // (0: no limit; the last consumer rows give way to "... N more"), so that
  // redrawing in place is not broken by wrapped or scrolled lines.
  std::vector<std::string> Frame(int width = 0, int height = 0) const;
  // The same as plain text lines for a log or a pipe: one producer line, one
  // per ring of a server of several, and one per consumer, each starting
  // with `stamp` and the server's name.
  std::vector<std::string> Lines(const std::string& stamp) const;

 private:
  // Per second between the two samples of field `key` of `cur` and `prev`
  // (objects), or nullopt without a previous sample or field.
  std::optional<double> Rate(const nlohmann::json& cur, const nlohmann::json* prev,
                             const char* key) const;
  // A server of several rings: each ring's rates between the two samples
  // (what it decoded, its share of the node's decode, the bytes its
  // consumers got copied from other rings); empty for one ring.
  struct RingRate {
    std::string name;  // "ring 0 cuda:0"
    std::optional<double> decoded, peer_bytes, share;
    std::optional<double> turn_wait;  // share of the time waiting for its turn
  };
  std::vector<RingRate> RingRates() const;
  // The previous sample's entry of consumer `id`, or nullptr.
  const nlohmann::json* PrevConsumer(uint64_t id) const;
  // "read 5%  decode 61%" from kStageTimesField, or "" without it.
  std::string StageShares(const char* sep) const;

  std::optional<nlohmann::json> prev_;
  std::optional<nlohmann::json> cur_;
  double dt_ = 0;  // seconds between prev_ and cur_
  double time_s_ = 0;
};

}  // namespace batchcast
