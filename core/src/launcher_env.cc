#include "core/src/launcher_env.h"

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace batchcast {
namespace {

constexpr const char* kRankVariables[] = {
    // torchrun's per-worker variables (torch/distributed/elastic/agent).
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    // A SLURM task's place in its step (srun sets them again for its tasks).
    "SLURM_LOCALID", "SLURM_PROCID",
    // The opt-out / name of Note [Launcher environment].
    "BATCHCAST_GROUP"};

std::optional<std::string_view> Get(const GetEnvFn& getenv, const char* name) {
  const char* v = getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string_view(v);
}

// A non-negative integer variable; nullopt when unset.
Result<std::optional<uint32_t>> GetNumber(const GetEnvFn& getenv, const char* name) {
  const std::optional<std::string_view> text = Get(getenv, name);
  if (!text) return std::optional<uint32_t>();
  uint32_t v = 0;
  const char* end = text->data() + text->size();
  auto [p, ec] = std::from_chars(text->data(), end, v);
  if (text->empty() || ec != std::errc() || p != end) {
    return InvalidArgumentError(std::string(name) + "='" + std::string(*text) +
                                "' is not a non-negative integer");
  }
  return std::optional<uint32_t>(v);
}

// `rank` of `world` as read from the variables named `rank_var`, `world_var`.
Status CheckRank(uint32_t rank, uint32_t world, const std::string& rank_var,
                 const std::string& world_var) {
  if (world == 0 || rank >= world) {
    return InvalidArgumentError(rank_var + "=" + std::to_string(rank) + " is not below " +
                                world_var + "=" + std::to_string(world));
  }
  return Status::Ok();
}

// SLURM's compressed task counts, "4(x2),3": the entry of node `node`.
std::optional<uint32_t> TasksOfNode(std::string_view list, uint32_t node) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    uint32_t tasks = 0, repeat = 1;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), tasks);
    if (ec != std::errc()) return std::nullopt;
    std::string_view rest(p, item.data() + item.size() - p);
    if (rest.starts_with("(x") && rest.ends_with(")")) {
      rest = rest.substr(2, rest.size() - 3);
      auto [q, ec2] = std::from_chars(rest.data(), rest.data() + rest.size(), repeat);
      if (ec2 != std::errc() || q != rest.data() + rest.size()) return std::nullopt;
    } else if (!rest.empty()) {
      return std::nullopt;
    }
    if (node < repeat) return tasks;
    node -= repeat;
  }
  return std::nullopt;
}

Result<std::optional<LauncherRank>> FromTorchrun(const GetEnvFn& getenv) {
  BATCHCAST_ASSIGN_OR_RETURN(std::optional<uint32_t> rank, GetNumber(getenv, "LOCAL_RANK"));
  if (!rank) return std::optional<LauncherRank>();
  BATCHCAST_ASSIGN_OR_RETURN(std::optional<uint32_t> world, GetNumber(getenv, "LOCAL_WORLD_SIZE"));
  if (!world) {
    return InvalidArgumentError(
        "LOCAL_RANK is set but LOCAL_WORLD_SIZE is not: cannot tell this rank's consumer group "
        "(launch with torchrun, or pass group/rank/world_size, or group=False)");
  }
  BATCHCAST_RETURN_IF_ERROR(CheckRank(*rank, *world, "LOCAL_RANK", "LOCAL_WORLD_SIZE"));
  std::string run(Get(getenv, "TORCHELASTIC_RUN_ID").value_or(""));
  if (run.empty() || run == "none") {
    const auto addr = Get(getenv, "MASTER_ADDR");
    const auto port = Get(getenv, "MASTER_PORT");
    if (!addr || !port) {
      return InvalidArgumentError(
          "LOCAL_RANK is set but neither TORCHELASTIC_RUN_ID nor MASTER_ADDR and MASTER_PORT "
          "are: cannot name this job's consumer group (pass group=NAME, or group=False)");
    }
    run = std::string(*addr) + ":" + std::string(*port);
  }
  BATCHCAST_ASSIGN_OR_RETURN(std::optional<uint32_t> restart,
                             GetNumber(getenv, "TORCHELASTIC_RESTART_COUNT"));
  return std::optional<LauncherRank>(
      LauncherRank{"torchrun:" + run + ":" + std::to_string(restart.value_or(0)), *rank, *world,
                   "torchrun (LOCAL_RANK, LOCAL_WORLD_SIZE)"});
}

