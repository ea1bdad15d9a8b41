#include "batchcast/core/join_policy.h"

#include <string>

namespace batchcast {

Result<JoinPolicy> ParseJoinPolicy(std::string_view text) {
  if (text == "immediate") return JoinPolicy::kImmediate;
  if (text == "next_epoch") return JoinPolicy::kNextEpoch;
  return InvalidArgumentError("join must be 'immediate' or 'next_epoch', got '" +
                              std::string(text) + "'");
}

std::string_view JoinPolicyName(JoinPolicy policy) {
  switch (policy) {
    case JoinPolicy::kImmediate: return "immediate";
    case JoinPolicy::kNextEpoch: return "next_epoch";
  }
  return "?";
}

}  // namespace batchcast
