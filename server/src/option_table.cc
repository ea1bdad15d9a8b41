#include "batchcast/server/option_table.h"

#include <arpa/inet.h>

#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "batchcast/core/check.h"
#include "device_list.h"

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

// Follows a path of member pointers from the options to one field:
// Field<&ServerOptions::source, &SourceOptions::size>(o) is o.source.size.
template <auto First, auto... Rest, typename Object>
auto& Field(Object& object) {
  if constexpr (sizeof...(Rest) == 0) {
    return object.*First;
  } else {
    return Field<Rest...>(object.*First);
  }
}

using O = ServerOptions;
using S = SourceOptions;
using V = std::string_view;

using G = OptionGroup;

// An option of the field at Path: `parse(text, field)` sets the field,
// `print(field)` gives its text ("" when unset). Both are captureless.
template <auto... Path, typename Parse, typename Print>
ServerOption FieldOption(V name, G group, OptionType type, V value_name, V help, Parse, Print) {
  return {name,
          group,
          type,
          value_name,
          help,
          [](O& o, V t) -> Status { return Parse{}(t, Field<Path...>(o)); },
          [](const O& o) -> std::string { return Print{}(Field<Path...>(o)); }};
}

template <auto... Path>
ServerOption Text(V name, G group, V value_name, V help) {
  auto parse = [](V t, auto& v) {
    v = std::string(t);
    return Status::Ok();
  };
  auto print = [](const auto& v) { return std::string(v); };
  return FieldOption<Path...>(name, group, OptionType::kText, value_name, help, parse, print);
}

template <auto... Path>
ServerOption Integer(V name, G group, V help) {
  auto parse = [](V t, auto& v) { return ParseInteger(t, v); };
  auto print = [](const auto& v) { return std::to_string(v); };
  return FieldOption<Path...>(name, group, OptionType::kInteger, "N", help, parse, print);
}

// An integer that may stay unset (its default is derived): prints "" then.
template <auto... Path>
ServerOption OptionalInteger(V name, G group, V help) {
  auto parse = [](V t, auto& out) {
    uint32_t v = 0;
    BATCHCAST_RETURN_IF_ERROR(ParseInteger(t, v));
    out = v;
    return Status::Ok();
  };
  auto print = [](const auto& v) { return v ? std::to_string(*v) : std::string(); };
  return FieldOption<Path...>(name, group, OptionType::kInteger, "N", help, parse, print);
}

// `zero_is_unset`: a zero duration prints as "" (its default is derived).
template <bool zero_is_unset, auto... Path>
ServerOption SecondsOption(V name, G group, V help) {
  auto parse = [](V t, auto& v) { return ParseSeconds(t, v); };
  auto print = [](auto ms) {
    return zero_is_unset && ms.count() == 0 ? std::string() : Seconds(ms);
  };
  return FieldOption<Path...>(name, group, OptionType::kSeconds, "SECONDS", help, parse, print);
}

template <auto... Path>
ServerOption TripleOption(V name, G group, V help) {
  auto parse = [](V t, auto& v) { return ParseTriple(t, v); };
  auto print = [](const auto& v) { return Triple(v); };
  return FieldOption<Path...>(name, group, OptionType::kTriple, "R,G,B", help, parse, print);
}

template <auto... Path>
ServerOption Flag(V name, G group, V help) {
  auto parse = [](V t, auto& v) { return ParseFlag(t, v); };
  auto print = [](const auto& v) { return std::string(v ? "true" : "false"); };
  return FieldOption<Path...>(name, group, OptionType::kFlag, "", help, parse, print);
}

// One of an enum's names, through its Parse and Name functions.
template <auto Parse, auto Name, auto... Path>
ServerOption Choice(V name, G group, V value_name, V help) {
  auto parse = [](V t, auto& v) { return ParseChoice(t, v, Parse); };
  auto print = [](const auto& v) { return std::string(Name(v)); };
  return FieldOption<Path...>(name, group, OptionType::kText, value_name, help, parse, print);
}

Status ParseDTypeOption(V t, std::optional<DType>& out) {
  DType d{};
  BATCHCAST_RETURN_IF_ERROR(ParseChoice(t, d, ParseDType));
  out = d;
  return Status::Ok();
}

