// End-to-end tests of consumer groups (Note [Consumer groups],
// server/src/scheduler.h) and of one server per node (--shard-from-env):
// real server and consumer processes on a CPU ring, every byte checked by
// bc_test_consumer against the synthetic formula, each group's split
// checked against the sampler's order.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/src/sampler.h"
#include "harness.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::Process;
using testing::ReadJson;
using testing::TempDir;
using testing::UniqueName;

std::unique_ptr<Process> StartServer(const std::string& name, const std::vector<std::string>& extra,
                                     const std::vector<std::string>& env = {}) {
  return testing::StartServerProcess(BC_SERVER_BIN, name, extra, "", nullptr, env);
}

std::unique_ptr<Process> StartConsumer(const std::string& name, const std::string& out,
                                       const std::vector<std::string>& extra,
                                       const std::vector<std::string>& env = {}) {
  return testing::StartConsumerProcess(BC_CONSUMER_BIN, name, out, extra, env);
}

// A consumer process and the JSON file it writes.
struct ConsumerRun {
  std::unique_ptr<Process> process;
  std::string out;
  json result;
  // Waits for it; a test failure unless it exited 0 without an error.
  void Finish() {
    const int rc = process->Wait(60s);
    result = ReadJson(out);
    EXPECT_EQ(rc, 0) << out << ": " << result.dump().substr(0, 1000);
    EXPECT_FALSE(result.contains("error")) << result.value("error", "");
    EXPECT_EQ(result.value("mismatches", -1), 0) << "bytes differ from the formula";
  }
  // Batches it got in consumer epoch `e` (from the per-batch records).
  int BatchesIn(uint32_t e) const {
    int n = 0;
    for (const json& b : result["batches"]) n += b[3].get<uint32_t>() == e ? 1 : 0;
    return n;
  }
  std::vector<int64_t> Epoch(size_t e) const {
    return result["epochs"][e].get<std::vector<int64_t>>();
  }
};

// Rank `rank`'s share of an epoch's order: chunks rank, rank + W, ... of B
// samples, over `rounds` rounds (Note [Consumer groups]).
std::vector<int64_t> Share(const std::vector<int64_t>& order, uint32_t world, uint32_t batch,
                           uint32_t rank, size_t rounds) {
  std::vector<int64_t> out;
  for (size_t r = 0; r < rounds; ++r) {
    const size_t at = (r * world + rank) * batch;
    out.insert(out.end(), order.begin() + at, order.begin() + at + batch);
  }
  return out;
}

// `world` rank processes of group `group` (batch `batch`, next_epoch,
// `epochs` epochs); `env(rank)` gives each one's extra environment, and
// without it they name the group on the command line.
std::vector<ConsumerRun> StartGroup(const std::string& server, const std::string& dir,
                                    const std::string& group, uint32_t world, uint32_t batch,
                                    uint32_t epochs,
                                    std::vector<std::string> (*env)(uint32_t rank) = nullptr) {
  std::vector<ConsumerRun> runs;
  for (uint32_t r = 0; r < world; ++r) {
    ConsumerRun run;
    run.out = dir + "/" + group + std::to_string(r) + ".json";
    std::vector<std::string> args = {"--batch-size", std::to_string(batch), "--join", "next_epoch",
                                     "--epochs",     std::to_string(epochs)};
    if (env == nullptr) {
      args.insert(args.end(), {"--group", group, "--rank", std::to_string(r), "--world-size",
                               std::to_string(world)});
    }
    run.process = StartConsumer(server, run.out, args, env ? env(r) : std::vector<std::string>{});
    runs.push_back(std::move(run));
  }
  return runs;
}

// Every rank of `runs` got exactly its share of each epoch's `order(e)`:
// the ranks together cover the first rounds * world * batch samples once,
// each with `rounds` batches.
void ExpectSplit(std::vector<ConsumerRun>& runs, uint32_t batch, uint64_t rounds, uint32_t epochs,
                 const Sampler& sampler) {
  const auto world = static_cast<uint32_t>(runs.size());
  for (uint32_t r = 0; r < world; ++r) {
    ConsumerRun& run = runs[r];
    run.Finish();
    EXPECT_EQ(run.result["batches_per_epoch"], rounds) << "rank " << r;
    EXPECT_EQ(run.result["group"]["world_size"], world);
    EXPECT_EQ(run.result["group"]["rank"], r);
    ASSERT_EQ(run.result["epochs"].size(), epochs) << run.out;
    for (uint32_t e = 0; e < epochs; ++e) {
      EXPECT_EQ(run.Epoch(e), Share(sampler.EpochOrder(e), world, batch, r, rounds))
          << "rank " << r << " epoch " << e;
      EXPECT_EQ(run.BatchesIn(e), static_cast<int>(rounds)) << "rank " << r << " epoch " << e;
    }
  }
}

