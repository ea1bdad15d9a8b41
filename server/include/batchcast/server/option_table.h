// The server's option table: every ServerOptions field, declared once, with
// its name, group, type, help, default and how to read it from text. It is
// the one description of an option:
//  - the command line (batchcast-server serve and the benchmarks) and its
//    reference, docs/options.md (OptionTableMarkdown, printed by
//    `batchcast-server serve --help-markdown`);
//  - Python: batchcast.Server's keyword arguments, the options
//    batchcast.Producer takes (the ring and consumer groups) and
//    batchcast-launch's command line, which hands its values over as text
//    (`batchcast._core.server_options()` lists the table);
//  - the server's warning about CUDA-only options on a host ring.
// So an option exists everywhere or nowhere. Names are snake_case; the
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

// How an option's value is written: how the command line spells it (flags
// are --x / --no-x) and which Python types batchcast.Server takes for it.
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
std::string_view OptionGroupName(OptionGroup group);   // "source", "ring", "order", "consumers"
std::string_view OptionGroupTitle(OptionGroup group);  // "Source options"
// What the group's options configure, one sentence ("The samples: ...").
std::string_view OptionGroupHelp(OptionGroup group);
std::string_view OptionTypeName(OptionType type);  // "text", "integer", "seconds", "flag", "triple"

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
  // Only a CUDA ring uses it (GPU decode, stream priority): on a host ring it
  // changes nothing, and the server says so at start (CudaOnlyOptionsSet).
  bool cuda_only = false;
  // An integer option that takes text forms too (metrics_port: "any",
  // "HOST:PORT"): Python passes it an int or a str.
  bool takes_text = false;
};

// Every option, in the order of `batchcast-server serve --help`.
std::span<const ServerOption> ServerOptionTable();

// The option named `name` (snake_case or kebab-case, with or without "--"),
// or nullptr.
const ServerOption* FindServerOption(std::string_view name);

// "--batch-size" for "batch_size".
std::string CommandLineName(std::string_view name);

// How the command line gives `option` the value `text`: its CommandLineName,
// or "--no-x" for a flag set to false.
std::string CommandLineSpelling(const ServerOption& option, std::string_view text);

// Sets option `name` from `text`. InvalidArgument naming the option (both
// spellings) for an unknown name or a bad value.
Status SetServerOption(ServerOptions& options, std::string_view name, std::string_view text);

// The cuda_only options that `options` sets to other than their defaults, as
// "name (--flag)" joined by ", " in table order; empty when none.
std::string CudaOnlyOptionsSet(const ServerOptions& options);

// The option table as Markdown: a section per group, a table of option,
// default and meaning (docs/options.md, printed by
// `batchcast-server serve --help-markdown`).
std::string OptionTableMarkdown();

}  // namespace batchcast