// metrics_port's "[HOST:]PORT": PORT a number (0 alone = off) or "any";
// HOST an IPv4 address, "localhost" or "*" (every interface, 0.0.0.0).
Status ParseMetricsAddress(V text, O& o) {
  text = Trim(text);
  const size_t colon = text.rfind(':');
  const V port_text = colon == V::npos ? text : text.substr(colon + 1);
  const V host = colon == V::npos ? V() : text.substr(0, colon);
  uint32_t port = ServerOptions::kAnyMetricsPort;
  if (port_text != "any" &&
      (!ParseInteger(port_text, port).ok() || port > 65535 || (port == 0 && colon != V::npos))) {
    const std::string expected = "expected a port (1..65535; 0 alone = off), 'any', or HOST:PORT";
    return InvalidArgumentError(expected + ", got " + Quote(text));
  }
  std::string address(host);
  if (host == "localhost") address = "127.0.0.1";
  if (host == "*") address = "0.0.0.0";
  in_addr v4{};
  if (colon != V::npos && inet_pton(AF_INET, address.c_str(), &v4) != 1) {
    const std::string expected =
        "expected [HOST:]PORT with HOST an IPv4 address, 'localhost' or '*'";
    return InvalidArgumentError(expected + ", got " + Quote(text));
  }
  o.metrics_port = port;
  o.metrics_host = port == 0 ? std::string() : address;
  return Status::Ok();
}

// Marks an option that only a CUDA ring uses.
ServerOption CudaOnly(ServerOption option) {
  option.cuda_only = true;
  return option;
}