Result<std::optional<LauncherRank>> FromSlurm(const GetEnvFn& getenv) {
  BATCHCAST_ASSIGN_OR_RETURN(std::optional<uint32_t> rank, GetNumber(getenv, "SLURM_LOCALID"));
  const auto job = Get(getenv, "SLURM_JOB_ID");
  if (!rank || !job) return std::optional<LauncherRank>();
  BATCHCAST_ASSIGN_OR_RETURN(std::optional<uint32_t> world,
                             GetNumber(getenv, "SLURM_NTASKS_PER_NODE"));
  std::string world_var = "SLURM_NTASKS_PER_NODE";
  if (!world) {
    BATCHCAST_ASSIGN_OR_RETURN(std::optional<uint32_t> node, GetNumber(getenv, "SLURM_NODEID"));
    for (const char* var : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
      const auto list = Get(getenv, var);
      if (!list) continue;
      world = TasksOfNode(*list, node.value_or(0));
      if (!world) {
        return InvalidArgumentError(
            std::string(var) + "='" + std::string(*list) +
            "' has no entry for SLURM_NODEID=" + std::to_string(node.value_or(0)));
      }
      world_var = var;
      break;
    }
  }
  if (!world) {
    return InvalidArgumentError(
        "SLURM_LOCALID is set but not SLURM_NTASKS_PER_NODE (nor SLURM_STEP_TASKS_PER_NODE): "
        "cannot tell this task's consumer group (srun --ntasks-per-node N, or pass "
        "group/rank/world_size, or group=False)");
  }
  BATCHCAST_RETURN_IF_ERROR(CheckRank(*rank, *world, "SLURM_LOCALID", world_var));
  std::string name = "slurm:" + std::string(*job);
  if (const auto step = Get(getenv, "SLURM_STEP_ID")) name += "." + std::string(*step);
  return std::optional<LauncherRank>(
      LauncherRank{name, *rank, *world, "SLURM (SLURM_LOCALID, " + world_var + ")"});
}

}  // namespace

const char* DefaultGetEnv(const char* name) { return std::getenv(name); }

Result<std::optional<LauncherRank>> LauncherRankFromEnv(const GetEnvFn& getenv) {
  const std::optional<std::string_view> choice = Get(getenv, "BATCHCAST_GROUP");
  if (choice == "none") return std::optional<LauncherRank>();
  BATCHCAST_ASSIGN_OR_RETURN(std::optional<LauncherRank> r, FromTorchrun(getenv));
  if (!r) {
    BATCHCAST_ASSIGN_OR_RETURN(r, FromSlurm(getenv));
  }
  if (choice && !choice->empty()) {
    if (!r) {
      return InvalidArgumentError("BATCHCAST_GROUP='" + std::string(*choice) +
                                  "' names a group, but no launcher sets this process's rank "
                                  "(LOCAL_RANK or SLURM_LOCALID)");
    }
    r->group = std::string(*choice);
    r->source += " with BATCHCAST_GROUP";
  }
  return r;
}

Result<std::optional<NodeShard>> NodeShardFromEnv(const GetEnvFn& getenv) {
  struct Pair {
    const char* rank;
    std::vector<const char*> sizes;
  };
  const Pair pairs[] = {{"GROUP_RANK", {"GROUP_WORLD_SIZE", "NNODES"}},
                        {"PET_NODE_RANK", {"PET_NNODES"}},
                        {"SLURM_NODEID", {"SLURM_NNODES"}}};
  for (const Pair& p : pairs) {
    BATCHCAST_ASSIGN_OR_RETURN(std::optional<uint32_t> rank, GetNumber(getenv, p.rank));
    if (!rank) continue;
    for (const char* size_var : p.sizes) {
      BATCHCAST_ASSIGN_OR_RETURN(std::optional<uint32_t> size, GetNumber(getenv, size_var));
      if (!size) continue;
      BATCHCAST_RETURN_IF_ERROR(CheckRank(*rank, *size, p.rank, size_var));
      return std::optional<NodeShard>(
          NodeShard{*rank, *size, std::string(p.rank) + "/" + size_var});
    }
    std::string sizes;
    for (const char* s : p.sizes) sizes += (sizes.empty() ? "" : " or ") + std::string(s);
    return InvalidArgumentError(std::string(p.rank) + " is set but not " + sizes +
                                ": cannot tell the number of nodes");
  }
  return std::optional<NodeShard>();
}

std::span<const char* const> LauncherRankVariables() { return kRankVariables; }

}  // namespace batchcast
