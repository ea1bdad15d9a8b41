// ResolveGroup: a consumer's group from its options and the launcher's
// environment (Note [Launcher environment], core/src/launcher_env.h).
#include "batchcast/client/consumer.h"
#include "core/src/launcher_env.h"
#include "core/src/protocol.h"

namespace batchcast {
namespace {

Status CheckMembership(const GroupMembership& m) {
  if (m.group.empty() || m.group.size() > proto::kMaxGroupName) {
    return InvalidArgumentError("group names are 1 to " + std::to_string(proto::kMaxGroupName) +
                                " bytes long");
  }
  if (m.world_size == 0 || m.world_size > proto::kMaxWorldSize) {
    return InvalidArgumentError("world_size " + std::to_string(m.world_size) +
                                " is out of range 1.." + std::to_string(proto::kMaxWorldSize));
  }
  if (m.rank >= m.world_size) {
    return InvalidArgumentError("rank " + std::to_string(m.rank) + " is not below world_size " +
                                std::to_string(m.world_size) + " (group '" + m.group + "')");
  }
  return Status::Ok();
}

}  // namespace

Result<std::optional<GroupMembership>> ResolveGroup(const ConsumerOptions& options) {
  using None = std::optional<GroupMembership>;
  if (options.group && options.group->empty()) {
    if (options.rank || options.world_size) {
      return InvalidArgumentError("rank and world_size need a group, but the group is disabled");
    }
    return None();
  }
  const bool all_explicit = options.group && options.rank && options.world_size;
  std::optional<LauncherRank> launcher;
  if (!all_explicit) {
    BATCHCAST_ASSIGN_OR_RETURN(launcher, LauncherRankFromEnv());
  }
  GroupMembership m;
  if (options.group) {
    m.group = *options.group;
  } else if (launcher && (launcher->world_size > 1 || options.rank || options.world_size)) {
    m.group = launcher->group;
  } else if (options.rank || options.world_size) {
    return InvalidArgumentError(
        "rank and world_size need a group name: pass group=NAME (no torchrun or SLURM rank is "
        "set in the environment)");
  } else {
    return None();  // no launcher, or one local rank: the whole stream
  }
  const bool from_launcher = launcher && !(options.rank && options.world_size);
  m.rank = options.rank ? *options.rank : launcher ? launcher->rank : 0;
  m.world_size = options.world_size ? *options.world_size : launcher ? launcher->world_size : 0;
  if (!launcher && (!options.rank || !options.world_size)) {
    return InvalidArgumentError("group '" + m.group +
                                "' needs rank and world_size (no torchrun or SLURM rank is set "
                                "in the environment)");
  }
  m.source = from_launcher ? launcher->source : "options";
  BATCHCAST_RETURN_IF_ERROR(CheckMembership(m));
  return std::optional<GroupMembership>(std::move(m));
}

}  // namespace batchcast
