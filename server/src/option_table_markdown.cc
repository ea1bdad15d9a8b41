// OptionTableMarkdown: the option table as the Markdown of docs/options.md,
// the reference of every server option (`batchcast-server serve
// --help-markdown` prints it; tests/tools/options_doc_test.cmake fails when
// the committed file differs).
#include <string>
#include <string_view>

#include "batchcast/server/option_table.h"

namespace batchcast {
namespace {

constexpr std::string_view kRegenerate =
    "build/tools/batchcast-server serve --help-markdown > docs/options.md";

constexpr OptionGroup kGroups[] = {OptionGroup::kSource, OptionGroup::kRing, OptionGroup::kOrder,
                                   OptionGroup::kConsumers};

// Text for a table cell: '|' would end the cell, '<' and '>' would read as
// HTML.
std::string Cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Code(std::string_view text) { return "`" + Cell(text) + "`"; }

// How the command line writes the option: `DATA`, `--batch-size N`,
// `--shuffle`, `--no-shuffle`.
std::string OptionCell(const ServerOption& o) {
  if (o.name == "data") return Code("DATA") + " (positional)";
  const std::string flag = CommandLineName(o.name);
  if (o.type == OptionType::kFlag) return Code(flag) + ", " + Code("--no-" + flag.substr(2));
  return Code(flag + " " + std::string(o.value_name));
}

std::string DefaultCell(const ServerOption& o, const ServerOptions& defaults) {
  if (o.name == "data") return "";
  const std::string value = o.get(defaults);
  if (o.type == OptionType::kFlag) return value == "true" ? "on" : "off";
  return value.empty() ? "" : Code(value);
}

}  // namespace

std::string OptionTableMarkdown() {
  const ServerOptions defaults;
  std::string md;
  md +=
      "<!-- Generated from the server's option table (server/src/option_table.cc); do not "
      "edit. Regenerate: ";
  md += kRegenerate;
  md += " -->\n";
  md += R"(# Server options

The options of `batchcast-server serve`, which `batchcast-launch` takes too.
Python's `batchcast.Server` takes the same names in snake_case
(`batch_size=256` for `--batch-size 256`), durations in seconds, flags as
`True` or `False` (`shuffle=False` for `--no-shuffle`) and `R,G,B` as three
numbers; `batchcast.Producer` takes the ring and consumer options. Options
marked *CUDA ring only* change nothing on a host ring (`--device cpu`): the
server says at start that it ignores them.
)";
  for (OptionGroup group : kGroups) {
    md += "\n## " + std::string(OptionGroupTitle(group)) + "\n\n";
    md += std::string(OptionGroupHelp(group)) + ".\n\n";
    md += "| option | default | meaning |\n| --- | --- | --- |\n";
    for (const ServerOption& o : ServerOptionTable()) {
      if (o.group != group) continue;
      md += "| " + OptionCell(o) + " | " + DefaultCell(o, defaults) + " | " + Cell(o.help) +
            (o.cuda_only ? " (*CUDA ring only*)" : "") + " |\n";
    }
  }
  return md;
}

}  // namespace batchcast
