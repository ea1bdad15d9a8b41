#include "tools/stat_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <utility>

namespace batchcast {
namespace {

using nlohmann::json;

uint64_t Count(const json& j, const char* key) { return j.value(key, uint64_t{0}); }

// "12%", or "-" when unknown.
std::string Percent(std::optional<double> fraction) {
  return fraction ? fmt::format("{:.0f}%", *fraction * 100) : "-";
}

std::string RateText(std::optional<double> rate) { return rate ? FormatCount(*rate) : "-"; }
std::string BytesRateText(std::optional<double> rate) {
  return rate ? FormatCount(*rate) + "B/s" : "-";
}

// 45s, 3m05s, 2h07m.
std::string Uptime(double s) {
  const auto t = static_cast<int64_t>(s);
  if (t < 60) return fmt::format("{}s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
}

double LagSlots(const json& consumer, const json& stats) {
  const double batch = static_cast<double>(std::max<uint64_t>(1, Count(stats, "batch_size")));
  return static_cast<double>(Count(consumer, "lag_samples")) / batch;
}

std::string EpochProgress(const json& j) {
  const uint64_t len = std::max<uint64_t>(1, Count(j, "epoch_len"));
  return fmt::format(
      "epoch {} ({:.0f}%)", Count(j, "producer_epoch"),
      100.0 * static_cast<double>(Count(j, "samples_published") % len) / static_cast<double>(len));
}

std::string SlotCounts(const json& j) {
  const json& s = j.contains("slots") ? j["slots"] : json::object();
  return fmt::format("free {}  writing {}  ready {}  leased {}", Count(s, "free"),
                     Count(s, "writing"), Count(s, "ready"), Count(s, "leased"));
}

// " group NAME rank R/W" for a rank of a consumer group, else "".
std::string GroupText(const json& consumer) {
  if (!consumer.contains("group")) return "";
  return fmt::format(" group {} rank {}/{}", consumer.value("group", "?"), Count(consumer, "rank"),
                     Count(consumer, "world_size"));
}

// The stats' `rings` (docs/stats.md), or null.
const json* RingList(const json& j) {
  return j.contains("rings") && j["rings"].is_array() ? &j["rings"] : nullptr;
}

// A server of several rings (docs/stats.md `rings`); one ring: none listed.
const json* Rings(const json& j) {
  const json* rings = RingList(j);
  return rings != nullptr && rings->size() > 1 ? rings : nullptr;
}

// The entry of a server of one ring, whose `rings` lists it alone; null for
// several (Rings) or none.
const json* OnlyRing(const json& j) {
  const json* rings = RingList(j);
  return rings != nullptr && rings->size() == 1 ? &(*rings)[0] : nullptr;
}

// A ring that accepts attached producers (Note [Attached producers]): ",
// decoded by pid N (attached)" while a trainer's process decodes it, ", taken
// back N times" once the server took it back; "" for the others.
std::string AttachedText(const json& ring) {
  std::string out;
  if (const uint64_t pid = Count(ring, "attached_pid"); pid != 0)
    out += fmt::format(", decoded by pid {} (attached)", pid);
  if (const uint64_t back = Count(ring, "attached_detached"); back > 0)
    out += fmt::format(", taken back {} time{}", back, back == 1 ? "" : "s");
  return out;
}

// What held a ring's producer back (docs/stats.md): its waits for its turn
// and the batches it had not read ahead; nothing while both are 0.
std::string HeldBackText(const json& ring) {
  std::string out;
  if (const double s = ring.value("turn_wait_s", 0.0); s > 0)
    out += fmt::format(", waited {:.1f} s for its turn", s);
  if (const uint64_t misses = Count(ring, "read_ahead_misses"); misses > 0)
    out += fmt::format(", {} batch{} not read ahead", misses, misses == 1 ? "" : "es");
  return out;
}

// Each value's share of their sum: nullopt for an unknown value, and for
// every value while the known ones sum to 0.
std::vector<std::optional<double>> SharesOf(const std::vector<std::optional<double>>& values) {
  double total = 0;
  for (const std::optional<double>& v : values) total += v.value_or(0);
  std::vector<std::optional<double>> out;
  for (const std::optional<double>& v : values) {
    out.push_back(v && total > 0 ? std::optional<double>(*v / total) : std::nullopt);
  }
  return out;
}

// Each ring's share of the samples decoded so far (nullopt before any).
std::vector<std::optional<double>> DecodedShares(const json& rings) {
  std::vector<std::optional<double>> decoded;
  for (const json& r : rings) decoded.push_back(static_cast<double>(Count(r, "samples_decoded")));
  return SharesOf(decoded);
}

// "by demand (--placement demand)": how the stream's batches are placed.
std::string PlacementText(const json& j) {
  const std::string p = j.value("placement", "");
  return p.empty() ? "?"
                   : (p == "demand" ? "by demand" : "round robin") + std::string(" (") +
                         "--placement " + p + ")";
}

std::string Cut(std::string line, int width) {
  if (width > 0 && line.size() > static_cast<size_t>(width))
    line.resize(static_cast<size_t>(width));
  return line;
}

}  // namespace

std::string FormatCount(double v) {
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

std::string StatusLine(const json& j, double rate) {
  std::ostringstream out;
  const size_t consumers = j.value("consumers", json::array()).size();
  out << j.value("name", "?") << ": " << FormatCount(rate) << " samples/s | producer epoch "
      << Count(j, "producer_epoch") << " | " << consumers << " consumer"
      << (consumers == 1 ? "" : "s") << " | slowest lag "
      << fmt::format("{:.1f}", j.value("slowest_lag_slots", 0.0)) << " slots | published "
      << Count(j, "samples_published");
  if (j.contains("source_counters")) {
    for (const auto& [k, v] : j["source_counters"].items()) out << " | " << k << " " << v;
  }
  if (const json* rings = Rings(j)) {
    out << " | decoded per ring";
    for (const std::optional<double>& share : DecodedShares(*rings)) out << " " << Percent(share);
  }
  return out.str();
}

std::string StatsReport(const json& j) {
  std::ostringstream out;
  const json& slots = j.contains("slots") ? j["slots"] : json::object();
  out << "server " << j.value("name", "?") << " (pid " << Count(j, "pid") << ") on "
      << j.value("endpoint", "?") << "\n";
  if (j.contains("source")) out << "  source:    " << j["source"].get<std::string>() << "\n";
  if (Count(j, "refused_connections") > 0) {
    out << "  refused:   " << Count(j, "refused_connections")
        << " tcp:// connections without the key (README \"Security\")\n";
  }
  out << "  device:    " << j.value("device", "?") << "\n"
      << "  ring:      " << Count(j, "window") << " slots x " << Count(j, "batch_size")
      << " samples; free " << Count(slots, "free") << ", writing " << Count(slots, "writing")
      << ", ready " << Count(slots, "ready") << ", leased " << Count(slots, "leased")
      << (OnlyRing(j) != nullptr ? AttachedText(*OnlyRing(j)) : "") << "\n"
      << "  stream:    " << Count(j, "samples_published") << " samples published ("
      << Count(j, "holes") << " holes: dropped files), epoch " << Count(j, "producer_epoch")
      << " (epoch_len " << Count(j, "epoch_len") << ")"
      << (j.value("stream_ended", false) ? ", ended" : "") << "\n"
      << "  policy:    lag " << j.value("lag_policy", "?") << "; producer blocked "
      << j.value("producer_blocked_s", 0.0) << " s; evicted " << Count(j, "consumers_evicted")
      << "; lost " << Count(j, "consumers_lost") << "; skip events " << Count(j, "skip_events")
      << "\n";
  if (const json* rings = Rings(j)) {
    // Each ring's part of the one stream: what it decoded, and how its
    // consumers read (zero-copy from it, or copied from the others).
    const std::vector<std::optional<double>> shares = DecodedShares(*rings);
    out << "  rings:     " << rings->size() << ", batches placed " << PlacementText(j) << "\n";
    for (size_t i = 0; i < rings->size(); ++i) {
      const json& r = (*rings)[i];
      out << "    ring " << Count(r, "ring") << " " << r.value("device", "?") << ": "
          << Count(r, "consumers") << " consumer" << (Count(r, "consumers") == 1 ? "" : "s") << ", "
          << Count(r, "samples_decoded") << " samples decoded (" << Percent(shares[i]) << "), "
          << Count(r, "batches_written") << " batches written; read " << Count(r, "batches_local")
          << " batches zero-copy, " << Count(r, "batches_from_peers") << " from other rings ("
          << FormatCount(static_cast<double>(Count(r, "peer_bytes"))) << " bytes copied)"
          << AttachedText(r) << HeldBackText(r) << "\n";
    }
  }
  if (j.contains("source_counters") && !j["source_counters"].empty()) {
    out << "  source counters:";
    for (const auto& [k, v] : j["source_counters"].items()) out << " " << k << "=" << v;
    out << "\n";
  }
  const json consumers = j.value("consumers", json::array());
  out << "  consumers: " << consumers.size() << "\n";
  for (const auto& c : consumers) {
    out << "    #" << Count(c, "id") << " " << c.value("name", "?") << " (pid " << Count(c, "pid")
        << "): batch " << Count(c, "batch_size") << ", epoch " << Count(c, "epoch") << " step "
        << Count(c, "step") << ", " << Count(c, "batches") << " batches, lag "
        << Count(c, "lag_samples") << " samples, skipped " << Count(c, "skipped") << ", leases "
        << Count(c, "leases") << GroupText(c) << (c.value("attached", true) ? "" : " (detached)")
        << "\n";
  }
  return out.str();
}

// ---- WatchView ----

void WatchView::Update(json stats, double time_s) {
  if (cur_ && Count(*cur_, "pid") == Count(stats, "pid")) {
    prev_ = std::move(cur_);
    dt_ = time_s - time_s_;
  } else {
    prev_.reset();  // the first sample, or another server process
    dt_ = 0;
  }
  cur_ = std::move(stats);
  time_s_ = time_s;
}

std::optional<double> WatchView::Rate(const json& cur, const json* prev, const char* key) const {
  if (prev == nullptr || dt_ <= 0 || !cur.contains(key) || !prev->contains(key) ||
      !cur[key].is_number() || !(*prev)[key].is_number()) {
    return std::nullopt;
  }
  const double d = cur[key].get<double>() - (*prev)[key].get<double>();
  if (d < 0) return std::nullopt;  // a counter went back
  return d / dt_;
}

std::vector<WatchView::RingRate> WatchView::RingRates() const {
  std::vector<RingRate> out;
  const json* rings = Rings(*cur_);
  if (rings == nullptr) return out;
  const json* prev = prev_ ? Rings(*prev_) : nullptr;
  std::vector<std::optional<double>> decoded;
  for (size_t i = 0; i < rings->size(); ++i) {
    const json& r = (*rings)[i];
    const json* pr = prev != nullptr && i < prev->size() ? &(*prev)[i] : nullptr;
    out.push_back({fmt::format("ring {} {}", Count(r, "ring"), r.value("device", "?")),
                   Rate(r, pr, "samples_decoded"), Rate(r, pr, "peer_bytes"), std::nullopt,
                   Rate(r, pr, "turn_wait_s")});
    decoded.push_back(out.back().decoded);
  }
  const std::vector<std::optional<double>> shares = SharesOf(decoded);
  for (size_t i = 0; i < out.size(); ++i) out[i].share = shares[i];
  return out;
}

const json* WatchView::PrevConsumer(uint64_t id) const {
  if (!prev_ || !prev_->contains("consumers")) return nullptr;
  for (const json& c : (*prev_)["consumers"]) {
    if (Count(c, "id") == id) return &c;
  }
  return nullptr;
}

std::string WatchView::StageShares(const char* sep) const {
  const json& j = *cur_;
  if (!j.contains(kStageTimesField) || !j[kStageTimesField].is_object()) return "";
  const json* prev =
      prev_ && prev_->contains(kStageTimesField) ? &(*prev_)[kStageTimesField] : nullptr;
  std::string out;
  for (const auto& [stage, _] : j[kStageTimesField].items()) {
    out += (out.empty() ? "" : sep) + stage + " " +
           Percent(Rate(j[kStageTimesField], prev, stage.c_str()));
  }
  return out;
}

std::vector<std::string> WatchView::Frame(int width, int height) const {
  if (!cur_) return {};
  const json& j = *cur_;
  const json* prev = prev_ ? &*prev_ : nullptr;
  std::vector<std::string> lines;
  std::string head = fmt::format("{} (pid {}) on {}, {}, up {}", j.value("name", "?"),
                                 Count(j, "pid"), j.value("endpoint", "?"), j.value("device", "?"),
                                 Uptime(j.value("uptime_s", 0.0)));
  if (j.contains("mps") && j["mps"].is_boolean())
    head += j["mps"].get<bool>() ? ", MPS on" : ", MPS off";
  else if (j.contains("mps") && j["mps"].is_string())
    head += ", MPS " + j["mps"].get<std::string>();
  lines.push_back(head);
  lines.push_back(fmt::format("producer  {} samples/s  {}  published {}  blocked {}{}",
                              RateText(Rate(j, prev, "samples_published")), EpochProgress(j),
                              FormatCount(static_cast<double>(Count(j, "samples_published"))),
                              Percent(Rate(j, prev, "producer_blocked_s")),
                              j.value("stream_ended", false) ? "  stream ended" : ""));
  if (std::string stages = StageShares("  "); !stages.empty())
    lines.push_back("stages    " + stages);
  lines.push_back(fmt::format("ring      {} slots x {}: {}", Count(j, "window"),
                              Count(j, "batch_size"), SlotCounts(j)));
  if (const std::vector<RingRate> rings = RingRates(); !rings.empty()) {
    lines.push_back(fmt::format("rings     {}, batches placed {}", rings.size(), PlacementText(j)));
    for (const RingRate& r : rings) {
      lines.push_back(fmt::format(
          "  {:<14}  decoded {:>7}/s  {:>4} of the node  copied in {}  waiting for its turn {}",
          r.name, RateText(r.decoded), Percent(r.share), BytesRateText(r.peer_bytes),
          Percent(r.turn_wait)));
    }
  }
  if (j.contains("source_counters") && !j["source_counters"].empty()) {
    std::string counters = "source    ";
    for (const auto& [k, v] : j["source_counters"].items()) {
      counters += (counters.back() == ' ' ? "" : "  ") + k + " " + v.dump();
    }
    lines.push_back(counters);
  }
  const json consumers = j.value("consumers", json::array());
  std::string title = fmt::format("consumers {}", consumers.size());
  const uint64_t evicted = Count(j, "consumers_evicted"), lost = Count(j, "consumers_lost"),
                 skips = Count(j, "skip_events");
  if (evicted + lost + skips > 0) {
    title += fmt::format(" (evicted {}, lost {}, skip events {})", evicted, lost, skips);
  }
  lines.push_back(title);
  bool wait = false;
  for (const json& c : consumers) wait = wait || c.contains(kConsumerWaitField);
  if (!consumers.empty()) {
    lines.push_back(fmt::format("  {:>4}  {:<16}  {:>5}  {:>7}  {:>10}  {:>9}  {:>6}  {:>7}{}",
                                "id", "name", "batch", "rate/s", "epoch:step", "lag/slots",
                                "leases", "skipped", wait ? "   wait" : ""));
  }
  for (const json& c : consumers) {
    const json* pc = PrevConsumer(Count(c, "id"));
    std::string row = fmt::format(
        "  {:>4}  {:<16.16}  {:>5}  {:>7}  {:>10}  {:>9.1f}  {:>6}  {:>7}", Count(c, "id"),
        c.value("name", "?"), Count(c, "batch_size"), RateText(Rate(c, pc, "samples")),
        fmt::format("{}:{}", Count(c, "epoch"), Count(c, "step")), LagSlots(c, j),
        Count(c, "leases"), Count(c, "skipped"));
    if (wait) row += fmt::format("  {:>5}", Percent(Rate(c, pc, kConsumerWaitField)));
    row += GroupText(c);
    if (!c.value("attached", true)) row += "  detached";
    lines.push_back(row);
  }
  if (height > 1 && lines.size() > static_cast<size_t>(height - 1)) {
    const size_t keep = static_cast<size_t>(std::max(1, height - 2));
    const size_t hidden = lines.size() - keep;
    lines.resize(keep);
    lines.push_back(fmt::format("  ... {} more", hidden));
  }
  for (std::string& l : lines) l = Cut(std::move(l), width);
  return lines;
}

std::vector<std::string> WatchView::Lines(const std::string& stamp) const {
  if (!cur_) return {};
  const json& j = *cur_;
  const json* prev = prev_ ? &*prev_ : nullptr;
  const std::string who = stamp + " " + j.value("name", "?");
  const json consumers = j.value("consumers", json::array());
  std::string producer =
      fmt::format("{} producer {} samples/s {} blocked {} ring {} consumers {}", who,
                  RateText(Rate(j, prev, "samples_published")), EpochProgress(j),
                  Percent(Rate(j, prev, "producer_blocked_s")), SlotCounts(j), consumers.size());
  if (std::string stages = StageShares(" "); !stages.empty()) producer += " stages " + stages;
  if (j.value("stream_ended", false)) producer += " stream ended";
  std::vector<std::string> lines{producer};
  for (const RingRate& r : RingRates()) {
    lines.push_back(fmt::format("{} {} decoded {} samples/s share {} copied in {} turn wait {}",
                                who, r.name, RateText(r.decoded), Percent(r.share),
                                BytesRateText(r.peer_bytes), Percent(r.turn_wait)));
  }
  for (const json& c : consumers) {
    const json* pc = PrevConsumer(Count(c, "id"));
    std::string line = fmt::format(
        "{} consumer #{} {} batch {} rate {} samples/s epoch {} step {} lag {:.1f} slots leases {} "
        "skipped {}",
        who, Count(c, "id"), c.value("name", "?"), Count(c, "batch_size"),
        RateText(Rate(c, pc, "samples")), Count(c, "epoch"), Count(c, "step"), LagSlots(c, j),
        Count(c, "leases"), Count(c, "skipped"));
    if (c.contains(kConsumerWaitField)) line += " wait " + Percent(Rate(c, pc, kConsumerWaitField));
    line += GroupText(c);
    if (!c.value("attached", true)) line += " detached";
    lines.push_back(line);
  }
  return lines;
}

}  // namespace batchcast