// Help texts are the option reference (docs/options.md is made from them):
// what the option does and its values, in words that stay true; no
// measurements.
// clang-format off
const ServerOption kOptions[] = {
  Text<&O::source, &S::data>("data", G::kSource, "PATH",
      "what to serve: an image folder (a subfolder per class), a .tsv list (path<TAB>label per "
      "line), or WebDataset tar shards ('train-{000000..001023}.tar', a glob, a folder of .tar "
      "files, several paths, or several joined by '::'); or --synthetic N instead"),
  Integer<&O::source, &S::synthetic>("synthetic", G::kSource,
      "serve N synthetic samples instead of a dataset (0 = serve DATA)"),
  Text<&O::name>("name", G::kRing, "NAME",
      "the server's name, which Loaders connect by: it picks the endpoint "
      "(ipc://$XDG_RUNTIME_DIR/batchcast/NAME.sock, or under /tmp/batchcast-UID/), the instance "
      "lock and the shared memory"),
  Text<&O::endpoint>("endpoint", G::kRing, "URL",
      "where consumers connect: ipc://PATH, or tcp://HOST:PORT, which is CURVE-encrypted and "
      "authenticated (see --key-file, --allow-remote); default: the ipc:// endpoint of --name"),
  Text<&O::key_file>("key_file", G::kRing, "FILE",
      "tcp:// only: the CURVE key file to serve with; consumers need a copy (default: "
      "$BATCHCAST_KEY_FILE, else your key in the runtime directory, made at first use)"),
  Flag<&O::allow_remote>("allow_remote", G::kRing,
      "let the endpoint (tcp://*:PORT, a LAN address) and the metrics endpoint "
      "(--metrics-port HOST:PORT) listen beyond loopback"),
  {"metrics_port", G::kRing, OptionType::kInteger, "[HOST:]PORT",
   "serve Prometheus metrics over HTTP, GET /metrics (docs/metrics.md), on this port of "
   "127.0.0.1 (0 = off; any = a free port, which the log and the stats' metrics_endpoint name); "
   "HOST:PORT listens on that IPv4 address instead (0.0.0.0 or *: every interface, with "
   "--allow-remote)",
   [](O& o, V t) { return ParseMetricsAddress(t, o); },
   [](const O& o) { return o.metrics_address(); },
   /*cuda_only=*/false, /*takes_text=*/true},
  {"device", G::kRing, OptionType::kText, "cpu|cuda:N|cuda:N,M,...|cuda:all",
   "where the ring lives: cpu (host shared memory) or cuda:N (GPU memory; JPEGs are then "
   "decoded on that GPU too); several GPUs (cuda:0,1, cuda:0,cuda:1 or cuda:all, every visible "
   "one): a ring and a producer per GPU sharing one stream, each sample decoded once on one "
   "GPU, each consumer reading its own GPU's ring and copying what another GPU decoded",
   [](O& o, V t) { return ParseDeviceOption(Trim(t), o); },
   [](const O& o) { return DeviceOptionName(o); }},
  Integer<&O::batch_size>("batch_size", G::kRing,
      "the producer's batch: the samples of one ring slot (consumers read at batch sizes of "
      "their own); with GPU decode each batch is one nvJPEG call, and 256 suits it"),
  Integer<&O::window>("window", G::kRing,
      "ring slots: how many batches the fastest consumer may run ahead of the slowest; 0: 8, or "
      "4 per ring with several GPUs (their rings share the window)"),
  Choice<ParsePlacement, PlacementName, &O::placement>("placement", G::kRing, "demand|round-robin",
      "several GPUs: which ring decodes the stream's next batch: demand gives each GPU with "
      "readers a share that follows its speed (GPUs of equal speed decode equal shares, in turn; "
      "a GPU slowed by a trainer beside it decodes less, and does not hold the others back), "
      "round-robin takes them in turn (each GPU decodes an equal share, and the node goes at its "
      "slowest GPU's pace); a DDP group's batches go to the GPU of the rank that reads them "
      "either way"),
  Flag<&O::attach>("attach", G::kRing,
      "let a process of this node take over a ring's decode (a trainer's "
      "batchcast.Loader(..., produce=True)): the decode of the trainer's GPU then runs in the "
      "trainer's own CUDA context, which the GPU does not time-slice against it; the server "
      "decodes the ring again when that process leaves or dies; --no-attach refuses them"),
  Integer<&O::resume_slots>("resume_slots", G::kRing,
      "ring slots kept for consumers that resume (load_state_dict) behind or ahead of the stream: "
      "their catch-up is written there from spare capacity; each holds a batch (0 = none)"),
  Choice<ParseTransformKind, TransformKindName, &O::source, &S::transform>("transform", G::kSource,
      "train|eval",
      "augmentation, torchvision's ImageNet recipes: train (random resized crop, horizontal "
      "flip) or eval (resize to size/0.875, center crop), then normalization"),
  Integer<&O::source, &S::size>("size", G::kSource, "output image size: images are size x size pixels"),
  {"dtype", G::kSource, OptionType::kText, "float32|float16|bfloat16|uint8",
   "image dtype (default float32, or uint8 with --synthetic)",
   [](O& o, V t) { return ParseDTypeOption(t, o.source.dtype); },
   [](const O& o) { return o.source.dtype ? std::string(DTypeName(*o.source.dtype)) : std::string(); }},
  Choice<ParseImageLayout, ImageLayoutName, &O::source, &S::layout>("layout", G::kSource, "nchw|nhwc",
      "image memory layout: nchw ([3, H, W] per sample) or nhwc ([H, W, 3])"),
  TripleOption<&O::source, &S::mean>("mean", G::kSource, "normalization mean of the R, G and B channels"),
  TripleOption<&O::source, &S::std>("std", G::kSource,
      "normalization standard deviation of the R, G and B channels"),
  Integer<&O::source, &S::seed>("seed", G::kOrder,
      "seed of the shuffle and of the augmentation (a sample's crop and flip depend on the seed, "
      "the epoch and its index only)"),
  Flag<&O::shuffle>("shuffle", G::kOrder, "shuffle each epoch (--no-shuffle keeps the dataset order)"),
  Integer<&O::epochs>("epochs", G::kOrder, "epochs to produce before the stream ends (0 = no limit)"),
  Integer<&O::source, &S::shuffle_buffer>("shuffle_buffer", G::kOrder,
      "tar shards: samples mixed across the shards' streams (memory: about this many encoded "
      "samples plus a batch; 0 or 1: no mixing)"),
  OptionalInteger<&O::shard_rank>("shard_rank", G::kOrder,
      "this server's shard of the dataset, for one server per node (default 0)"),
  OptionalInteger<&O::num_shards>("num_shards", G::kOrder, "number of shards (default 1)"),
  Flag<&O::shard_from_env>("shard_from_env", G::kOrder,
      "take the shard from the launcher: this node's rank and the number of nodes "
      "(GROUP_RANK/GROUP_WORLD_SIZE or NNODES, PET_NODE_RANK/PET_NNODES, SLURM_NODEID/SLURM_NNODES); "
      "--shard-rank/--num-shards win"),
  Integer<&O::source, &S::workers>("workers", G::kSource,
      "CPU decode threads (0 = one per core; with GPU decode, 2, for the files nvJPEG's hardware "
      "engine refuses)"),
  CudaOnly(Integer<&O::source, &S::device_cache_mb>("device_cache_mb", G::kSource,
      "GPU decode: MiB of device memory keeping the files the hardware engine refuses, decoded on "
      "the CPU once, for later epochs (0 = off: decoded every time)")),
  CudaOnly(Integer<&O::source, &S::transcode_cache_mb>("transcode_cache_mb", G::kSource,
      "GPU decode: MiB of host memory keeping progressive JPEGs losslessly re-encoded as "
      "baseline, so that the hardware engine decodes them from their second use on (0 = off: "
      "they are decoded on the CPU every time)")),
  CudaOnly(Integer<&O::source, &S::nvjpeg_calls>("nvjpeg_calls", G::kSource,
      "GPU decode: nvJPEG hardware calls in flight per batch, each on its own decoder, stream and "
      "thread (1..4)")),
  CudaOnly(Integer<&O::source, &S::read_threads>("read_threads", G::kSource,
      "GPU decode: threads reading the next batch's files at once (1..64; more for files not in "
      "the page cache; tar shards are read by one thread, in order)")),
  CudaOnly(Flag<&O::source, &S::nvjpeg_region>("nvjpeg_region", G::kSource,
      "GPU decode: the hardware engine writes only the part of each image the crop reads, the "
      "same pixels into a smaller buffer (--no-nvjpeg-region: whole images)")),
  Choice<ParseDecodeMode, DecodeModeName, &O::source, &S::decode>("decode", G::kSource, "auto|cpu|gpu",
      "where JPEGs are decoded: auto (the GPU of a CUDA ring where nvJPEG is built in, else the "
      "CPU), cpu (libjpeg-turbo) or gpu (nvJPEG; an error without a CUDA ring)"),
  CudaOnly(Choice<ParseStreamPriority, StreamPriorityName, &O::source, &S::gpu_priority>("gpu_priority",
      G::kSource, "normal|high",
      "CUDA stream priority of the server's GPU work; high lets it go before the kernels of a "
      "trainer in the same process (an in-process batchcast.Server, or a Loader decoding its "
      "ring: produce=True); no effect between processes")),
  Choice<ParseErrorPolicy, ErrorPolicyName, &O::source, &S::on_error>("on_error", G::kSource, "skip|fail",
      "what a file that cannot be used does: skip leaves it out (the header scan at start, or "
      "from its failed decode on), fail stops the server with its path and reason"),
  Integer<&O::source, &S::max_pixels>("max_pixels", G::kSource,
      "largest image (width * height) to decode; larger files count as bad files (--on-error)"),
  Choice<ParseLagPolicy, LagPolicyName, &O::lag_policy>("lag_policy", G::kConsumers, "block|skip|evict",
      "what happens to a consumer that holds the producer up: block waits for it, skip moves it "
      "forward (it misses the batches in between), evict disconnects it with an error (both after "
      "--lag-timeout)"),
  SecondsOption<false, &O::lag_timeout>("lag_timeout", G::kConsumers,
      "how long a consumer may hold the producer up before skip or evict"),
  Integer<&O::min_consumers>("min_consumers", G::kConsumers, "consumers to wait for before the first write"),
  SecondsOption<false, &O::heartbeat_timeout>("heartbeat_timeout", G::kConsumers,
      "silence after which a consumer (or, for a consumer, the server) counts as dead"),
  SecondsOption<true, &O::heartbeat_interval>("heartbeat_interval", G::kConsumers,
      "time between heartbeats (default: heartbeat_timeout / 8)"),
  Integer<&O::max_leases>("max_leases", G::kConsumers, "unreleased batches one consumer may hold"),
  Integer<&O::max_consumers>("max_consumers", G::kConsumers, "consumers connected at once"),
  SecondsOption<false, &O::group_timeout>("group_timeout", G::kConsumers,
      "how long the ranks of a consumer group may take to all connect"),
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

struct GroupTexts {
  std::string_view name, title, help;
};

// In the order of OptionGroup.
constexpr GroupTexts kGroupTexts[] = {
    {"source", "Source options", "The samples: the dataset, its decode and transforms"},
    {"ring", "Ring options",
     "Where the batches go: the server's name and endpoint, the ring's device, batch and slots"},
    {"order", "Order options", "The order of the samples: shuffle, epochs, shards"},
    {"consumers", "Consumer options", "The consumers: slow ones, liveness, limits"},
};

const GroupTexts& TextsOf(OptionGroup group) {
  const auto i = static_cast<size_t>(group);
  BATCHCAST_CHECK(i < std::size(kGroupTexts));
  return kGroupTexts[i];
}

}  // namespace

