#include "metrics_render.h"

#include <string_view>

#include "batchcast/core/version.h"

namespace batchcast {
namespace {

using json = nlohmann::json;
constexpr MetricType kCounter = MetricType::kCounter;
constexpr MetricType kGauge = MetricType::kGauge;

// ---- the families (docs/metrics.md) ----

// The server.
constexpr MetricFamily kInfo{
    "batchcast_server_info", kGauge,
    "Constant 1; the labels say the server's version, device(s), lag policy, MPS state and shard"};
constexpr MetricFamily kUptime{"batchcast_uptime_seconds", kGauge,
                               "Seconds since the server started"};
constexpr MetricFamily kRefused{
    "batchcast_refused_connections_total", kCounter,
    "tcp:// connections refused at their CURVE handshake (peers without the key)"};
constexpr MetricFamily kHandshakesCut{
    "batchcast_handshakes_cut_total", kCounter,
    "tcp:// connections closed in their handshake because too many were in one at once"};

// A ring and its producer.
constexpr MetricFamily kSamplesPublished{
    "batchcast_samples_published_total", kCounter,
    "Samples written to the ring (a file dropped at decode leaves a hole, not counted)"};
constexpr MetricFamily kHoles{"batchcast_holes_total", kCounter,
                              "Stream positions without a sample: files dropped at decode"};
constexpr MetricFamily kBatchesWritten{"batchcast_batches_written_total", kCounter,
                                       "Ring slots written: producer batches"};
constexpr MetricFamily kProducerEpoch{"batchcast_producer_epoch", kGauge,
                                      "The producer's epoch (from 0)"};
constexpr MetricFamily kEpochSamples{"batchcast_epoch_samples", kGauge,
                                     "Samples of a producer epoch (of this server's shard)"};
constexpr MetricFamily kBlocked{
    "batchcast_producer_blocked_seconds_total", kCounter,
    "Seconds the producer waited for a free ring slot: the consumers held it back"};
constexpr MetricFamily kStageSeconds{
    "batchcast_producer_stage_seconds_total", kCounter,
    "Seconds the producer spent per stage, summed over the stage's threads (slot_wait: "
    "waiting for a free slot)"};
constexpr MetricFamily kStageThreads{"batchcast_producer_stage_threads", kGauge,
                                     "Threads that may run the stage at once"};
constexpr MetricFamily kSlots{
    "batchcast_ring_slots", kGauge,
    "Ring slots by state: free, writing, ready (readable); leased: the ready slots that a "
    "consumer's lease pins"};
// Each ring of the server (Note [Placement]: one stream over the rings).
constexpr MetricFamily kRingDecoded{
    "batchcast_ring_samples_decoded_total", kCounter,
    "Samples decoded and written on this ring (each sample of the stream on one ring)"};
constexpr MetricFamily kRingLocal{"batchcast_ring_batches_local_total", kCounter,
                                  "Batches this ring's consumers read zero-copy from it"};
constexpr MetricFamily kRingFromPeers{
    "batchcast_ring_batches_from_peers_total", kCounter,
    "Batches this ring's consumers read (partly) from another ring, copied onto its device"};
constexpr MetricFamily kRingPeerBytes{
    "batchcast_ring_peer_bytes_total", kCounter,
    "Bytes copied from other rings onto this ring's device for its consumers"};
constexpr MetricFamily kRingReadAheadMisses{
    "batchcast_ring_read_ahead_misses_total", kCounter,
    "Batches of the stream this ring's producer began that were not the one it read ahead"};
constexpr MetricFamily kRingTurnWait{
    "batchcast_ring_turn_wait_seconds_total", kCounter,
    "Seconds this ring's producer waited for its turn: the stream's next batch was another "
    "ring's, which had not begun it"};
// A ring that accepts attached producers (Note [Attached producers]).
constexpr MetricFamily kRingHolderPid{
    "batchcast_ring_attached_pid", kGauge,
    "The pid of the process that decodes this ring (an attached producer), 0: the server itself"};
constexpr MetricFamily kRingHeldBatches{"batchcast_ring_attached_batches_total", kCounter,
                                        "Batches attached producers wrote on this ring"};
constexpr MetricFamily kRingTakenBack{
    "batchcast_ring_attached_detached_total", kCounter,
    "Times an attached producer of this ring left, failed or died and the server took the ring "
    "back"};
constexpr MetricFamily kCapacity{"batchcast_ring_capacity_slots", kGauge,
                                 "Ring slots in all (the window)"};
constexpr MetricFamily kSlotSamples{"batchcast_ring_slot_samples", kGauge,
                                    "Samples per ring slot (the producer batch)"};
constexpr MetricFamily kConsumers{"batchcast_consumers", kGauge, "Consumers attached to the ring"};
constexpr MetricFamily kSlowestLag{"batchcast_slowest_lag_samples", kGauge,
                                   "Samples the slowest attached consumer is behind the producer"};
constexpr MetricFamily kSlowestLagSlots{
    "batchcast_slowest_lag_slots", kGauge,
    "Ring slots the slowest attached consumer is behind the producer"};
constexpr MetricFamily kEvicted{"batchcast_consumers_evicted_total", kCounter,
                                "Consumers evicted by lag_policy=evict"};
constexpr MetricFamily kLost{"batchcast_consumers_lost_total", kCounter,
                             "Consumers dropped as dead (silent past the heartbeat timeout)"};
constexpr MetricFamily kSkipEvents{"batchcast_skip_events_total", kCounter,
                                   "Skips of lag_policy=skip"};
constexpr MetricFamily kStreamEnded{"batchcast_stream_ended", kGauge,
                                    "1 once the stream has ended (--epochs), else 0"};
constexpr MetricFamily kStreamEnd{"batchcast_stream_end_samples", kGauge,
                                  "Samples the stream will have in all (with --epochs)"};

// The source.
constexpr MetricFamily kFiles{"batchcast_source_files", kGauge, "Files of the dataset"};
constexpr MetricFamily kDropped{
    "batchcast_files_dropped_total", kCounter,
    "Files left out: at the header scan (at=scan) or since their decode failed or their read "
    "gave up (at=decode)"};
constexpr MetricFamily kSamplesDropped{
    "batchcast_samples_dropped_total", kCounter,
    "Samples missing from the stream so far because their file was dropped at decode"};
constexpr MetricFamily kReadRetries{"batchcast_read_retries_total", kCounter,
                                    "Failed file reads that were retried"};
constexpr MetricFamily kReadsRecovered{"batchcast_reads_recovered_total", kCounter,
                                       "File reads that succeeded after a retry"};
constexpr MetricFamily kUnreadable{"batchcast_files_unreadable_total", kCounter,
                                   "File reads given up after their retries"};
constexpr MetricFamily kDecoded{
    "batchcast_images_decoded_total", kCounter,
    "GPU source: images decoded by the hardware engine (on=gpu) or on the CPU (on=cpu)"};
constexpr MetricFamily kSourceCounter{
    "batchcast_source_counter", kGauge,
    "A counter of the source without a series of its own, by its stats name (docs/stats.md, "
    "source_counters)"};

// A consumer.
constexpr MetricFamily kWait{
    "batchcast_consumer_wait_seconds_total", kCounter,
    "Seconds the server held a batch request of the consumer without data to answer it "
    "(rate near 1: the consumer is input-bound)"};
constexpr MetricFamily kConsumerSamples{"batchcast_consumer_samples_total", kCounter,
                                        "Samples served to the consumer since it connected"};
constexpr MetricFamily kConsumerBatches{"batchcast_consumer_batches_total", kCounter,
                                        "Batches served to the consumer since it connected"};
constexpr MetricFamily kLag{"batchcast_consumer_lag_samples", kGauge,
                            "Samples published that the consumer has not been served yet"};
constexpr MetricFamily kConsumerEpoch{"batchcast_consumer_epoch", kGauge,
                                      "The consumer's epoch (its rank's in a group)"};
constexpr MetricFamily kConsumerStep{"batchcast_consumer_step", kGauge,
                                     "The consumer's batch number in its epoch"};
constexpr MetricFamily kSkipped{"batchcast_consumer_skipped_samples_total", kCounter,
                                "Samples the consumer skipped (lag_policy=skip; a group's)"};
constexpr MetricFamily kPassedOver{
    "batchcast_consumer_passed_over_samples_total", kCounter,
    "Samples passed over because the ring held too few to make a batch (mostly holes)"};
constexpr MetricFamily kLeases{"batchcast_consumer_leases", kGauge,
                               "Batches the consumer holds (delivered, not released)"};
constexpr MetricFamily kPending{"batchcast_consumer_pending_requests", kGauge,
                                "Batch requests of the consumer waiting for data"};
constexpr MetricFamily kConnected{"batchcast_consumer_connected_seconds", kGauge,
                                  "Seconds since the consumer connected"};
constexpr MetricFamily kAttached{
    "batchcast_consumer_attached", kGauge,
    "1 while attached; 0 after it left or was evicted while it still holds leases"};
constexpr MetricFamily kConsumerBatch{"batchcast_consumer_batch_samples", kGauge,
                                      "The consumer's batch size"};

// A consumer group.
constexpr MetricFamily kGroupState{
    "batchcast_group_state", kGauge,
    "1 for the group's state (forming, running, broken, failed), 0 for the others"};
constexpr MetricFamily kGroupWorld{"batchcast_group_world_size", kGauge, "Ranks of the group"};
constexpr MetricFamily kGroupRanks{"batchcast_group_ranks_connected", kGauge,
                                   "Ranks of the group connected"};
constexpr MetricFamily kGroupRounds{
    "batchcast_group_rounds_total", kCounter,
    "Rounds (world_size batches) handed out since the group formed"};
constexpr MetricFamily kGroupSkipped{"batchcast_group_skipped_samples_total", kCounter,
                                     "Samples the group skipped (lag_policy=skip)"};

constexpr const MetricFamily* kAll[] = {
    &kInfo,
    &kUptime,
    &kRefused,
    &kHandshakesCut,
    &kSamplesPublished,
    &kHoles,
    &kBatchesWritten,
    &kProducerEpoch,
    &kEpochSamples,
    &kBlocked,
    &kStageSeconds,
    &kStageThreads,
    &kSlots,
    &kCapacity,
    &kSlotSamples,
    &kConsumers,
    &kSlowestLag,
    &kSlowestLagSlots,
    &kEvicted,
    &kLost,
    &kSkipEvents,
    &kStreamEnded,
    &kStreamEnd,
    &kFiles,
    &kDropped,
    &kSamplesDropped,
    &kReadRetries,
    &kReadsRecovered,
    &kUnreadable,
    &kDecoded,
    &kSourceCounter,
    &kWait,
    &kConsumerSamples,
    &kConsumerBatches,
    &kLag,
    &kConsumerEpoch,
    &kConsumerStep,
    &kSkipped,
    &kPassedOver,
    &kLeases,
    &kPending,
    &kConnected,
    &kAttached,
    &kConsumerBatch,
    &kGroupState,
    &kGroupWorld,
    &kGroupRanks,
    &kGroupRounds,
    &kGroupSkipped,
    &kRingDecoded,
    &kRingLocal,
    &kRingFromPeers,
    &kRingPeerBytes,
    &kRingHolderPid,
    &kRingHeldBatches,
    &kRingTakenBack,
    &kRingTurnWait,
    &kRingReadAheadMisses,
};

// Source counters with a series of their own: the family and its labels.
struct SourceSeries {
  std::string_view counter;
  const MetricFamily* family;
  std::string_view label, value;  // "" = no label
};
constexpr SourceSeries kSourceSeries[] = {
    {"files", &kFiles, "", ""},
    {"files_dropped_at_scan", &kDropped, "at", "scan"},
    {"files_dropped_at_decode", &kDropped, "at", "decode"},
    {"samples_dropped", &kSamplesDropped, "", ""},
    {"read_retries", &kReadRetries, "", ""},
    {"reads_recovered", &kReadsRecovered, "", ""},
    {"files_unreadable", &kUnreadable, "", ""},
    {"gpu_decoded", &kDecoded, "on", "gpu"},
    {"cpu_decoded", &kDecoded, "on", "cpu"},
};

constexpr std::string_view kGroupStates[] = {"forming", "running", "broken", "failed"};

// ---- reading the stats ----

const json* Field(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string Text(const json& object, std::string_view key) {
  const json* v = Field(object, key);
  if (v == nullptr) return "";
  return v->is_string() ? v->get<std::string>() : v->dump();
}

// A number or bool as a sample's value; false for anything else.
bool Number(const json* v, double& out) {
  if (v == nullptr) return false;
  if (v->is_boolean()) {
    out = v->get<bool>() ? 1 : 0;
    return true;
  }
  if (!v->is_number()) return false;
  out = v->get<double>();
  return true;
}

MetricLabels With(MetricLabels labels, std::string_view name, std::string value) {
  labels.emplace_back(name, std::move(value));
  return labels;
}

// Writes `object[key]` as a sample of `family`, when it is a number.
void Put(MetricsText& out, const MetricFamily& family, const MetricLabels& labels,
         const json& object, std::string_view key) {
  double v = 0;
  if (Number(Field(object, key), v)) out.Add(family, labels, v);
}

// Each number of `object` (stage -> seconds, state -> slots) as a sample
// labelled `label`.
void PutEach(MetricsText& out, const MetricFamily& family, const MetricLabels& labels,
             const json* object, std::string_view label) {
  if (object == nullptr || !object->is_object()) return;
  for (const auto& [k, v] : object->items()) {
    double value = 0;
    if (Number(&v, value)) out.Add(family, With(labels, label, k), value);
  }
}

void RenderSource(MetricsText& out, const MetricLabels& ring, const json* counters) {
  if (counters == nullptr || !counters->is_object()) return;
  for (const auto& [name, v] : counters->items()) {
    double value = 0;
    if (!Number(&v, value)) continue;
    const SourceSeries* series = nullptr;
    for (const SourceSeries& s : kSourceSeries) {
      if (s.counter == name) series = &s;
    }
    if (series == nullptr) {
      out.Add(kSourceCounter, With(ring, "counter", name), value);
    } else if (series->label.empty()) {
      out.Add(*series->family, ring, value);
    } else {
      out.Add(*series->family, With(ring, series->label, std::string(series->value)), value);
    }
  }
}

void RenderConsumer(MetricsText& out, const MetricLabels& ring, const json& c) {
  MetricLabels labels = With(ring, "consumer", Text(c, "name"));
  labels = With(std::move(labels), "consumer_id", Text(c, "id"));
  if (Field(c, "group") != nullptr) {
    labels = With(std::move(labels), "group", Text(c, "group"));
    labels = With(std::move(labels), "rank", Text(c, "rank"));
  }
  Put(out, kWait, labels, c, "wait_s");
  Put(out, kConsumerSamples, labels, c, "samples");
  Put(out, kConsumerBatches, labels, c, "batches");
  Put(out, kLag, labels, c, "lag_samples");
  Put(out, kConsumerEpoch, labels, c, "epoch");
  Put(out, kConsumerStep, labels, c, "step");
  Put(out, kSkipped, labels, c, "skipped");
  Put(out, kPassedOver, labels, c, "samples_passed_over");
  Put(out, kLeases, labels, c, "leases");
  Put(out, kPending, labels, c, "pending");
  Put(out, kConnected, labels, c, "connected_s");
  Put(out, kAttached, labels, c, "attached");
  Put(out, kConsumerBatch, labels, c, "batch_size");
}

void RenderGroup(MetricsText& out, const MetricLabels& ring, const json& g) {
  const MetricLabels labels = With(ring, "group", Text(g, "name"));
  const std::string state = Text(g, "state");
  for (std::string_view s : kGroupStates) {
    out.Add(kGroupState, With(labels, "state", std::string(s)), s == state ? 1 : 0);
  }
  Put(out, kGroupWorld, labels, g, "world_size");
  // "0,1,3": the ranks connected.
  const std::string ranks = Text(g, "ranks");
  double connected = ranks.empty() ? 0 : 1;
  for (char ch : ranks) connected += ch == ',' ? 1 : 0;
  out.Add(kGroupRanks, labels, connected);
  Put(out, kGroupRounds, labels, g, "rounds");
  Put(out, kGroupSkipped, labels, g, "skipped");
}

// The server's stream series: `r` is the stats object; its source counters
// when `with_source` (one ring; with several, the dataset's are rendered by
// RenderDatasetCounters and each ring's own by RenderRings).
void RenderRing(MetricsText& out, const MetricLabels& server, const std::string& device,
                const json& r, bool with_source) {
  const MetricLabels ring = With(server, "ring", device);
  Put(out, kSamplesPublished, ring, r, "samples_published");
  Put(out, kHoles, ring, r, "holes");
  Put(out, kBatchesWritten, ring, r, "batches_written");
  Put(out, kProducerEpoch, ring, r, "producer_epoch");
  Put(out, kEpochSamples, ring, r, "epoch_len");
  Put(out, kBlocked, ring, r, "producer_blocked_s");
  PutEach(out, kStageSeconds, ring, Field(r, "producer_stage_s"), "stage");
  PutEach(out, kStageThreads, ring, Field(r, "producer_stage_threads"), "stage");
  PutEach(out, kSlots, ring, Field(r, "slots"), "state");
  Put(out, kCapacity, ring, r, "window");
  Put(out, kSlotSamples, ring, r, "batch_size");
  Put(out, kSlowestLag, ring, r, "slowest_lag_samples");
  Put(out, kSlowestLagSlots, ring, r, "slowest_lag_slots");
  Put(out, kEvicted, ring, r, "consumers_evicted");
  Put(out, kLost, ring, r, "consumers_lost");
  Put(out, kSkipEvents, ring, r, "skip_events");
  Put(out, kStreamEnded, ring, r, "stream_ended");
  Put(out, kStreamEnd, ring, r, "stream_end");
  if (with_source) RenderSource(out, ring, Field(r, "source_counters"));
  const json* consumers = Field(r, "consumers");
  if (consumers != nullptr && consumers->is_array()) {
    double attached = 0;
    for (const json& c : *consumers) {
      RenderConsumer(out, ring, c);
      attached += c.is_object() && c.value("attached", false) ? 1 : 0;
    }
    out.Add(kConsumers, ring, attached);
  }
  const json* groups = Field(r, "groups");
  if (groups != nullptr && groups->is_array()) {
    for (const json& g : *groups) RenderGroup(out, ring, g);
  }
}

// With several rings: the counters of the dataset the rings' sources share,
// which the stats give at the top level only (the top level's
// `source_counters` not in a ring's), as the server's (ring: its device list).
void RenderDatasetCounters(MetricsText& out, const MetricLabels& server_ring, const json& stats,
                           const json& rings) {
  const json* top = Field(stats, "source_counters");
  if (top == nullptr || !top->is_object() || rings.empty()) return;
  const json* own = Field(rings[0], "source_counters");
  json shared = json::object();
  for (const auto& [k, v] : top->items()) {
    if (own == nullptr || !own->is_object() || !own->contains(k)) shared[k] = v;
  }
  RenderSource(out, server_ring, &shared);
}

// Each entry of the stats' `rings`: what it decoded and what its consumers
// read from it and from the others, labelled with its device (host rings,
// a test setup, as cpu:N).
void RenderRings(MetricsText& out, const MetricLabels& server, const json& rings) {
  for (size_t i = 0; i < rings.size(); ++i) {
    const json& r = rings[i];
    std::string device = Text(r, "device");
    if (rings.size() > 1 && device == "cpu") device += ":" + std::to_string(i);
    const MetricLabels ring = With(server, "ring", device);
    Put(out, kRingDecoded, ring, r, "samples_decoded");
    Put(out, kRingLocal, ring, r, "batches_local");
    Put(out, kRingFromPeers, ring, r, "batches_from_peers");
    Put(out, kRingPeerBytes, ring, r, "peer_bytes");
    Put(out, kRingTurnWait, ring, r, "turn_wait_s");
    Put(out, kRingReadAheadMisses, ring, r, "read_ahead_misses");
    Put(out, kRingHolderPid, ring, r, "attached_pid");
    Put(out, kRingHeldBatches, ring, r, "attached_batches");
    Put(out, kRingTakenBack, ring, r, "attached_detached");
    if (rings.size() > 1) RenderSource(out, ring, Field(r, "source_counters"));
  }
}

}  // namespace

std::span<const MetricFamily* const> MetricFamilies() { return kAll; }

std::string RenderMetrics(const json& stats) {
  MetricsText out;
  const MetricLabels server = {{"server", Text(stats, "name")}};
  MetricLabels info = With(server, "version", BATCHCAST_VERSION);
  info = With(std::move(info), "device", Text(stats, "device"));
  info = With(std::move(info), "lag_policy", Text(stats, "lag_policy"));
  if (Field(stats, "mps") != nullptr) {
    const json& mps = *Field(stats, "mps");
    info = With(std::move(info), "mps",
                mps.is_boolean() ? (mps.get<bool>() ? "on" : "off") : Text(stats, "mps"));
  }
  if (const json* shard = Field(stats, "shard"); shard != nullptr) {
    info = With(std::move(info), "shard", Text(*shard, "rank") + "/" + Text(*shard, "num_shards"));
  }
  out.Add(kInfo, info, 1);
  Put(out, kUptime, server, stats, "uptime_s");
  Put(out, kRefused, server, stats, "refused_connections");
  Put(out, kHandshakesCut, server, stats, "handshakes_cut");
  const json* rings = Field(stats, "rings");
  const bool several = rings != nullptr && rings->is_array() && rings->size() > 1;
  RenderRing(out, server, Text(stats, "device"), stats, !several);
  if (several)
    RenderDatasetCounters(out, With(server, "ring", Text(stats, "device")), stats, *rings);
  if (rings != nullptr && rings->is_array()) RenderRings(out, server, *rings);
  return out.Text();
}

}  // namespace batchcast