// A group of 3 rank processes, a group of 2 and an ungrouped consumer on one
// stream: each group covers every sample of each epoch once (minus the
// dropped remainder) with equal batch counts; the ungrouped one sees all.
TEST(GroupE2E, TwoGroupsOfProcessesAndAnUngroupedConsumer) {
  const std::string name = UniqueName("groups");
  const std::string dir = TempDir();
  auto server =
      StartServer(name, {"--synthetic", "1000", "--size", "8", "--batch-size", "32", "--window",
                         "8", "--epochs", "2", "--seed", "3", "--min-consumers", "6"});
  std::vector<ConsumerRun> a = StartGroup(name, dir, "a", 3, 16, 2);  // rounds of 48: 20 per epoch
  std::vector<ConsumerRun> b = StartGroup(name, dir, "b", 2, 24, 2);  // rounds of 48: 20 per epoch
  ConsumerRun u;
  u.out = dir + "/u.json";
  u.process = StartConsumer(
      name, u.out,
      {"--batch-size", "50", "--join", "next_epoch", "--epochs", "2", "--no-drop-last"});
  auto sampler = Sampler::Make(1000, SamplerOptions{3, true, 0, 1});
  ASSERT_TRUE(sampler.ok());
  ExpectSplit(a, 16, 20, 2, *sampler);
  ExpectSplit(b, 24, 20, 2, *sampler);
  u.Finish();
  EXPECT_FALSE(u.result.contains("group"));
  for (uint32_t e = 0; e < 2; ++e) EXPECT_EQ(u.Epoch(e), sampler->EpochOrder(e));
  EXPECT_EQ(server->Wait(20s), 0) << "the stream ended and everyone left";
}

std::vector<std::string> TorchrunRank(uint32_t rank) {
  return {"LOCAL_RANK=" + std::to_string(rank), "LOCAL_WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=e2e",
          "BATCHCAST_GROUP="};
}
std::vector<std::string> SlurmTask(uint32_t rank) {
  return {"SLURM_LOCALID=" + std::to_string(rank), "SLURM_NTASKS_PER_NODE=2", "SLURM_JOB_ID=77",
          "SLURM_STEP_ID=0", "BATCHCAST_GROUP="};
}

// Two "nodes": a server per shard (999 samples: shards of 500 and 499),
// each with a group of two ranks that take their group from the launcher's
// variables (torchrun on node 0, SLURM on node 1), and the servers their
// shard (--shard-from-env). Over all four ranks each sample appears once per
// epoch (minus the remainders) and every rank gets the same count: the
// smallest shard's, floor(499 / (2 x 25)) = 9, on both nodes.
TEST(GroupE2E, TwoNodesEachWithAGroupOfTwo) {
  const std::string dir = TempDir();
  const std::vector<std::string> common = {
      "--synthetic", "999", "--size", "8", "--batch-size",    "25", "--window",        "8",
      "--epochs",    "2",   "--seed", "5", "--min-consumers", "2",  "--shard-from-env"};
  const std::string n0 = UniqueName("node0"), n1 = UniqueName("node1");
  auto s0 = StartServer(n0, common, {"GROUP_RANK=0", "NNODES=2"});
  auto s1 = StartServer(n1, common, {"SLURM_NODEID=1", "SLURM_NNODES=2"});
  const json st0 = testing::Stats(n0), st1 = testing::Stats(n1);
  EXPECT_EQ(st0["shard"]["rank"], 0);
  EXPECT_EQ(st0["shard"]["source"], "GROUP_RANK/NNODES");
  EXPECT_EQ(st1["shard"]["rank"], 1);
  EXPECT_EQ(st1["shard"]["num_shards"], 2);
  EXPECT_EQ(st0["epoch_len"], 500);
  EXPECT_EQ(st1["epoch_len"], 499);
  std::vector<ConsumerRun> g0 = StartGroup(n0, dir, "n0r", 2, 25, 2, TorchrunRank);
  std::vector<ConsumerRun> g1 = StartGroup(n1, dir, "n1r", 2, 25, 2, SlurmTask);
  auto shard0 = Sampler::Make(999, SamplerOptions{5, true, 0, 2});
  auto shard1 = Sampler::Make(999, SamplerOptions{5, true, 1, 2});
  ASSERT_TRUE(shard0.ok() && shard1.ok());
  ExpectSplit(g0, 25, 9, 2, *shard0);
  ExpectSplit(g1, 25, 9, 2, *shard1);
  EXPECT_EQ(g0[1].result["group"]["name"], "torchrun:e2e:0");
  EXPECT_EQ(g1[0].result["group"]["name"], "slurm:77.0");
  for (uint32_t e = 0; e < 2; ++e) {
    std::set<int64_t> seen;
    size_t total = 0;
    for (std::vector<ConsumerRun>* g : {&g0, &g1}) {
      for (const ConsumerRun& r : *g) {
        const std::vector<int64_t> got = r.Epoch(e);
        seen.insert(got.begin(), got.end());
        total += got.size();
      }
    }
    EXPECT_EQ(total, 4u * 9 * 25) << "epoch " << e;
    EXPECT_EQ(seen.size(), total) << "a sample appeared twice in epoch " << e;
  }
  EXPECT_EQ(s0->Wait(20s), 0);
  EXPECT_EQ(s1->Wait(20s), 0);
}