std::span<const ServerOption> ServerOptionTable() { return kOptions; }

std::string_view OptionGroupName(OptionGroup group) { return TextsOf(group).name; }
std::string_view OptionGroupTitle(OptionGroup group) { return TextsOf(group).title; }
std::string_view OptionGroupHelp(OptionGroup group) { return TextsOf(group).help; }

std::string_view OptionTypeName(OptionType type) {
  switch (type) {
    case OptionType::kText:
      return "text";
    case OptionType::kInteger:
      return "integer";
    case OptionType::kSeconds:
      return "seconds";
    case OptionType::kFlag:
      return "flag";
    case OptionType::kTriple:
      return "triple";
  }
  return "?";
}

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

std::string CommandLineSpelling(const ServerOption& option, std::string_view text) {
  const std::string flag = CommandLineName(option.name);
  bool on = true;
  if (option.type == OptionType::kFlag && ParseFlag(text, on).ok() && !on) {
    return "--no-" + flag.substr(2);
  }
  return flag;
}

std::string CudaOnlyOptionsSet(const ServerOptions& options) {
  const ServerOptions defaults;
  std::string set;
  for (const ServerOption& o : kOptions) {
    if (!o.cuda_only) continue;
    const std::string value = o.get(options);
    if (value == o.get(defaults)) continue;
    set += (set.empty() ? "" : ", ") + std::string(o.name) + " (" + CommandLineSpelling(o, value) +
           ")";
  }
  return set;
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
