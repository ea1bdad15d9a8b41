// What a distributed launcher (torchrun, SLURM) tells a process about its
// place in a job: the consumer group a training rank joins by default, and
// the shard a per-node server serves. The one place that reads these
// variables: the client (ConsumerOptions, client/src/group_options.cc) and
// the server (ServerOptions::Shard, --shard-from-env) both call it, and
// batchcast.launch clears LauncherRankVariables() for its independent jobs.
//
// Note [Launcher environment]
// A training rank (docs/semantics.md, "Groups, several GPUs, several nodes"):
//  - torchrun (LOCAL_RANK set): group "torchrun:<run>:<restart>" with rank
//    LOCAL_RANK of LOCAL_WORLD_SIZE, where <run> is TORCHELASTIC_RUN_ID, or
//    MASTER_ADDR:MASTER_PORT when that is empty or "none" (torchrun's
//    default), and <restart> is TORCHELASTIC_RESTART_COUNT (0 if unset), so
//    the workers of an elastic restart form a new group even before the
//    server noticed that the old ones died.
//  - SLURM (else, SLURM_LOCALID and SLURM_JOB_ID set): group
//    "slurm:<job>.<step>" (SLURM_STEP_ID; "slurm:<job>" without one), rank
//    SLURM_LOCALID of SLURM_NTASKS_PER_NODE, or else of this node's entry
//    (SLURM_NODEID) of SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE
//    ("4(x2),3").
//  - BATCHCAST_GROUP: "none" = no group whatever the launcher says; another
//    value names the group instead of the derived name (rank and world size
//    still from the launcher).
//  - A local world size of 1: the client joins no group by default (a group
//    of one is the whole stream), but explicit group names still take the
//    rank from it.
// Values that are set but unusable (not a number, rank >= world size, a rank
// without a world size) are InvalidArgument naming the variables: silently
// reading the whole stream on every rank would duplicate data.
// A server's node shard (--shard-from-env): GROUP_RANK of GROUP_WORLD_SIZE or
// NNODES (torchrun's worker variables), else PET_NODE_RANK of PET_NNODES
// (torchrun's own options as variables, e.g. Kubeflow), else SLURM_NODEID of
// SLURM_NNODES.
//
// Thread-safety: pure functions of the `getenv` they are given.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "batchcast/core/status.h"

namespace batchcast {

// Looks a variable up: nullptr when unset. DefaultGetEnv is ::getenv.
using GetEnvFn = std::function<const char*(const char*)>;
const char* DefaultGetEnv(const char* name);

struct LauncherRank {
  std::string group;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  std::string source;  // which variables said so, for messages: "torchrun (LOCAL_RANK, ...)"
};
// The consumer group this process belongs to (Note [Launcher environment]),
// nullopt when none (no launcher, BATCHCAST_GROUP=none). A world of 1 is
// returned as such.
Result<std::optional<LauncherRank>> LauncherRankFromEnv(const GetEnvFn& getenv = DefaultGetEnv);

struct NodeShard {
  uint32_t shard_rank = 0;
  uint32_t num_shards = 1;
  std::string source;  // "GROUP_RANK/GROUP_WORLD_SIZE", "SLURM_NODEID/SLURM_NNODES", ...
};
// This node's shard (Note [Launcher environment]); nullopt when no launcher
// variables name it.
Result<std::optional<NodeShard>> NodeShardFromEnv(const GetEnvFn& getenv = DefaultGetEnv);

// The variables that make a process a rank of a launcher's job (the ones
// LauncherRankFromEnv reads, and torchrun's other per-worker ones):
// batchcast.launch removes them from its jobs' environment, since its jobs are
// independent of the job the launcher itself may run in.
std::span<const char* const> LauncherRankVariables();

}  // namespace batchcast