// A rank process that dies (kill -9 while it holds a batch and reads no
// more): its peer gets a clear error (not a hang) after the batches the dead
// one got; another group and an ungrouped consumer of the server, stalled
// meanwhile by the ring the dead rank's group pinned, go on to the end.
TEST(GroupE2E, ADeadRankFailsItsPeerAndNobodyElse) {
  const std::string name = UniqueName("deadrank");
  const std::string dir = TempDir();
  auto server = StartServer(name, {"--synthetic", "400", "--size", "8", "--batch-size", "16",
                                   "--window", "8", "--seed", "4", "--min-consumers", "5"});
  ConsumerRun r0, r1, u;
  r0.out = dir + "/r0.json";
  r1.out = dir + "/r1.json";
  u.out = dir + "/u.json";
  const std::vector<std::string> group = {"--batch-size", "16",           "--group",
                                          "job",          "--world-size", "2"};
  auto args = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), group.begin(), group.end());
    return extra;
  };
  r0.process = StartConsumer(name, r0.out, args({"--rank", "0", "--epochs", "1000"}));
  r1.process =
      StartConsumer(name, r1.out, args({"--rank", "1", "--hold-at", "2", "--hold-ms", "60000"}));
  u.process = StartConsumer(name, u.out, {"--batch-size", "20", "--epochs", "3"});
  std::vector<ConsumerRun> other = StartGroup(name, dir, "other", 2, 10, 3);  // 20 rounds
  ASSERT_TRUE(r1.process->WaitForLine("HOLDING", 20s));
  r1.process->Kill();
  EXPECT_EQ(r0.process->Wait(20s), 4) << "an error, not a hang";
  r0.result = ReadJson(r0.out);
  EXPECT_EQ(r0.result["error_code"], "Cancelled");
  const std::string error = r0.result.value("error", "");
  EXPECT_NE(error.find("group 'job' is broken: rank 1"), std::string::npos) << error;
  // Found dead by its pid ("exited") or by its socket ("connection is gone").
  EXPECT_TRUE(error.find("exited") != std::string::npos ||
              error.find("its connection is gone") != std::string::npos)
      << error;
  EXPECT_GE(r0.result["batches"].size(), 3u);
  u.Finish();
  EXPECT_EQ(u.result["epochs"].size(), 3u);
  auto sampler = Sampler::Make(400, SamplerOptions{4, true, 0, 1});
  ASSERT_TRUE(sampler.ok());
  ExpectSplit(other, 10, 20, 3, *sampler);
}

// A group whose ranks do not all connect: the joined one fails within
// --group-timeout, naming the missing rank.
TEST(GroupE2E, AGroupThatDoesNotFormFailsClearly) {
  const std::string name = UniqueName("noform");
  const std::string dir = TempDir();
  auto server = StartServer(
      name, {"--synthetic", "200", "--size", "8", "--batch-size", "16", "--group-timeout", "1"});
  ConsumerRun r0;
  r0.out = dir + "/r0.json";
  r0.process = StartConsumer(name, r0.out,
                             {"--batch-size", "16", "--group", "g", "--rank", "0", "--world-size",
                              "2", "--epochs", "100"});
  EXPECT_EQ(r0.process->Wait(20s), 4);
  r0.result = ReadJson(r0.out);
  EXPECT_EQ(r0.result["error_code"], "DeadlineExceeded");
  EXPECT_NE(r0.result.value("error", "").find("missing: 1"), std::string::npos) << r0.result.dump();
}

}  // namespace
}  // namespace batchcast
