#include "fuzz_frames.h"

#include <unistd.h>

#include <cstring>

#include "core/src/enum_names.h"

namespace batchcast::stress {
namespace {

constexpr uint32_t kCounts32[] = {0,     1,     2,          4096,        4097,       65535,
                                  65536, 65537, 0x7fffffff, 0x80000000u, 0xfffffffe, 0xffffffffu};
constexpr uint64_t kValues64[] = {0,         1, 2, 16, 1000, uint64_t{1} << 32, uint64_t{1} << 63,
                                  UINT64_MAX};

}  // namespace

std::string_view FrameFuzzer::KindName(Kind kind) {
  static constexpr EnumNames<Kind, 5> kNames{"frame kind",
                                             {{{Kind::kRandom, "random"},
                                               {Kind::kValid, "valid"},
                                               {Kind::kServerOnly, "server-only"},
                                               {Kind::kTruncated, "truncated"},
                                               {Kind::kMutated, "mutated"}}}};
  return kNames.Name(kind);
}

std::string FrameFuzzer::Any(Kind* kind) {
  const auto k = static_cast<Kind>(U(0, static_cast<uint64_t>(Kind::kCount) - 1));
  if (kind != nullptr) *kind = k;
  switch (k) {
    case Kind::kRandom:
      return Random();
    case Kind::kValid:
      return Valid();
    case Kind::kServerOnly:
      return ServerOnly();
    case Kind::kTruncated:
      return Truncated();
    case Kind::kMutated:
    case Kind::kCount:
      break;
  }
  return Mutated();
}

std::string FrameFuzzer::Random(size_t max_len) {
  std::string s(U(0, max_len), '\0');
  for (char& c : s) c = static_cast<char>(U(0, 255));
  if (s.size() >= 6 && OneIn(2)) {  // a valid header, so the body gets decoded
    s[0] = 'B';
    s[1] = 'C';
    s[2] = static_cast<char>(kProtocolVersion & 0xff);
    s[3] = static_cast<char>(kProtocolVersion >> 8);
    s[4] = static_cast<char>(U(0, 12));
  }
  return s;
}

std::string FrameFuzzer::Name() {
  switch (U(0, 9)) {
    case 0:
      return "";
    case 1:
      return "\xff\xfe\xfd";  // not UTF-8
    case 2:
      return "bad\xc3\x28utf8";  // invalid continuation
    case 3:
      return "evil\n[error] forged log line";  // a newline
    case 4:
      return std::string(proto::kMaxString, 'n');  // the longest allowed
    case 5:
      return std::string(U(1, 64), '\0');  // NULs
    case 6:
      return "\x1b[31mred\x1b[0m";  // terminal escapes
    case 7:
      return "{\"json\": \"in a name\"}";
    default:
      return "fuzz-" + std::to_string(U(0, 1000));
  }
}

proto::Hello FrameFuzzer::Hello() {
  proto::Hello h;
  h.name = Name();
  const uint32_t pids[] = {0, 1, static_cast<uint32_t>(getpid()), UINT32_MAX,
                           static_cast<uint32_t>(U(2, 4000000))};
  h.pid = pids[U(0, std::size(pids) - 1)];
  const uint32_t batches[] = {0, 1, 5, 16, 64, 65, 1 << 20, UINT32_MAX};
  h.batch_size = OneIn(2) ? static_cast<uint32_t>(U(1, 64)) : batches[U(0, std::size(batches) - 1)];
  h.drop_last = OneIn(2);
  h.join = OneIn(2) ? JoinPolicy::kImmediate : JoinPolicy::kNextEpoch;
  const uint16_t prefetch[] = {0, 1, 2, 4, 64, 65535};
  h.prefetch = prefetch[U(0, std::size(prefetch) - 1)];
  const char* devices[] = {"", "", "cpu", "cuda:0", "cuda:99999999999999999999", "tpu", "\xff"};
  h.device = devices[U(0, std::size(devices) - 1)];
  return h;
}

std::vector<uint64_t> FrameFuzzer::LeaseIds() {
  std::vector<uint64_t> ids(U(0, OneIn(20) ? 5000 : 16));
  for (uint64_t& id : ids) {
    id = OneIn(4) ? kValues64[U(0, std::size(kValues64) - 1)] : U(0, 64);
  }
  return ids;
}

proto::Message FrameFuzzer::ValidMessage() {
  switch (U(0, 6)) {
    case 0:
      return Hello();
    case 1:
    case 2:
      return proto::Next{OneIn(3) ? kValues64[U(0, std::size(kValues64) - 1)] : U(1, 100),
                         LeaseIds()};
    case 3:
      return proto::Release{LeaseIds()};
    case 4:
      return proto::Bye{LeaseIds()};
    case 5:
      return proto::Heartbeat{};
    default:
      return proto::Stats{};
  }
}

std::string FrameFuzzer::ServerOnly() {
  switch (U(0, 4)) {
    case 0: {
      proto::Welcome w;
      w.window = 8;
      w.producer_batch_size = 16;
      w.fields = {{"image", DType::kUInt8, {3, 8, 8}, MemoryKind::kHost}};
      return proto::Encode(w);
    }
    case 1: {
      proto::Batch b;
      b.lease_id = U(1, 10);
      b.segments = {{0, 0, 2, 0}};
      b.indices = {1, 2};
      return proto::Encode(b);
    }
    case 2:
      return proto::Encode(proto::EndOfEpoch{1, 0, 3, 0});
    case 3:
      return proto::Encode(proto::Error{0, StatusCode::kInternal, Name()});
    default:
      return proto::Encode(proto::StatsReply{"{}"});
  }
}

std::string FrameFuzzer::Truncated() {
  std::string s = Valid();
  s.resize(U(0, s.size() > 0 ? s.size() - 1 : 0));
  return s;
}

std::string FrameFuzzer::Mutated() { return Mutate(OneIn(5) ? ServerOnly() : Valid()); }

std::string FrameFuzzer::Mutate(std::string s) {
  for (uint64_t n = U(1, 3); n > 0; --n) {
    const size_t pos = s.empty() ? 0 : U(0, s.size() - 1);
    switch (U(0, 9)) {
      case 0:  // flip bits
        for (uint64_t k = U(1, 8); k > 0 && !s.empty(); --k) {
          s[U(0, s.size() - 1)] ^= static_cast<char>(1u << U(0, 7));
        }
        break;
      case 1: {  // one byte to a boundary value
        const uint8_t values[] = {0, 1, 0x7f, 0x80, 0xfe, 0xff};
        if (!s.empty()) s[pos] = static_cast<char>(values[U(0, std::size(values) - 1)]);
        break;
      }
      case 2: {  // a u32 (most counts and lengths) to a boundary value
        const uint32_t v = kCounts32[U(0, std::size(kCounts32) - 1)];
        if (s.size() >= 4) std::memcpy(&s[std::min(pos, s.size() - 4)], &v, 4);
        break;
      }
      case 3: {  // a u64 (ids) to a boundary value
        const uint64_t v = kValues64[U(0, std::size(kValues64) - 1)];
        if (s.size() >= 8) std::memcpy(&s[std::min(pos, s.size() - 8)], &v, 8);
        break;
      }
      case 4:  // insert random bytes
        s.insert(pos, Random(32));
        break;
      case 5:  // delete a range
        if (!s.empty()) s.erase(pos, U(1, 16));
        break;
      case 6:  // duplicate a range
        if (!s.empty()) s.insert(pos, s.substr(pos, U(1, 32)));
        break;
      case 7:  // splice with another message
      {
        const std::string other = Valid();
        s = s.substr(0, pos) + other.substr(U(0, other.size() - 1));
        break;
      }
      case 8:  // the header: version, type or reserved byte
        if (s.size() >= 6) s[U(2, 5)] = static_cast<char>(U(0, 255));
        break;
      default:  // trailing junk
        s += Random(16);
        break;
    }
  }
  return s;
}

}  // namespace batchcast::stress
