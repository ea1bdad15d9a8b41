#include "batchcast/server/option_table.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

namespace batchcast {
namespace {

std::string Quote(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string_view Trim(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  return t;
}

// A non-negative integer that fits T (no sign, no fraction, no overflow).
template <typename T>
Status ParseInteger(std::string_view text, T& out) {
  text = Trim(text);
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec == std::errc::invalid_argument || p != end) {
    return InvalidArgumentError("expected a non-negative integer, got " + Quote(text));
  }
  if (ec == std::errc::result_out_of_range ||
      v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    return InvalidArgumentError(Quote(text) + " is too large (at most " +
                                std::to_string(std::numeric_limits<T>::max()) + ")");
  }
  out = static_cast<T>(v);
  return Status::Ok();
}

Status ParseNumber(std::string_view text, double& out) {
  text = Trim(text);
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out);
  if (text.empty() || ec != std::errc() || p != end || !std::isfinite(out)) {
    return InvalidArgumentError("expected a number, got " + Quote(text));
  }
  return Status::Ok();
}

Status ParseSeconds(std::string_view text, std::chrono::milliseconds& out) {
  double s = 0;
  BATCHCAST_RETURN_IF_ERROR(ParseNumber(text, s));
  if (!(s > 0) || s > 1e6) {
    return InvalidArgumentError("expected a positive number of seconds (at most 1e6), got " +
                                Quote(text));
  }
  out = std::chrono::milliseconds(std::max<int64_t>(1, std::llround(s * 1000.0)));
  return Status::Ok();
}

Status ParseFlag(std::string_view text, bool& out) {
  text = Trim(text);
  if (text == "true" || text == "1" || text == "yes" || text == "on") {
    out = true;
  } else if (text == "false" || text == "0" || text == "no" || text == "off") {
    out = false;
  } else {
    return InvalidArgumentError("expected true or false, got " + Quote(text));
  }
  return Status::Ok();
}

Status ParseTriple(std::string_view text, std::array<float, 3>& out) {
  std::array<float, 3> v{};
  size_t n = 0;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    double d = 0;
    if (n == 3 || !ParseNumber(item, d).ok()) {
      return InvalidArgumentError("expected three numbers \"R,G,B\", got " + Quote(text));
    }
    v[n++] = static_cast<float>(d);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (n != 3) return InvalidArgumentError("expected three numbers \"R,G,B\", got " + Quote(text));
  out = v;
  return Status::Ok();
}

// A choice parsed by one of the Parse* functions of the enums.
template <typename T, typename Parse>
Status ParseChoice(std::string_view text, T& out, Parse parse) {
  Result<T> r = parse(Trim(text));
  if (!r.ok()) return r.status();
  out = *r;
  return Status::Ok();
}

std::string Seconds(std::chrono::milliseconds ms) {
  std::string s = std::to_string(static_cast<double>(ms.count()) / 1000.0);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::string Triple(const std::array<float, 3>& v) {
  std::string out;
  for (size_t i = 0; i < 3; ++i) {
    char buf[32];
    auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v[i]);
    out.append(buf, p);
    if (i < 2) out += ",";
  }
  return out;
}

using T = OptionType;
using O = ServerOptions;
using V = std::string_view;

// clang-format off
const ServerOption kOptions[] = {
  {"data", T::kText, "PATH", "image folder (class subfolders) or .tsv list (path<TAB>label)",
   [](O& o, V t) { o.source.data = std::string(t); return Status::Ok(); },
   [](const O& o) { return o.source.data; }},
  {"synthetic", T::kInteger, "N", "serve N synthetic samples instead of a dataset",
   [](O& o, V t) { return ParseInteger(t, o.source.synthetic); },
   [](const O& o) { return std::to_string(o.source.synthetic); }},
  {"name", T::kText, "NAME", "server name (endpoint, lock, shared memory)",
   [](O& o, V t) { o.name = std::string(t); return Status::Ok(); },
   [](const O& o) { return o.name; }},
  {"endpoint", T::kText, "URL", "ipc://PATH or tcp://127.0.0.1:PORT (default: by name)",
   [](O& o, V t) { o.endpoint = std::string(t); return Status::Ok(); },
   [](const O& o) { return o.endpoint; }},
  {"device", T::kText, "cpu|cuda:N", "where the ring lives (and, with cuda:N, where JPEGs are decoded)",
   [](O& o, V t) { return ParseChoice(t, o.source.device, ParseDevice); },
   [](const O& o) { return DeviceName(o.source.device); }},
  {"batch_size", T::kInteger, "N", "producer batch (one ring slot)",
   [](O& o, V t) { return ParseInteger(t, o.batch_size); },
   [](const O& o) { return std::to_string(o.batch_size); }},
  {"window", T::kInteger, "N", "ring slots",
   [](O& o, V t) { return ParseInteger(t, o.window); },
   [](const O& o) { return std::to_string(o.window); }},
  {"transform", T::kText, "train|eval", "augmentation (torchvision's ImageNet train or eval recipe)",
   [](O& o, V t) { return ParseChoice(t, o.source.transform, ParseTransformKind); },
   [](const O& o) { return std::string(TransformKindName(o.source.transform)); }},
  {"size", T::kInteger, "N", "output image size",
   [](O& o, V t) { return ParseInteger(t, o.source.size); },
   [](const O& o) { return std::to_string(o.source.size); }},
  {"dtype", T::kText, "float32|float16|bfloat16|uint8", "image dtype (default float32; uint8 for --synthetic)",
   [](O& o, V t) {
     DType d{};
     BATCHCAST_RETURN_IF_ERROR(ParseChoice(t, d, ParseDType));
     o.source.dtype = d;
     return Status::Ok();
   },
   [](const O& o) { return o.source.dtype ? std::string(DTypeName(*o.source.dtype)) : std::string(); }},
  {"layout", T::kText, "nchw|nhwc", "image memory layout",
   [](O& o, V t) { return ParseChoice(t, o.source.layout, ParseImageLayout); },
   [](const O& o) { return std::string(ImageLayoutName(o.source.layout)); }},
  {"mean", T::kTriple, "R,G,B", "normalization mean",
   [](O& o, V t) { return ParseTriple(t, o.source.mean); },
   [](const O& o) { return Triple(o.source.mean); }},
  {"std", T::kTriple, "R,G,B", "normalization standard deviation",
   [](O& o, V t) { return ParseTriple(t, o.source.std); },
   [](const O& o) { return Triple(o.source.std); }},
  {"seed", T::kInteger, "N", "shuffle and augmentation seed",
   [](O& o, V t) { return ParseInteger(t, o.source.seed); },
   [](const O& o) { return std::to_string(o.source.seed); }},
  {"shuffle", T::kFlag, "", "shuffle each epoch (--no-shuffle keeps the dataset order)",
   [](O& o, V t) { return ParseFlag(t, o.shuffle); },
   [](const O& o) { return std::string(o.shuffle ? "true" : "false"); }},
  {"epochs", T::kInteger, "N", "producer epochs (0 = no limit)",
   [](O& o, V t) { return ParseInteger(t, o.epochs); },
   [](const O& o) { return std::to_string(o.epochs); }},
  {"shard_rank", T::kInteger, "N", "this server's shard of the dataset",
   [](O& o, V t) { return ParseInteger(t, o.shard_rank); },
   [](const O& o) { return std::to_string(o.shard_rank); }},
  {"num_shards", T::kInteger, "N", "number of shards",
   [](O& o, V t) { return ParseInteger(t, o.num_shards); },
   [](const O& o) { return std::to_string(o.num_shards); }},
  {"workers", T::kInteger, "N", "CPU worker threads (0 = one per core; 2 with GPU decode)",
   [](O& o, V t) { return ParseInteger(t, o.source.workers); },
   [](const O& o) { return std::to_string(o.source.workers); }},
  {"decode", T::kText, "auto|cpu|gpu", "where JPEGs are decoded",
   [](O& o, V t) { return ParseChoice(t, o.source.decode, ParseDecodeMode); },
   [](const O& o) { return std::string(DecodeModeName(o.source.decode)); }},
  {"on_error", T::kText, "skip|fail", "what an undecodable file does",
   [](O& o, V t) { return ParseChoice(t, o.source.on_error, ParseErrorPolicy); },
   [](const O& o) { return std::string(ErrorPolicyName(o.source.on_error)); }},
  {"max_pixels", T::kInteger, "N", "largest image (width*height) to decode",
   [](O& o, V t) { return ParseInteger(t, o.source.max_pixels); },
   [](const O& o) { return std::to_string(o.source.max_pixels); }},
  {"lag_policy", T::kText, "block|skip|evict", "what happens to a consumer that holds the producer up",
   [](O& o, V t) { return ParseChoice(t, o.lag_policy, ParseLagPolicy); },
   [](const O& o) { return std::string(LagPolicyName(o.lag_policy)); }},
  {"lag_timeout", T::kSeconds, "SECONDS", "how long a consumer may hold the producer up before skip/evict",
   [](O& o, V t) { return ParseSeconds(t, o.lag_timeout); },
   [](const O& o) { return Seconds(o.lag_timeout); }},
  {"min_consumers", T::kInteger, "N", "consumers to wait for before the first write",
   [](O& o, V t) { return ParseInteger(t, o.min_consumers); },
   [](const O& o) { return std::to_string(o.min_consumers); }},
  {"heartbeat_timeout", T::kSeconds, "SECONDS", "silence after which a consumer (or the server) counts as dead",
   [](O& o, V t) { return ParseSeconds(t, o.heartbeat_timeout); },
   [](const O& o) { return Seconds(o.heartbeat_timeout); }},
  {"heartbeat_interval", T::kSeconds, "SECONDS", "time between heartbeats (default: heartbeat_timeout / 8)",
   [](O& o, V t) { return ParseSeconds(t, o.heartbeat_interval); },
   [](const O& o) { return o.heartbeat_interval.count() > 0 ? Seconds(o.heartbeat_interval) : std::string(); }},
  {"max_leases", T::kInteger, "N", "unreleased batches one consumer may hold",
   [](O& o, V t) { return ParseInteger(t, o.max_leases); },
   [](const O& o) { return std::to_string(o.max_leases); }},
  {"max_consumers", T::kInteger, "N", "consumers connected at once",
   [](O& o, V t) { return ParseInteger(t, o.max_consumers); },
   [](const O& o) { return std::to_string(o.max_consumers); }},
};
// clang-format on

std::string SnakeCase(std::string_view name) {
  while (name.starts_with("-")) name.remove_prefix(1);
  std::string s(name);
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

}  // namespace

std::span<const ServerOption> ServerOptionTable() { return kOptions; }

const ServerOption* FindServerOption(std::string_view name) {
  const std::string snake = SnakeCase(name);
  for (const ServerOption& o : kOptions) {
    if (o.name == snake) return &o;
  }
  return nullptr;
}

std::string CommandLineName(std::string_view name) {
  std::string s = "--" + std::string(name);
  for (char& c : s) {
    if (c == '_') c = '-';
  }
  return s;
}

Status SetServerOption(ServerOptions& options, std::string_view name, std::string_view text) {
  const ServerOption* o = FindServerOption(name);
  if (o == nullptr) {
    return InvalidArgumentError("unknown server option '" + std::string(name) + "'");
  }
  Status s = o->set(options, text);
  if (s.ok()) return s;
  // "lag_policy must be ..." reads "lag_policy (--lag-policy) must be ...";
  // other messages get the name in front.
  const std::string named = std::string(o->name) + " (" + CommandLineName(o->name) + ")";
  const std::string_view message = s.message();
  if (message.starts_with(std::string(o->name) + " ")) {
    return Status(s.code(), named + std::string(message.substr(o->name.size())));
  }
  return s.WithContext(named);
}

}  // namespace batchcast
