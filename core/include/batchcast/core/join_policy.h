// JoinPolicy: how a consumer that connects to a running stream starts
// (docs/semantics.md, "Consumer semantics", Join).
#pragma once

#include <cstdint>
#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast {

enum class JoinPolicy : uint8_t {
  kImmediate = 0,  // at the oldest sample still held in the ring
  kNextEpoch = 1,  // at the start of a producer epoch
};

// "immediate" or "next_epoch"; InvalidArgument naming both otherwise.
Result<JoinPolicy> ParseJoinPolicy(std::string_view text);
std::string_view JoinPolicyName(JoinPolicy policy);

}  // namespace batchcast
