// Note [Launcher environment] (core/src/launcher_env.h): the consumer group
// of a torchrun or SLURM rank, and the node shard of a server, from a fake
// environment.
#include "core/src/launcher_env.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace batchcast {
namespace {

using Env = std::map<std::string, std::string>;

GetEnvFn Fake(const Env& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

LauncherRank MustRank(const Env& env) {
  auto r = LauncherRankFromEnv(Fake(env));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r.ok() && r->has_value());
  return r.ok() && r->has_value() ? **r : LauncherRank{};
}

void ExpectRankError(const Env& env, const std::string& text) {
  auto r = LauncherRankFromEnv(Fake(env));
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().message();
}

const Env kTorchrun = {{"LOCAL_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "4"},
                       {"TORCHELASTIC_RUN_ID", "job7"},
                       {"TORCHELASTIC_RESTART_COUNT", "2"},
                       {"MASTER_ADDR", "10.0.0.1"},
                       {"MASTER_PORT", "29500"}};

TEST(LauncherEnvTest, NoLauncherNoGroup) {
  auto r = LauncherRankFromEnv(Fake({}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(LauncherEnvTest, TorchrunRankAndGroup) {
  const LauncherRank r = MustRank(kTorchrun);
  EXPECT_EQ(r.group, "torchrun:job7:2");
  EXPECT_EQ(r.rank, 1u);
  EXPECT_EQ(r.world_size, 4u);
  EXPECT_NE(r.source.find("LOCAL_RANK"), std::string::npos);
}

TEST(LauncherEnvTest, TorchrunWithoutRunIdNamesTheGroupByItsMaster) {
  Env env = kTorchrun;
  env["TORCHELASTIC_RUN_ID"] = "none";  // torchrun's default
  env.erase("TORCHELASTIC_RESTART_COUNT");
  EXPECT_EQ(MustRank(env).group, "torchrun:10.0.0.1:29500:0");
  env.erase("TORCHELASTIC_RUN_ID");
  EXPECT_EQ(MustRank(env).group, "torchrun:10.0.0.1:29500:0");
  env.erase("MASTER_PORT");
  ExpectRankError(env, "cannot name this job's consumer group");
}

TEST(LauncherEnvTest, SlurmRankAndGroup) {
  Env env = {{"SLURM_LOCALID", "2"}, {"SLURM_NTASKS_PER_NODE", "3"}, {"SLURM_JOB_ID", "991"},
             {"SLURM_STEP_ID", "4"}, {"SLURM_NODEID", "1"},          {"SLURM_NNODES", "2"}};
  LauncherRank r = MustRank(env);
  EXPECT_EQ(r.group, "slurm:991.4");
  EXPECT_EQ(r.rank, 2u);
  EXPECT_EQ(r.world_size, 3u);
  // Without --ntasks-per-node: this node's entry of the step's task counts.
  env.erase("SLURM_NTASKS_PER_NODE");
  env["SLURM_STEP_TASKS_PER_NODE"] = "2,4(x2),1";
  EXPECT_EQ(MustRank(env).world_size, 4u) << "node 1";
  env["SLURM_NODEID"] = "3";
  env["SLURM_LOCALID"] = "0";
  EXPECT_EQ(MustRank(env).world_size, 1u) << "node 3 (the client makes no group of a world of 1)";
  env["SLURM_NODEID"] = "4";
  ExpectRankError(env, "has no entry for SLURM_NODEID=4");
  env.erase("SLURM_STEP_TASKS_PER_NODE");
  ExpectRankError(env, "SLURM_LOCALID is set but not SLURM_NTASKS_PER_NODE");
  env.erase("SLURM_STEP_ID");
  env["SLURM_NTASKS_PER_NODE"] = "8";
  EXPECT_EQ(MustRank(env).group, "slurm:991");
}

TEST(LauncherEnvTest, TorchrunUnderSlurmIsTorchrun) {
  Env env = kTorchrun;
  env.insert({{"SLURM_LOCALID", "0"}, {"SLURM_NTASKS_PER_NODE", "1"}, {"SLURM_JOB_ID", "5"}});
  EXPECT_EQ(MustRank(env).group, "torchrun:job7:2");
}

TEST(LauncherEnvTest, BatchcastGroupOptsOutOrRenames) {
  Env env = kTorchrun;
  env["BATCHCAST_GROUP"] = "none";
  auto r = LauncherRankFromEnv(Fake(env));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  env["BATCHCAST_GROUP"] = "trial-3";
  EXPECT_EQ(MustRank(env).group, "trial-3");
  EXPECT_EQ(MustRank(env).rank, 1u);
  ExpectRankError({{"BATCHCAST_GROUP", "trial-3"}}, "no launcher sets this process's rank");
}

TEST(LauncherEnvTest, UnusableValuesAreErrors) {
  Env env = kTorchrun;
  env["LOCAL_RANK"] = "4";
  ExpectRankError(env, "LOCAL_RANK=4 is not below LOCAL_WORLD_SIZE=4");
  env["LOCAL_RANK"] = "x";
  ExpectRankError(env, "LOCAL_RANK='x' is not a non-negative integer");
  env["LOCAL_RANK"] = "-1";
  ExpectRankError(env, "not a non-negative integer");
  env["LOCAL_RANK"] = "0";
  env.erase("LOCAL_WORLD_SIZE");
  ExpectRankError(env, "LOCAL_WORLD_SIZE is not");
}

TEST(LauncherEnvTest, NodeShard) {
  auto shard = [](const Env& env) { return NodeShardFromEnv(Fake(env)); };
  auto none = shard({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto t = shard({{"GROUP_RANK", "1"}, {"GROUP_WORLD_SIZE", "3"}, {"SLURM_NODEID", "0"}});
  ASSERT_TRUE(t.ok() && t->has_value());
  EXPECT_EQ((*t)->shard_rank, 1u);
  EXPECT_EQ((*t)->num_shards, 3u);
  EXPECT_EQ((*t)->source, "GROUP_RANK/GROUP_WORLD_SIZE");
  auto n = shard({{"GROUP_RANK", "1"}, {"NNODES", "2"}});
  ASSERT_TRUE(n.ok() && n->has_value());
  EXPECT_EQ((*n)->source, "GROUP_RANK/NNODES");
  auto pet = shard({{"PET_NODE_RANK", "0"}, {"PET_NNODES", "2"}});
  ASSERT_TRUE(pet.ok() && pet->has_value());
  EXPECT_EQ((*pet)->num_shards, 2u);
  auto s = shard({{"SLURM_NODEID", "1"}, {"SLURM_NNODES", "2"}});
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_EQ((*s)->shard_rank, 1u);
  EXPECT_EQ((*s)->source, "SLURM_NODEID/SLURM_NNODES");
  auto bad = shard({{"SLURM_NODEID", "2"}, {"SLURM_NNODES", "2"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SLURM_NODEID=2 is not below SLURM_NNODES=2"),
            std::string::npos);
  auto half = shard({{"GROUP_RANK", "1"}});
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("GROUP_WORLD_SIZE or NNODES"), std::string::npos);
}

TEST(LauncherEnvTest, RankVariablesNameWhatIsRead) {
  std::set<std::string> names;
  for (const char* v : LauncherRankVariables()) names.insert(v);
  for (const char* v : {"LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "MASTER_ADDR",
                        "MASTER_PORT", "SLURM_LOCALID", "BATCHCAST_GROUP"}) {
    EXPECT_EQ(names.count(v), 1u) << v;
  }
  EXPECT_EQ(names.count("SLURM_JOB_ID"), 0u) << "srun inside a job needs it";
}

}  // namespace
}  // namespace batchcast
