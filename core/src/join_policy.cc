#include "batchcast/core/join_policy.h"

#include "core/src/enum_names.h"

namespace batchcast {
namespace {
constexpr EnumNames<JoinPolicy, 2> kNames{
    "join", {{{JoinPolicy::kImmediate, "immediate"}, {JoinPolicy::kNextEpoch, "next_epoch"}}}};
}  // namespace

Result<JoinPolicy> ParseJoinPolicy(std::string_view text) { return kNames.Parse(text); }
std::string_view JoinPolicyName(JoinPolicy policy) { return kNames.Name(policy); }

}  // namespace batchcast
