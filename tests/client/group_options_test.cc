// ResolveGroup (client/include/batchcast/client/consumer.h): a consumer's
// group from its options and the launcher's variables (Note [Launcher
// environment]); explicit options win, group "" opts out.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>
#include <vector>

#include "batchcast/client/consumer.h"
#include "core/src/launcher_env.h"

namespace batchcast {
namespace {

// Clears every launcher variable for the test and sets `vars`; restores the
// environment afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    std::vector<std::string> names(LauncherRankVariables().begin(), LauncherRankVariables().end());
    for (const char* v : {"SLURM_JOB_ID", "SLURM_NTASKS_PER_NODE", "SLURM_STEP_ID", "SLURM_NODEID",
                          "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
      names.push_back(v);
    }
    for (const std::string& n : names) {
      if (const char* old = getenv(n.c_str())) saved_[n] = old;
      unsetenv(n.c_str());
    }
    for (const auto& [k, v] : vars) setenv(k.c_str(), v.c_str(), 1);
    set_ = names;
    for (const auto& [k, _] : vars) set_.push_back(k);
  }
  ~ScopedEnv() {
    for (const std::string& n : set_) unsetenv(n.c_str());
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
  std::vector<std::string> set_;
};

const std::map<std::string, std::string> kTorchrun = {
    {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "r9"}};

ConsumerOptions With(std::optional<std::string> group, std::optional<uint32_t> rank = {},
                     std::optional<uint32_t> world = {}) {
  ConsumerOptions o;
  o.group = std::move(group);
  o.rank = rank;
  o.world_size = world;
  return o;
}

GroupMembership Must(const ConsumerOptions& o) {
  auto r = ResolveGroup(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r.ok() && r->has_value());
  return r.ok() && r->has_value() ? **r : GroupMembership{};
}

bool NoGroup(const ConsumerOptions& o) {
  auto r = ResolveGroup(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() && !r->has_value();
}

void ExpectError(const ConsumerOptions& o, const std::string& text) {
  auto r = ResolveGroup(o);
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().message();
}

TEST(ResolveGroupTest, WithoutALauncherTheDefaultIsTheWholeStream) {
  ScopedEnv env({});
  EXPECT_TRUE(NoGroup(ConsumerOptions{}));
  const GroupMembership m = Must(With("g", 2, 3));
  EXPECT_EQ(m.group, "g");
  EXPECT_EQ(m.rank, 2u);
  EXPECT_EQ(m.world_size, 3u);
  EXPECT_EQ(m.source, "options");
  ExpectError(With(std::nullopt, 0, 2), "need a group name");
  ExpectError(With("g", 0), "needs rank and world_size");
  ExpectError(With("g", 3, 3), "rank 3 is not below world_size 3");
  ExpectError(With("g", 0, 0), "world_size 0 is out of range");
  ExpectError(With(std::string(300, 'g'), 0, 2), "group names are 1 to 256 bytes");
}

TEST(ResolveGroupTest, UnderTorchrunTheJobsGroupWithTheLocalRank) {
  ScopedEnv env(kTorchrun);
  GroupMembership m = Must(ConsumerOptions{});
  EXPECT_EQ(m.group, "torchrun:r9:0");
  EXPECT_EQ(m.rank, 1u);
  EXPECT_EQ(m.world_size, 2u);
  EXPECT_NE(m.source.find("torchrun"), std::string::npos);
  // Explicit values win, field by field.
  m = Must(With("mine"));
  EXPECT_EQ(m.group, "mine");
  EXPECT_EQ(m.rank, 1u);
  m = Must(With(std::nullopt, 0, 4));
  EXPECT_EQ(m.group, "torchrun:r9:0");
  EXPECT_EQ(m.rank, 0u);
  EXPECT_EQ(m.world_size, 4u);
  EXPECT_EQ(m.source, "options");
  // group "" opts out.
  EXPECT_TRUE(NoGroup(With("")));
  ExpectError(With("", 0, 2), "the group is disabled");
}

TEST(ResolveGroupTest, OneLocalRankIsNoGroupUnlessNamed) {
  ScopedEnv env({{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}, {"TORCHELASTIC_RUN_ID", "x"}});
  EXPECT_TRUE(NoGroup(ConsumerOptions{}));
  const GroupMembership m = Must(With("solo"));
  EXPECT_EQ(m.world_size, 1u);
}

TEST(ResolveGroupTest, TheEnvironmentsOptOutAndErrors) {
  {
    std::map<std::string, std::string> vars = kTorchrun;
    vars["BATCHCAST_GROUP"] = "none";
    ScopedEnv env(vars);
    EXPECT_TRUE(NoGroup(ConsumerOptions{}));
  }
  {
    ScopedEnv env(std::map<std::string, std::string>{{"LOCAL_RANK", "0"}});
    ExpectError(ConsumerOptions{}, "LOCAL_WORLD_SIZE is not");
    // Fully explicit options do not read the launcher's variables.
    EXPECT_EQ(Must(With("g", 0, 2)).group, "g");
    EXPECT_TRUE(NoGroup(With("")));
  }
}

}  // namespace
}  // namespace batchcast
