// AddServerOptions: the server's option table (batchcast/server/option_table.h)
// as CLI11 options, for `batchcast-server serve` and for the benchmark programs
// that configure a source the way the server does (benchmarks/), so that an
// option is spelled, parsed and documented the same everywhere.
//
// Header-only: used by executables that link CLI11 and batchcast::server.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "batchcast/core/status.h"
#include "batchcast/server/option_table.h"
#include "batchcast/server/server_options.h"

namespace batchcast {

// Adds one command-line option per entry of the option table (only those named
// in `only`, when it is not empty): the data path is positional, flags get
// --x / --no-x, triples take "R,G,B" or three values. A value given on the
// command line is set in `options` (SetServerOption); a bad one is appended to
// `errors`, to be reported after parsing. Help texts show the values `options`
// holds now as the defaults.
inline void AddServerOptions(CLI::App* app, ServerOptions& options, std::vector<Status>& errors,
                             std::initializer_list<std::string_view> only = {}) {
  const ServerOptions defaults = options;
  for (const ServerOption& opt : ServerOptionTable()) {
    if (only.size() > 0 && std::find(only.begin(), only.end(), opt.name) == only.end()) continue;
    const std::string flag = CommandLineName(opt.name);
    const std::string name(opt.name);
    auto set = [&options, &errors, name](const std::string& text) {
      if (Status s = SetServerOption(options, name, text); !s.ok()) errors.push_back(std::move(s));
    };
    // Sets the option from several values joined by `sep`.
    auto set_joined = [set](std::string sep) {
      return [set, sep](const std::vector<std::string>& v) {
        std::string joined;
        for (const std::string& x : v) joined += (joined.empty() ? "" : sep) + x;
        set(joined);
      };
    };
    const std::string def = opt.get(defaults);
    CLI::Option* added = nullptr;
    std::string help(opt.help);
    if (opt.cuda_only) help += " (CUDA ring only)";
    if (!def.empty() && opt.type != OptionType::kFlag && name != "data") {
      help += " [default: " + def + "]";
    }
    switch (opt.type) {
      case OptionType::kFlag:
        added = app->add_flag_function(
            flag + ",!--no-" + flag.substr(2),
            [set](int64_t count) { set(count > 0 ? "true" : "false"); },
            help + (def == "true" ? " [default: on]" : " [default: off]"));
        break;
      case OptionType::kTriple:
        added = app->add_option_function<std::vector<std::string>>(flag, set_joined(","), help)
                    ->expected(1, 3)
                    ->delimiter(',')
                    ->type_name(std::string(opt.value_name));
        break;
      default:
        if (name == "data") {
          // Several paths (tar shards the shell expanded from a glob, or
          // listed) are one shard list, joined by "::" (shard_pattern.h).
          added = app->add_option_function<std::vector<std::string>>(name, set_joined("::"), help)
                      ->expected(1, -1)
                      ->type_name(std::string(opt.value_name));
          break;
        }
        added = app->add_option_function<std::string>(flag, set, help)
                    ->type_name(std::string(opt.value_name));
        break;
    }
    if (name != "data") added->group(std::string(OptionGroupTitle(opt.group)));
  }
}

}  // namespace batchcast
