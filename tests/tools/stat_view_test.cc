// The views of `batchcast-server stat` (tools/stat_view.h) and the --watch
// loop (tools/stat_watch.h), on stats made here: rates come from successive
// stats and are matched per consumer id; a restarted server starts over;
// stats that do not exist yet (stage times, Next() wait) are shown once they
// appear and left out until then; a terminal gets the view redrawn in place,
// a pipe plain lines, --json one object per line; Ctrl-C ends with 0, a
// server that goes away with 1 and a message; a rank of a consumer group is
// named with its group; a server of several rings lists each ring, with its
// decode rate and share in the live view; a ring an attached producer decodes
// names its pid.
#include "tools/stat_view.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tools/stat_watch.h"

namespace batchcast {
namespace {

using nlohmann::json;

json Consumer(int id, const std::string& name, uint64_t samples) {
  return {{"id", id},           {"name", name},
          {"pid", 100 + id},    {"batch_size", 32},
          {"attached", true},   {"epoch", 1},
          {"step", 7},          {"cursor", 0},
          {"lag_samples", 96},  {"batches", samples / 32},
          {"samples", samples}, {"skipped", 0},
          {"leases", 2},        {"pending", 1},
          {"connected_s", 3.0}};
}

json Stats(uint64_t published, double blocked, std::vector<json> consumers, int pid = 42) {
  return {{"name", "imnet"},
          {"endpoint", "ipc:///run/bc/imnet.sock"},
          {"device", "cpu"},
          {"pid", pid},
          {"window", 8},
          {"batch_size", 64},
          {"epoch_len", 1000},
          {"lag_policy", "block"},
          {"samples_published", published},
          {"producer_epoch", published / 1000},
          {"stream_ended", false},
          {"uptime_s", 65.0},
          {"producer_blocked_s", blocked},
          {"slots", {{"free", 1}, {"writing", 1}, {"ready", 4}, {"leased", 2}}},
          {"consumers_evicted", 0},
          {"consumers_lost", 0},
          {"skip_events", 0},
          {"source_counters", {{"files", 1000}, {"files_dropped_at_decode", 0}}},
          {"consumers", consumers}};
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(WatchView, RatesFromSuccessiveStats) {
  WatchView v;
  v.Update(Stats(1000, 0.0, {Consumer(1, "a", 320), Consumer(2, "b", 64)}), 10.0);
  std::string first = Join(v.Frame());
  EXPECT_NE(first.find("producer  - samples/s  epoch 1 (0%)"), std::string::npos) << first;
  EXPECT_NE(first.find("blocked -"), std::string::npos) << first;
  // Two seconds later: 3000 samples more, blocked 0.5 s of them; the
  // consumers come in another order and a third one joined.
  v.Update(Stats(4000, 0.5, {Consumer(2, "b", 1064), Consumer(3, "c", 32), Consumer(1, "a", 2320)}),
           12.0);
  const std::vector<std::string> frame = v.Frame();
  const std::string text = Join(frame);
  EXPECT_EQ(frame[0], "imnet (pid 42) on ipc:///run/bc/imnet.sock, cpu, up 1m05s");
  EXPECT_EQ(frame[1], "producer  1.5k samples/s  epoch 4 (0%)  published 4.0k  blocked 25%");
  EXPECT_EQ(frame[2], "ring      8 slots x 64: free 1  writing 1  ready 4  leased 2");
  EXPECT_EQ(frame[3], "source    files 1000  files_dropped_at_decode 0");
  EXPECT_EQ(frame[4], "consumers 3");
  EXPECT_EQ(frame[5],
            "    id  name              batch   rate/s  epoch:step  lag/slots  leases  skipped");
  EXPECT_EQ(frame[6],
            "     2  b                    32      500         1:7        1.5       2        0");
  EXPECT_EQ(frame[7],
            "     3  c                    32        -         1:7        1.5       2        0");
  EXPECT_EQ(frame[8],
            "     1  a                    32     1.0k         1:7        1.5       2        0");
  EXPECT_EQ(text.find("stages"), std::string::npos);  // no stage times in these stats
  EXPECT_EQ(text.find("wait"), std::string::npos);    // nor Next() wait times
}

TEST(WatchView, StageAndWaitTimesShownWhenPresent) {
  json a = Stats(0, 0, {Consumer(1, "a", 0)});
  json b = Stats(1000, 0, {Consumer(1, "a", 1000)});
  a[kStageTimesField] = {{"read", 1.0}, {"decode", 4.0}};
  b[kStageTimesField] = {{"read", 1.5}, {"decode", 7.0}};
  a["consumers"][0][kConsumerWaitField] = 0.25;
  b["consumers"][0][kConsumerWaitField] = 1.0;
  WatchView v;
  v.Update(a, 0);
  v.Update(b, 2.0);
  const std::string text = Join(v.Frame());
  EXPECT_NE(text.find("stages    decode 150%  read 25%\n"), std::string::npos) << text;
  EXPECT_NE(text.find("skipped   wait\n"), std::string::npos) << text;
  EXPECT_NE(text.find("0    38%\n"), std::string::npos) << text;  // 0.75 s of 2 s
  const std::string lines = Join(v.Lines("t"));
  EXPECT_NE(lines.find(" stages decode 150% read 25%"), std::string::npos) << lines;
  EXPECT_NE(lines.find(" wait 38%"), std::string::npos) << lines;
}

// A server of two rings: `rings` (docs/stats.md), one entry per ring; ring
// 1 waited `turn_wait1` s for its turn.
json TwoRings(uint64_t decoded0, uint64_t decoded1, uint64_t peer_bytes0, double turn_wait1 = 0) {
  json s = Stats(decoded0 + decoded1, 0, {Consumer(1, "a", 0), Consumer(2, "b", 0)});
  s["device"] = "cuda:0,1";
  s["placement"] = "demand";
  s["rings"] = json::array();
  for (int r = 0; r < 2; ++r) {
    s["rings"].push_back({{"ring", r},
                          {"device", r == 0 ? "cuda:0" : "cuda:1"},
                          {"consumers", 1},
                          {"batches_written", (r == 0 ? decoded0 : decoded1) / 64},
                          {"samples_decoded", r == 0 ? decoded0 : decoded1},
                          {"batches_local", 10},
                          {"batches_from_peers", r == 0 ? 30 : 0},
                          {"peer_bytes", r == 0 ? peer_bytes0 : 0},
                          {"turn_wait_s", r == 0 ? 0.0 : turn_wait1},
                          {"read_ahead_misses", 0}});
  }
  return s;
}

// Each ring's part of the one stream: what it decoded and its share, how
// its consumers read; a one-ring server lists no rings.
TEST(StatsReport, EveryRingOfSeveralIsListed) {
  const std::string r = StatsReport(TwoRings(6400, 19200, 3000000));
  EXPECT_NE(r.find("  rings:     2, batches placed by demand (--placement demand)\n"
                   "    ring 0 cuda:0: 1 consumer, 6400 samples decoded (25%), 100 batches "
                   "written; read 10 batches zero-copy, 30 from other rings (3.00M bytes "
                   "copied)\n"
                   "    ring 1 cuda:1: 1 consumer, 19200 samples decoded (75%), 300 batches "
                   "written; read 10 batches zero-copy, 0 from other rings (0 bytes copied)\n"),
            std::string::npos)
      << r;
  EXPECT_EQ(StatsReport(Stats(1500, 0, {})).find("rings:"), std::string::npos);
  // What held a ring back, when anything did.
  json held = TwoRings(6400, 19200, 0, 1.5);
  held["rings"][1]["read_ahead_misses"] = 3;
  EXPECT_NE(StatsReport(held).find("0 from other rings (0 bytes copied), waited 1.5 s for its "
                                   "turn, 3 batches not read ahead\n"),
            std::string::npos)
      << StatsReport(held);
  // The status line of `serve`: each ring's share of the decode so far.
  const std::string status = StatusLine(TwoRings(6400, 19200, 0), 1000.0);
  EXPECT_TRUE(status.ends_with(" | decoded per ring 25% 75%")) << status;
  EXPECT_EQ(StatusLine(Stats(1500, 0, {}), 1.0).find("per ring"), std::string::npos);
}

// Note [Attached producers]: a ring a trainer's process decodes names its
// pid, and one the server took back says how often; a ring the server
// decodes itself, or one without an attach socket, says nothing more.
TEST(StatsReport, AttachedProducerOfARing) {
  json s = TwoRings(6400, 19200, 0);
  s["rings"][0]["attached_pid"] = 0;
  s["rings"][0]["attached_batches"] = 0;
  s["rings"][0]["attached_detached"] = 0;
  s["rings"][1]["attached_pid"] = 4242;
  s["rings"][1]["attached_batches"] = 290;
  s["rings"][1]["attached_detached"] = 2;
  const std::string r = StatsReport(s);
  EXPECT_NE(r.find("    ring 0 cuda:0: 1 consumer, 6400 samples decoded (25%), 100 batches "
                   "written; read 10 batches zero-copy, 30 from other rings (0 bytes copied)\n"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("    ring 1 cuda:1: 1 consumer, 19200 samples decoded (75%), 300 batches "
                   "written; read 10 batches zero-copy, 0 from other rings (0 bytes copied), "
                   "decoded by pid 4242 (attached), taken back 2 times\n"),
            std::string::npos)
      << r;
  // Taken back once, the server decodes the ring again.
  s["rings"][1]["attached_pid"] = 0;
  s["rings"][1]["attached_detached"] = 1;
  EXPECT_NE(StatsReport(s).find("(0 bytes copied), taken back 1 time\n"), std::string::npos)
      << StatsReport(s);
  // One ring: its `ring:` line says it.
  json one = Stats(1500, 0, {});
  one["rings"] = json::array({{{"ring", 0},
                               {"device", "cpu"},
                               {"attached_pid", 4242},
                               {"attached_batches", 20},
                               {"attached_detached", 0}}});
  const std::string o = StatsReport(one);
  EXPECT_NE(o.find("  ring:      8 slots x 64 samples; free 1, writing 1, ready 4, leased 2, "
                   "decoded by pid 4242 (attached)\n"),
            std::string::npos)
      << o;
  EXPECT_EQ(o.find("rings:"), std::string::npos) << o;
  one["rings"][0].erase("attached_pid");  // --no-attach: the keys are absent
  one["rings"][0].erase("attached_detached");
  EXPECT_NE(StatsReport(one).find("leased 2\n"), std::string::npos) << StatsReport(one);
}

// A ring slowed down shows in the live view: its decode rate and its share
// of the node's.
TEST(WatchView, EachRingsDecodeRateAndShare) {
  WatchView v;
  v.Update(TwoRings(1000, 1000, 0), 0);
  EXPECT_NE(
      Join(v.Frame()).find(
          "  ring 0 cuda:0   decoded       -/s     - of the node  copied in -  waiting for its "
          "turn -\n"),
      std::string::npos)
      << Join(v.Frame());
  v.Update(TwoRings(3000, 9000, 4000000, 0.5), 2.0);
  const std::string frame = Join(v.Frame());
  EXPECT_NE(frame.find("rings     2, batches placed by demand (--placement demand)\n"
                       "  ring 0 cuda:0   decoded    1.0k/s   20% of the node  copied in "
                       "2.00MB/s  waiting for its turn 0%\n"
                       "  ring 1 cuda:1   decoded    4.0k/s   80% of the node  copied in 0B/s  "
                       "waiting for its turn 25%\n"),
            std::string::npos)
      << frame;
  const std::string lines = Join(v.Lines("t"));
  EXPECT_NE(lines.find("t imnet ring 1 cuda:1 decoded 4.0k samples/s share 80% copied in 0B/s "
                       "turn wait 25%\n"),
            std::string::npos)
      << lines;
  // One ring: no ring rows.
  WatchView one;
  one.Update(Stats(0, 0, {}), 0);
  one.Update(Stats(1000, 0, {}), 1.0);
  EXPECT_EQ(Join(one.Frame()).find("rings"), std::string::npos);
  EXPECT_EQ(one.Lines("t").size(), 1u);  // the producer's line, no consumers
}

// The server's MPS probe (docs/stats.md `mps`): true, false or "unknown".
TEST(WatchView, MpsStateInTheHeader) {
  for (const auto& [value, shown] : std::vector<std::pair<json, std::string>>{
           {true, ", MPS on"}, {false, ", MPS off"}, {"unknown", ", MPS unknown"}}) {
    json st = Stats(0, 0, {});
    st["device"] = "cuda:0";
    st["mps"] = value;
    WatchView v;
    v.Update(st, 0);
    EXPECT_EQ(v.Frame()[0], "imnet (pid 42) on ipc:///run/bc/imnet.sock, cuda:0, up 1m05s" + shown);
  }
  WatchView v;
  v.Update(Stats(0, 0, {}), 0);
  EXPECT_EQ(v.Frame()[0].find("MPS"), std::string::npos) << "a CPU server has no mps field";
}

TEST(WatchView, RestartedServerStartsOver) {
  WatchView v;
  v.Update(Stats(5000, 0, {Consumer(1, "a", 5000)}), 0);
  v.Update(Stats(100, 0, {Consumer(1, "a", 100)}, /*pid=*/43), 1);
  const std::string text = Join(v.Frame());
  EXPECT_NE(text.find("producer  - samples/s"), std::string::npos) << text;
  EXPECT_NE(text.find("(pid 43)"), std::string::npos) << text;
}

TEST(WatchView, LinesAreCutToTheTerminalWidth) {
  WatchView v;
  v.Update(Stats(0, 0, {Consumer(1, "a-consumer-with-a-very-long-name", 0)}), 0);
  for (const std::string& line : v.Frame(40)) EXPECT_LE(line.size(), 40u) << line;
  const std::string text = Join(v.Frame());
  EXPECT_NE(text.find(" a-consumer-with-  "), std::string::npos) << text;  // 16 columns
}

TEST(WatchView, ConsumersBeyondTheTerminalHeightAreCounted) {
  std::vector<json> many;
  for (int i = 1; i <= 10; ++i) many.push_back(Consumer(i, "c" + std::to_string(i), 0));
  WatchView v;
  v.Update(Stats(0, 0, many), 0);
  EXPECT_EQ(v.Frame().size(), 16u);  // 6 lines, then a row per consumer
  const std::vector<std::string> frame = v.Frame(0, 12);
  ASSERT_EQ(frame.size(), 11u);  // one line left for the cursor
  EXPECT_EQ(frame[10], "  ... 6 more");
  EXPECT_NE(frame[9].find(" c4 "), std::string::npos) << frame[9];
}

TEST(WatchView, PlainLinesOnePerProducerAndConsumer) {
  WatchView v;
  json s = Stats(1000, 0, {Consumer(1, "a", 0), Consumer(2, "b", 0)});
  s["consumers"][1]["attached"] = false;
  v.Update(s, 0);
  v.Update(Stats(2000, 0, {Consumer(1, "a", 500)}), 1);
  const std::vector<std::string> lines = v.Lines("12:00:00");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "12:00:00 imnet producer 1.0k samples/s epoch 2 (0%) blocked 0% ring free 1  "
            "writing 1  ready 4  leased 2 consumers 1");
  EXPECT_EQ(lines[1],
            "12:00:00 imnet consumer #1 a batch 32 rate 500 samples/s epoch 1 step 7 lag 1.5 "
            "slots leases 2 skipped 0");
  v.Update(s, 2);
  EXPECT_NE(v.Lines("t")[2].find(" detached"), std::string::npos);
}

TEST(StatsReport, RanksOfAGroupAreNamed) {
  json rank = Consumer(3, "r", 64);
  rank["group"] = "torchrun:x:0";
  rank["rank"] = 1;
  rank["world_size"] = 2;
  const json s = Stats(1500, 0, {rank, Consumer(4, "u", 64)});
  const std::string r = StatsReport(s);
  EXPECT_NE(r.find("leases 2 group torchrun:x:0 rank 1/2\n    #4 u"), std::string::npos) << r;
  WatchView v;
  v.Update(s, 0);
  const std::vector<std::string> lines = v.Lines("t");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(lines[1].ends_with("skipped 0 group torchrun:x:0 rank 1/2")) << lines[1];
  EXPECT_TRUE(lines[2].ends_with("skipped 0")) << lines[2];
}

TEST(StatsReport, NamesEveryPart) {
  const std::string r = StatsReport(Stats(1500, 0.25, {Consumer(1, "a", 64)}));
  EXPECT_NE(r.find("server imnet (pid 42) on ipc:///run/bc/imnet.sock\n"), std::string::npos) << r;
  EXPECT_NE(r.find("  ring:      8 slots x 64 samples; free 1, writing 1, ready 4, leased 2\n"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("  consumers: 1\n    #1 a (pid 101): batch 32, epoch 1 step 7, 2 batches, "
                   "lag 96 samples, skipped 0, leases 2\n"),
            std::string::npos)
      << r;
  EXPECT_EQ(StatusLine(Stats(1500, 0, {}), 1234.0),
            "imnet: 1.2k samples/s | producer epoch 1 | 0 consumers | slowest lag 0.0 slots | "
            "published 1500 | files 1000 | files_dropped_at_decode 0");
  // Refused tcp:// connections: shown once there are any.
  EXPECT_EQ(r.find("refused"), std::string::npos) << r;
  nlohmann::json refused = Stats(1500, 0.25, {});
  refused["refused_connections"] = 7;
  EXPECT_NE(StatsReport(refused).find("  refused:   7 tcp:// connections without the key"),
            std::string::npos);
}

// ---- the --watch loop ----

struct FakeServer {
  std::vector<Result<std::string>> answers;
  size_t calls = 0;
  std::atomic<int>* stop_after_last = nullptr;  // set when the answers are used up
  Result<std::string> operator()() {
    if (calls + 1 >= answers.size() && stop_after_last != nullptr) *stop_after_last = SIGINT;
    return answers[std::min(calls++, answers.size() - 1)];
  }
};

WatchOptions Fast(bool terminal = false, bool json = false) {
  WatchOptions o;
  o.name = "imnet";
  o.interval_s = 0.001;
  o.terminal = terminal;
  o.json = json;
  return o;
}

TEST(WatchStats, PlainLinesUntilCtrlC) {
  std::atomic<int> stop{0};
  FakeServer server{{Stats(0, 0, {Consumer(1, "a", 0)}).dump(),
                     Stats(100, 0, {Consumer(1, "a", 50)}).dump(),
                     Stats(200, 0, {Consumer(1, "a", 100)}).dump()}};
  server.stop_after_last = &stop;
  std::ostringstream out, err;
  EXPECT_EQ(WatchStats(Fast(), std::ref(server), stop, out, err), 0);
  // The third answer arrives after the stop: not shown.
  EXPECT_EQ(server.calls, 3u);
  std::istringstream lines(out.str());
  int producer = 0, consumer = 0;
  for (std::string l; std::getline(lines, l);) {
    EXPECT_EQ(l.find('\033'), std::string::npos) << "no terminal codes in a pipe: " << l;
    producer += l.find(" imnet producer ") != std::string::npos;
    consumer += l.find(" imnet consumer #1 a ") != std::string::npos;
  }
  EXPECT_EQ(producer, 2);
  EXPECT_EQ(consumer, 2);
  EXPECT_EQ(err.str(), "");
}

TEST(WatchStats, TerminalRedrawsInPlace) {
  std::atomic<int> stop{0};
  FakeServer server{{Stats(0, 0, {}).dump(), Stats(100, 0, {}).dump(), Stats(200, 0, {}).dump(),
                     std::string("never shown")}};
  server.stop_after_last = &stop;
  std::ostringstream out, err;
  EXPECT_EQ(WatchStats(Fast(/*terminal=*/true), std::ref(server), stop, out, err), 0);
  const std::string s = out.str();
  // Frames of 5 lines (header, producer, ring, source, consumers): the first
  // is drawn where the cursor is, each later one moves 5 lines up first.
  EXPECT_EQ(s.find("\033[5A\r"), s.find("\033[J") + 3) << s;
  size_t ups = 0;
  for (size_t at = 0; (at = s.find("\033[5A\r", at)) != std::string::npos; ++at) ++ups;
  EXPECT_EQ(ups, 2u);
  EXPECT_EQ(s.rfind("\033[J"), s.size() - 3);
}

TEST(WatchStats, JsonLines) {
  std::atomic<int> stop{0};
  FakeServer server{{Stats(0, 0, {}).dump(), Stats(100, 0, {}).dump(), std::string("x")}};
  server.stop_after_last = &stop;
  std::ostringstream out, err;
  EXPECT_EQ(WatchStats(Fast(false, /*json=*/true), std::ref(server), stop, out, err), 0);
  std::istringstream lines(out.str());
  std::vector<uint64_t> published;
  for (std::string l; std::getline(lines, l);)
    published.push_back(json::parse(l)["samples_published"]);
  EXPECT_EQ(published, (std::vector<uint64_t>{0, 100}));
}

TEST(WatchStats, ServerGoesAway) {
  std::atomic<int> stop{0};
  FakeServer server{{Stats(0, 0, {}).dump(), NotFoundError("no batchcast server named 'imnet'")}};
  std::ostringstream out, err;
  EXPECT_EQ(WatchStats(Fast(), std::ref(server), stop, out, err), 1);
  EXPECT_EQ(err.str(),
            "batchcast-server stat: server 'imnet' went away: NotFound: no batchcast server named "
            "'imnet'\n");
}

TEST(WatchStats, NoServerAtAll) {
  std::atomic<int> stop{0};
  FakeServer server{{UnavailableError("server at ipc://x did not answer within 3000 ms")}};
  std::ostringstream out, err;
  EXPECT_EQ(WatchStats(Fast(true), std::ref(server), stop, out, err), 1);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(
      err.str(),
      "batchcast-server stat: Unavailable: server at ipc://x did not answer within 3000 ms\n");
}

}  // namespace
}  // namespace batchcast
