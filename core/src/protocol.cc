#include "core/src/protocol.h"

#include <array>
#include <type_traits>
#include <utility>

#include "wire.h"

namespace batchcast::proto {
namespace {

using wire::Reader;
using wire::Writer;

constexpr uint8_t kMagic0 = 'B';
constexpr uint8_t kMagic1 = 'C';
constexpr size_t kHeaderBytes = 6;

// Message lists the messages in MessageType order: alternative i has wire
// type i + 1 (tests/core/protocol_test.cc pins every type byte).
static_assert(std::variant_size_v<Message> == static_cast<size_t>(MessageType::kDone));
static_assert(std::is_same_v<std::variant_alternative_t<0, Message>, Hello>);

MessageType TypeOf(const Message& message) { return static_cast<MessageType>(message.index() + 1); }

// ---- bodies: Write ----

void Write(Writer& w, const Hello& m) {
  w.PutString(m.name);
  w.PutAll(m.pid, m.batch_size, static_cast<uint8_t>(m.drop_last ? 1 : 0),
           static_cast<uint8_t>(m.join), m.prefetch);
  w.PutString(m.device);
  w.PutString(m.group);
  w.PutAll(m.rank, m.world_size);
}

void Write(Writer& w, const FieldSpec& f) {
  w.PutString(f.name);
  w.PutAll(static_cast<uint8_t>(f.dtype), static_cast<uint8_t>(f.memory),
           static_cast<uint32_t>(f.shape.size()));
  for (int64_t d : f.shape) w.Put(d);
}

void Write(Writer& w, const Allocation& a) {
  w.PutAll(static_cast<uint8_t>(a.kind), a.bytes);
  w.PutString(a.shm_name);
  w.Put(a.device_index);
  w.PutBytes(a.mem_handle.data(), a.mem_handle.size());
  w.PutArray(a.event_handles);
}

void Write(Writer& w, const Segment& s) {
  w.PutAll(s.slot, s.offset, s.count, s.producer_epoch, s.ring);
}

void Write(Writer& w, const RingInfo& r);

// A u32 count, then each element (FieldSpec, Allocation, Segment, RingInfo).
template <typename T>
void WriteList(Writer& w, const std::vector<T>& list) {
  w.Put(static_cast<uint32_t>(list.size()));
  for (const T& x : list) Write(w, x);
}

void Write(Writer& w, const RingInfo& r) {
  w.Put(r.device);
  WriteList(w, r.allocations);
}

void Write(Writer& w, const Welcome& m) {
  w.PutAll(m.consumer_id, m.server_pid);
  w.PutString(m.server_name);
  w.PutAll(m.window, m.producer_batch_size);
  WriteList(w, m.fields);
  WriteList(w, m.rings);
  w.Put(m.home_ring);
  w.PutAll(m.epoch_len, m.batches_per_epoch, m.heartbeat_interval_ms, m.heartbeat_timeout_ms);
  w.PutString(m.stream);
  w.PutAll(m.resume_slots, m.start);
}

void Write(Writer& w, const Next& m) {
  w.Put(m.request_id);
  w.PutArray(m.releases);
}

void Write(Writer& w, const Batch& m) {
  w.PutAll(m.request_id, m.lease_id, m.epoch, m.step, m.first_seq, m.skipped);
  WriteList(w, m.segments);
  w.PutArray(m.indices);
  w.PutAll(m.epoch_start, m.next_seq);
}

void Write(Writer& w, const EndOfEpoch& m) {
  w.PutAll(m.request_id, m.epoch, m.batches, m.skipped, m.next_epoch_start, m.next_seq);
}

void Write(Writer& w, const Error& m) {
  w.PutAll(m.request_id, static_cast<uint8_t>(m.code));
  w.PutString(m.message);
}

void Write(Writer& w, const Release& m) { w.PutArray(m.lease_ids); }

void Write(Writer&, const Heartbeat&) {}
void Write(Writer& w, const Bye& m) { w.PutArray(m.kept_leases); }
void Write(Writer&, const Stats&) {}
void Write(Writer& w, const StatsReply& m) { w.PutString(m.json); }
void Write(Writer& w, const Resume& m) {
  w.PutString(m.stream);
  w.PutAll(m.epoch, m.step, m.epoch_start, m.next_seq, m.skipped, m.world_size, m.batch_size);
}
void Write(Writer& w, const Resumed& m) { w.Put(m.next_seq); }
void Write(Writer& w, const Attach& m) { w.PutAll(m.ring, m.pid); }
void Write(Writer& w, const Attached& m) {
  w.Put(static_cast<uint32_t>(m.options.size()));
  for (const std::string& o : m.options) w.PutString(o);
  Write(w, m.ring);
  WriteList(w, m.fields);
  w.PutAll(m.window, m.resume_slots, m.batch_size, m.dataset_size, m.listing_digest,
           static_cast<uint8_t>(m.device_output ? 1 : 0));
  w.PutString(m.listing);
}
void Write(Writer&, const Ready&) {}
void Write(Writer& w, const Work& m) {
  w.PutAll(m.slot, m.first_seq, m.epoch);
  w.PutArray(m.indices);
  w.PutArray(m.next);
  w.PutAll(m.next_epoch, static_cast<uint8_t>(m.next_guess ? 1 : 0));
}
void Write(Writer& w, const Done& m) {
  w.PutAll(m.slot, m.first_seq);
  w.PutArray(m.indices);
}

// ---- bodies: Read ----

bool ReadBool(Reader& r, bool& out, const char* what) {
  uint8_t v = 0;
  if (!r.Get(v)) return false;
  if (v > 1) return r.Fail(std::string(what) + " must be 0 or 1");
  out = v == 1;
  return true;
}

bool Read(Reader& r, Hello& m) {
  uint8_t join = 0;
  if (!r.GetString(m.name, kMaxString) || !r.Get(m.pid) || !r.Get(m.batch_size) ||
      !ReadBool(r, m.drop_last, "drop_last") || !r.Get(join) || !r.Get(m.prefetch) ||
      !r.GetString(m.device, kMaxString) || !r.GetString(m.group, kMaxGroupName) ||
      !r.Get(m.rank) || !r.Get(m.world_size)) {
    return false;
  }
  if (join > static_cast<uint8_t>(JoinPolicy::kNextEpoch)) return r.Fail("unknown join policy");
  m.join = static_cast<JoinPolicy>(join);
  if (m.world_size > kMaxWorldSize) {
    return r.Fail("world_size " + std::to_string(m.world_size) + " exceeds the limit " +
                  std::to_string(kMaxWorldSize));
  }
  if (m.world_size == 0 && (!m.group.empty() || m.rank != 0)) {
    return r.Fail("a group and rank without a world_size");
  }
  if (m.world_size > 0 && m.group.empty()) return r.Fail("a world_size without a group name");
  if (m.world_size > 0 && m.rank >= m.world_size) {
    return r.Fail("rank " + std::to_string(m.rank) + " is not below world_size " +
                  std::to_string(m.world_size));
  }
  return true;
}

bool Read(Reader& r, FieldSpec& f) {
  uint8_t dtype = 0, memory = 0;
  uint32_t dims = 0;
  if (!r.GetString(f.name, kMaxString) || !r.Get(dtype) || !r.Get(memory) ||
      !r.GetCount(dims, kMaxDims, sizeof(int64_t), "shape")) {
    return false;
  }
  if (!IsValidDType(dtype)) return r.Fail("unknown dtype " + std::to_string(dtype));
  if (memory > static_cast<uint8_t>(MemoryKind::kCuda)) return r.Fail("unknown memory kind");
  f.dtype = static_cast<DType>(dtype);
  f.memory = static_cast<MemoryKind>(memory);
  f.shape.resize(dims);
  for (int64_t& d : f.shape) {
    if (!r.Get(d)) return false;
    if (d <= 0 || d > (int64_t{1} << 31)) return r.Fail("bad dimension " + std::to_string(d));
  }
  return true;
}

bool Read(Reader& r, Allocation& a) {
  uint8_t kind = 0;
  if (!r.Get(kind) || !r.Get(a.bytes) || !r.GetString(a.shm_name, kMaxString) ||
      !r.Get(a.device_index) || !r.GetBytes(a.mem_handle.data(), a.mem_handle.size())) {
    return false;
  }
  if (kind > static_cast<uint8_t>(MemoryKind::kCuda)) return r.Fail("unknown memory kind");
  a.kind = static_cast<MemoryKind>(kind);
  return r.GetArray(a.event_handles, kMaxWindow, "event handle");
}

bool Read(Reader& r, Segment& s) {
  if (!r.Get(s.slot) || !r.Get(s.offset) || !r.Get(s.count) || !r.Get(s.producer_epoch) ||
      !r.Get(s.ring)) {
    return false;
  }
  if (s.count == 0) return r.Fail("empty segment");
  return true;
}

bool Read(Reader& r, RingInfo& ring);

// The reverse of WriteList: a count (at most `max`, and each element needs
// at least `min_elem_bytes`, Reader::GetCount), then each element.
template <typename T>
bool ReadList(Reader& r, std::vector<T>& list, size_t max, size_t min_elem_bytes,
              const char* what) {
  uint32_t n = 0;
  if (!r.GetCount(n, max, min_elem_bytes, what)) return false;
  list.resize(n);
  for (T& x : list) {
    if (!Read(r, x)) return false;
  }
  return true;
}

// 13 + kIpcHandleBytes: a lower bound on the bytes of one allocation.
bool Read(Reader& r, RingInfo& ring) {
  return r.Get(ring.device) &&
         ReadList(r, ring.allocations, kMaxAllocations, 13 + kIpcHandleBytes, "allocation");
}

// The window and the resume slots together are ring slots too.
bool CheckSlots(Reader& r, const Welcome& m) {
  if (uint64_t{m.window} + m.resume_slots > kMaxWindow) return r.Fail("bad resume slot count");
  return true;
}

bool Read(Reader& r, Welcome& m) {
  if (!r.Get(m.consumer_id) || !r.Get(m.server_pid) || !r.GetString(m.server_name, kMaxString) ||
      !r.Get(m.window) || !r.Get(m.producer_batch_size)) {
    return false;
  }
  if (m.window == 0 || m.window > kMaxWindow) return r.Fail("bad window");
  if (m.producer_batch_size == 0 || m.producer_batch_size > kMaxBatch) {
    return r.Fail("bad producer batch size");
  }
  // 10 and 8: lower bounds on the bytes of one field spec and of one ring.
  if (!ReadList(r, m.fields, kMaxFields, 10, "field") ||
      !ReadList(r, m.rings, kMaxRings, 8, "ring") || !r.Get(m.home_ring)) {
    return false;
  }
  if (m.home_ring >= m.rings.size() && !m.rings.empty()) return r.Fail("bad home ring");
  return r.Get(m.epoch_len) && r.Get(m.batches_per_epoch) && r.Get(m.heartbeat_interval_ms) &&
         r.Get(m.heartbeat_timeout_ms) && r.GetString(m.stream, kMaxString) &&
         r.Get(m.resume_slots) && r.Get(m.start) && CheckSlots(r, m);
}

bool Read(Reader& r, Next& m) {
  return r.Get(m.request_id) && r.GetArray(m.releases, kMaxReleases, "lease");
}

bool Read(Reader& r, Batch& m) {
  if (!r.Get(m.request_id) || !r.Get(m.lease_id) || !r.Get(m.epoch) || !r.Get(m.step) ||
      !r.Get(m.first_seq) || !r.Get(m.skipped) ||
      !ReadList(r, m.segments, kMaxSegments, 5 * sizeof(uint32_t), "segment")) {
    return false;
  }
  uint64_t total = 0;
  for (const Segment& s : m.segments) total += s.count;
  if (!r.GetArray(m.indices, kMaxBatch, "index")) return false;
  if (m.indices.size() != total) return r.Fail("index count does not match the segments");
  return r.Get(m.epoch_start) && r.Get(m.next_seq);
}

bool Read(Reader& r, EndOfEpoch& m) {
  return r.Get(m.request_id) && r.Get(m.epoch) && r.Get(m.batches) && r.Get(m.skipped) &&
         r.Get(m.next_epoch_start) && r.Get(m.next_seq);
}

bool Read(Reader& r, Error& m) {
  uint8_t code = 0;
  if (!r.Get(m.request_id) || !r.Get(code) || !r.GetString(m.message, kMaxString)) return false;
  if (code == 0 || code > static_cast<uint8_t>(StatusCode::kPermissionDenied)) {
    return r.Fail("unknown error code " + std::to_string(code));
  }
  m.code = static_cast<StatusCode>(code);
  return true;
}

bool Read(Reader& r, Release& m) { return r.GetArray(m.lease_ids, kMaxReleases, "lease"); }

bool Read(Reader&, Heartbeat&) { return true; }
bool Read(Reader& r, Bye& m) { return r.GetArray(m.kept_leases, kMaxReleases, "lease"); }
bool Read(Reader&, Stats&) { return true; }
bool Read(Reader& r, StatsReply& m) { return r.GetString(m.json, kMaxJson); }
bool Read(Reader& r, Resume& m) {
  if (!r.GetString(m.stream, kMaxString) || !r.Get(m.epoch) || !r.Get(m.step) ||
      !r.Get(m.epoch_start) || !r.Get(m.next_seq) || !r.Get(m.skipped) || !r.Get(m.world_size) ||
      !r.Get(m.batch_size)) {
    return false;
  }
  if (m.world_size > kMaxWorldSize) {
    return r.Fail("world_size " + std::to_string(m.world_size) + " exceeds the limit " +
                  std::to_string(kMaxWorldSize));
  }
  if (m.next_seq < m.epoch_start) return r.Fail("a position before its epoch's start");
  return true;
}
bool Read(Reader& r, Resumed& m) { return r.Get(m.next_seq); }
bool Read(Reader& r, Attach& m) { return r.Get(m.ring) && r.Get(m.pid); }

constexpr size_t kMaxOptions = 1024;

bool Read(Reader& r, Attached& m) {
  uint32_t n = 0;
  if (!r.GetCount(n, kMaxOptions, sizeof(uint32_t), "option")) return false;
  m.options.resize(n);
  for (std::string& o : m.options) {
    if (!r.GetString(o, kMaxString)) return false;
  }
  if (!Read(r, m.ring) || !ReadList(r, m.fields, kMaxFields, 10, "field") || !r.Get(m.window) ||
      !r.Get(m.resume_slots) || !r.Get(m.batch_size) || !r.Get(m.dataset_size) ||
      !r.Get(m.listing_digest) || !ReadBool(r, m.device_output, "device_output") ||
      !r.GetString(m.listing, kMaxString)) {
    return false;
  }
  if (m.window == 0 || uint64_t{m.window} + m.resume_slots > kMaxWindow) {
    return r.Fail("bad slot count");
  }
  if (m.batch_size == 0 || m.batch_size > kMaxBatch) return r.Fail("bad batch size");
  return true;
}
bool Read(Reader&, Ready&) { return true; }
bool Read(Reader& r, Work& m) {
  if (!r.Get(m.slot) || !r.Get(m.first_seq) || !r.Get(m.epoch) ||
      !r.GetArray(m.indices, kMaxBatch, "index") || !r.GetArray(m.next, kMaxBatch, "index") ||
      !r.Get(m.next_epoch) || !ReadBool(r, m.next_guess, "next_guess")) {
    return false;
  }
  if (m.indices.empty()) return r.Fail("WORK without samples");
  return true;
}
bool Read(Reader& r, Done& m) {
  return r.Get(m.slot) && r.Get(m.first_seq) && r.GetArray(m.indices, kMaxBatch, "index");
}

template <typename T>
Result<Message> DecodeBody(Reader& r) {
  T m;
  if (!Read(r, m)) {
    return InvalidArgumentError("malformed " + std::string(MessageName(Message(T{}))) + ": " +
                                r.error());
  }
  if (r.remaining() != 0) {
    return InvalidArgumentError("malformed " + std::string(MessageName(Message(T{}))) + ": " +
                                std::to_string(r.remaining()) + " trailing bytes");
  }
  return Message(std::move(m));
}

// DecodeBody of each message, by wire type - 1.
template <size_t... I>
constexpr auto MakeDecoders(std::index_sequence<I...>) {
  return std::array<Result<Message> (*)(Reader&), sizeof...(I)>{
      &DecodeBody<std::variant_alternative_t<I, Message>>...};
}
constexpr auto kDecoders = MakeDecoders(std::make_index_sequence<std::variant_size_v<Message>>());

}  // namespace

std::string_view MessageName(const Message& message) {
  static constexpr std::string_view kNames[] = {
      "HELLO",   "WELCOME",   "NEXT",     "BATCH", "END_OF_EPOCH", "ERROR",
      "RELEASE", "HEARTBEAT", "BYE",      "STATS", "STATS_REPLY",  "RESUME",
      "RESUMED", "ATTACH",    "ATTACHED", "READY", "WORK",         "DONE"};
  return kNames[message.index()];
}

void EncodeTo(const Message& message, std::string& out) {
  Writer w(out);
  std::visit(
      [&](const auto& m) {
        w.PutAll(kMagic0, kMagic1, kProtocolVersion, static_cast<uint8_t>(TypeOf(message)),
                 uint8_t{0});
        Write(w, m);
      },
      message);
}

std::string Encode(const Message& message) {
  std::string out;
  EncodeTo(message, out);
  return out;
}

Result<Message> Decode(std::span<const uint8_t> frame) {
  if (frame.size() < kHeaderBytes) {
    return InvalidArgumentError("malformed message: " + std::to_string(frame.size()) +
                                " bytes, shorter than the 6-byte header");
  }
  if (frame[0] != kMagic0 || frame[1] != kMagic1) {
    return InvalidArgumentError("malformed message: not a batchcast message (bad magic)");
  }
  uint16_t version = 0;
  std::memcpy(&version, frame.data() + 2, sizeof(version));
  if (version != kProtocolVersion) {
    return InvalidArgumentError("protocol version mismatch: peer speaks version " +
                                std::to_string(version) + ", this build speaks " +
                                std::to_string(kProtocolVersion) +
                                "; use the same batchcast release on both sides");
  }
  Reader r(frame.subspan(kHeaderBytes));
  const uint8_t type = frame[4];
  if (type >= 1 && type <= kDecoders.size()) return kDecoders[type - 1](r);
  return InvalidArgumentError("malformed message: unknown type " + std::to_string(frame[4]));
}

}  // namespace batchcast::proto
