// ConsumerPosition's text form (consumer.h): one line of named integers, a
// check digest over them, then the stream's identity (which holds spaces).
#include <charconv>
#include <map>

#include "batchcast/client/consumer.h"
#include "core/src/stream_identity.h"

namespace batchcast {
namespace {

constexpr std::string_view kMagic = "batchcast-position/";

// The integer fields in text order, as name and value.
std::vector<std::pair<std::string_view, uint64_t>> Integers(const ConsumerPosition& p) {
  return {{"epoch", p.epoch},           {"step", p.step},       {"epoch_start", p.epoch_start},
          {"next_seq", p.next_seq},     {"skipped", p.skipped}, {"batch_size", p.batch_size},
          {"world_size", p.world_size}, {"rank", p.rank}};
}

// The text every field is in, without the check.
std::string Body(const ConsumerPosition& p) {
  std::string s = std::string(kMagic) + std::to_string(ConsumerPosition::kFormat);
  for (const auto& [name, value] : Integers(p)) {
    s += " " + std::string(name) + "=" + std::to_string(value);
  }
  return s + " stream=" + p.stream;
}

Status Bad(const std::string& why) {
  return InvalidArgumentError("not a saved consumer position: " + why);
}

}  // namespace

std::string ConsumerPosition::Check() const { return Hex64(Fnv1a64(Body(*this))); }

std::string ConsumerPosition::ToString() const {
  std::string s = Body(*this);
  const size_t stream_at = s.find(" stream=");
  return s.substr(0, stream_at) + " check=" + Check() + s.substr(stream_at);
}

Result<ConsumerPosition> ConsumerPosition::Parse(std::string_view text) {
  if (!text.starts_with(kMagic)) return Bad("it does not start with '" + std::string(kMagic) + "'");
  text.remove_prefix(kMagic.size());
  const size_t space = text.find(' ');
  uint32_t format = 0;
  const std::string_view format_text = text.substr(0, space);
  auto [end, ec] =
      std::from_chars(format_text.data(), format_text.data() + format_text.size(), format);
  if (ec != std::errc() || end != format_text.data() + format_text.size()) {
    return Bad("bad format version '" + std::string(format_text) + "'");
  }
  if (format > kFormat) {
    return InvalidArgumentError("the saved position is of format " + std::to_string(format) +
                                ", newer than this batchcast's (" + std::to_string(kFormat) +
                                "): resume with the batchcast release that saved it, or a newer "
                                "one");
  }
  std::map<std::string, std::string, std::less<>> fields;
  std::optional<std::string> stream;
  text.remove_prefix(space == std::string_view::npos ? text.size() : space + 1);
  while (!text.empty()) {
    if (text.starts_with("stream=")) {
      stream = std::string(text.substr(7));
      break;
    }
    const size_t sp = text.find(' ');
    const std::string_view item = text.substr(0, sp);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return Bad("'" + std::string(item) + "' is no name=value");
    const std::string name(item.substr(0, eq));
    if (!fields.emplace(name, std::string(item.substr(eq + 1))).second) {
      return Bad("'" + name + "' twice");
    }
    text.remove_prefix(sp == std::string_view::npos ? text.size() : sp + 1);
  }
  if (!stream) return Bad("no stream");
  ConsumerPosition p;
  p.stream = *stream;
  auto take = [&](std::string_view name, auto& out) -> Status {
    auto it = fields.find(name);
    if (it == fields.end()) return Bad("no " + std::string(name));
    const std::string& v = it->second;
    auto [e, err] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (err != std::errc() || e != v.data() + v.size()) {
      return Bad(std::string(name) + " '" + v + "' is no integer in range");
    }
    fields.erase(it);
    return Status::Ok();
  };
  BATCHCAST_RETURN_IF_ERROR(take("epoch", p.epoch));
  BATCHCAST_RETURN_IF_ERROR(take("step", p.step));
  BATCHCAST_RETURN_IF_ERROR(take("epoch_start", p.epoch_start));
  BATCHCAST_RETURN_IF_ERROR(take("next_seq", p.next_seq));
  BATCHCAST_RETURN_IF_ERROR(take("skipped", p.skipped));
  BATCHCAST_RETURN_IF_ERROR(take("batch_size", p.batch_size));
  BATCHCAST_RETURN_IF_ERROR(take("world_size", p.world_size));
  BATCHCAST_RETURN_IF_ERROR(take("rank", p.rank));
  auto check = fields.find("check");
  if (check == fields.end()) return Bad("no check");
  if (check->second != p.Check()) {
    return InvalidArgumentError(
        "the saved consumer position is corrupt: its check does not match its contents");
  }
  fields.erase(check);
  if (!fields.empty()) return Bad("unknown field '" + fields.begin()->first + "'");
  return p;
}

}  // namespace batchcast
