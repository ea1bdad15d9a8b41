// ConsumerPosition's text form (consumer.h): one line of named integers, a
// check digest over them, then the stream's identity (which holds spaces).
// One table of its integer fields serves the text and the bindings.
#include <charconv>
#include <limits>

#include "batchcast/client/consumer.h"
#include "core/src/stream_identity.h"

namespace batchcast {
namespace {

constexpr std::string_view kMagic = "batchcast-position/";

struct IntegerField {
  std::string_view name;
  uint64_t max;
  uint64_t (*get)(const ConsumerPosition&);
  void (*set)(ConsumerPosition&, uint64_t);
};

template <auto Member>
constexpr IntegerField Field(std::string_view name) {
  using T = std::remove_cvref_t<decltype(std::declval<ConsumerPosition&>().*Member)>;
  return {name, std::numeric_limits<T>::max(),
          [](const ConsumerPosition& p) -> uint64_t { return p.*Member; },
          [](ConsumerPosition& p, uint64_t v) { p.*Member = static_cast<T>(v); }};
}

// The integer fields in text order.
constexpr IntegerField kIntegers[] = {
    Field<&ConsumerPosition::epoch>("epoch"),
    Field<&ConsumerPosition::step>("step"),
    Field<&ConsumerPosition::epoch_start>("epoch_start"),
    Field<&ConsumerPosition::next_seq>("next_seq"),
    Field<&ConsumerPosition::skipped>("skipped"),
    Field<&ConsumerPosition::batch_size>("batch_size"),
    Field<&ConsumerPosition::world_size>("world_size"),
    Field<&ConsumerPosition::rank>("rank"),
};

// The text every field is in, without the check.
std::string Body(const ConsumerPosition& p) {
  std::string s = std::string(kMagic) + std::to_string(ConsumerPosition::kFormat);
  for (const IntegerField& f : kIntegers) {
    s += " " + std::string(f.name) + "=" + std::to_string(f.get(p));
  }
  return s + " stream=" + p.stream;
}

Status Bad(const std::string& why) {
  return InvalidArgumentError("not a saved consumer position: " + why);
}

// `text` as an integer of at most `max`.
bool ParseInteger(std::string_view text, uint64_t max, uint64_t& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty() && out <= max;
}

}  // namespace

std::string ConsumerPosition::Check() const { return Hex64(Fnv1a64(Body(*this))); }

std::string ConsumerPosition::ToString() const {
  std::string s = Body(*this);
  const size_t stream_at = s.find(" stream=");
  return s.substr(0, stream_at) + " check=" + Check() + s.substr(stream_at);
}

std::vector<std::pair<std::string_view, uint64_t>> ConsumerPosition::Integers() const {
  std::vector<std::pair<std::string_view, uint64_t>> out;
  for (const IntegerField& f : kIntegers) out.emplace_back(f.name, f.get(*this));
  return out;
}

Result<ConsumerPosition> ConsumerPosition::FromFields(
    uint64_t format, std::map<std::string, std::string, std::less<>> fields) {
  if (format > kFormat) {
    return InvalidArgumentError("the saved position is of format " + std::to_string(format) +
                                ", newer than this batchcast's (" + std::to_string(kFormat) +
                                "): resume with the batchcast release that saved it, or a newer "
                                "one");
  }
  ConsumerPosition p;
  auto take = [&](std::string_view name) -> Result<std::string> {
    auto it = fields.find(name);
    if (it == fields.end()) return Bad("no " + std::string(name));
    std::string v = std::move(it->second);
    fields.erase(it);
    return v;
  };
  BATCHCAST_ASSIGN_OR_RETURN(p.stream, take("stream"));
  for (const IntegerField& f : kIntegers) {
    BATCHCAST_ASSIGN_OR_RETURN(const std::string text, take(f.name));
    uint64_t v = 0;
    if (!ParseInteger(text, f.max, v)) {
      return Bad(std::string(f.name) + " '" + text + "' is no integer in range");
    }
    f.set(p, v);
  }
  BATCHCAST_ASSIGN_OR_RETURN(const std::string check, take("check"));
  if (check != p.Check()) {
    return InvalidArgumentError(
        "the saved consumer position is corrupt: its check does not match its contents");
  }
  if (!fields.empty()) return Bad("unknown field '" + fields.begin()->first + "'");
  return p;
}

Result<ConsumerPosition> ConsumerPosition::Parse(std::string_view text) {
  if (!text.starts_with(kMagic)) return Bad("it does not start with '" + std::string(kMagic) + "'");
  text.remove_prefix(kMagic.size());
  const size_t space = std::min(text.find(' '), text.size());
  uint64_t format = 0;
  if (!ParseInteger(text.substr(0, space), UINT32_MAX, format)) {
    return Bad("bad format version '" + std::string(text.substr(0, space)) + "'");
  }
  text.remove_prefix(std::min(space + 1, text.size()));
  std::map<std::string, std::string, std::less<>> fields;
  while (!text.empty()) {
    if (text.starts_with("stream=")) {  // the rest of the line
      fields.emplace("stream", std::string(text.substr(7)));
      break;
    }
    const std::string_view item = text.substr(0, text.find(' '));
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return Bad("'" + std::string(item) + "' is no name=value");
    const std::string name(item.substr(0, eq));
    if (!fields.emplace(name, std::string(item.substr(eq + 1))).second) {
      return Bad("'" + name + "' twice");
    }
    text.remove_prefix(std::min(item.size() + 1, text.size()));
  }
  return FromFields(format, std::move(fields));
}

}  // namespace batchcast
