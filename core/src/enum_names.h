// EnumNames: the text names of an option-like enum, declared once as a table,
// with the Parse/Name pair every such enum offers (LagPolicy, JoinPolicy,
// DecodeMode, ...), or only the Name of any enum (StatusCode, ...). Private to
// the project: "core/src/enum_names.h".
//
//   constexpr EnumNames<LagPolicy, 3> kLagPolicyNames{"lag_policy", {{
//       {LagPolicy::kBlock, "block"}, {LagPolicy::kSkip, "skip"}, {LagPolicy::kEvict, "evict"}}}};
//   Result<LagPolicy> ParseLagPolicy(std::string_view t) { return kLagPolicyNames.Parse(t); }
//
// Thread-safety: immutable.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "batchcast/core/status.h"

namespace batchcast {

template <typename E, size_t N>
struct EnumNames {
  std::string_view option;  // the option's name, for error messages
  std::array<std::pair<E, std::string_view>, N> names;

  // InvalidArgument "<option> must be a, b or c, got 'x'" for an unknown name.
  Result<E> Parse(std::string_view text) const {
    for (const auto& [value, name] : names) {
      if (name == text) return value;
    }
    std::string choices;
    for (size_t i = 0; i < N; ++i) {
      if (i > 0) choices += i + 1 == N ? " or " : ", ";
      choices += names[i].second;
    }
    return InvalidArgumentError(std::string(option) + " must be " + choices + ", got '" +
                                std::string(text) + "'");
  }
  // `unknown` for a value outside the table (a corrupt enum).
  constexpr std::string_view Name(E value, std::string_view unknown = "?") const {
    for (const auto& [v, name] : names) {
      if (v == value) return name;
    }
    return unknown;
  }
};

}  // namespace batchcast
