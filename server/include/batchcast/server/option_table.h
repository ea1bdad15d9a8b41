// The server's option table: every ServerOptions field, declared once, with
// its name, help and how to read it from text.
//
// The command line (batchcast-server serve and the benchmarks) and the
// Python bindings (batchcast.Server keyword arguments) both walk this table,
// so an option exists in both or in neither. Names are snake_case; the
// command line spells them --kebab-case. Durations are seconds.
//
// Thread-safety: the table is immutable.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "batchcast/core/status.h"
#include "batchcast/server/server_options.h"

namespace batchcast {

// How an option's value is written, for parsers that type their input.
enum class OptionType : uint8_t {
  kText,     // a string (a path, a name, one of a few choices)
  kInteger,  // a non-negative integer
  kSeconds,  // a positive number of seconds
  kFlag,     // true or false (command line: --x / --no-x)
  kTriple,   // three numbers, "R,G,B"
};

// What an option configures (sections of --help; the Python Producer, which
// brings its own samples, takes the ring and consumer options only).
enum class OptionGroup : uint8_t {
  kSource,     // the samples: dataset, transforms, decode
  kRing,       // name, endpoint, device, slot size, slots
  kOrder,      // shuffle, epochs, shards
  kConsumers,  // lag policy, heartbeats, limits
};
std::string_view OptionGroupName(OptionGroup group);  // "source", "ring", "order", "consumers"

struct ServerOption {
  std::string_view name;  // snake_case, e.g. "batch_size"
  OptionGroup group;
  OptionType type;
  std::string_view value_name;  // for help texts: "N", "SECONDS", "block|skip|evict"
  std::string_view help;
  // Parses `text` into the option's field. InvalidArgument (without the
  // option's name; SetServerOption adds it) for text that is not a value of
  // the option's type; ranges between fields are left to Validate().
  Status (*set)(ServerOptions& options, std::string_view text);
  // The field's value as text that `set` accepts ("" when unset).
  std::string (*get)(const ServerOptions& options);
};

// Every option, in the order of `batchcast-server serve --help`.
std::span<const ServerOption> ServerOptionTable();

// The option named `name` (snake_case or kebab-case, with or without "--"),
// or nullptr.
const ServerOption* FindServerOption(std::string_view name);

// "--batch-size" for "batch_size".
std::string CommandLineName(std::string_view name);

// Sets option `name` from `text`. InvalidArgument naming the option (both
// spellings) for an unknown name or a bad value.
Status SetServerOption(ServerOptions& options, std::string_view name, std::string_view text);

}  // namespace batchcast
