// Tests of the batchcast wire protocol codec: round trips of every message,
// the exact header layout, and hostile input (truncation, bad headers, bad
// enums, huge counts, trailing bytes, random mutation).
#include "core/src/protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

namespace batchcast::proto {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes ToBytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
Bytes EncodeBytes(const Message& m) { return ToBytes(Encode(m)); }

// Decodes from a heap buffer of exactly the frame's size, so that a sanitizer
// sees any read past the end.
Result<Message> DecodeBytes(const Bytes& frame) {
  return Decode(std::span<const uint8_t>(frame.data(), frame.size()));
}

template <typename T>
void PutLE(Bytes& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v,
              sizeof(T));  // the test machines are little-endian, like the wire
}

template <typename T>
void PokeLE(Bytes& frame, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), frame.size());
  std::memcpy(frame.data() + at, &v, sizeof(T));
}

Bytes Header(MessageType type, uint16_t version = kProtocolVersion) {
  Bytes h = {'B', 'C'};
  PutLE<uint16_t>(h, version);
  h.push_back(static_cast<uint8_t>(type));
  h.push_back(0);
  return h;
}

size_t Find(const Bytes& haystack, const std::string& needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end());
  return it == haystack.end() ? std::string::npos : static_cast<size_t>(it - haystack.begin());
}

IpcHandle PatternHandle(uint8_t seed) {
  IpcHandle h{};
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return h;
}

// Fields in order: name, pid, batch_size, drop_last, join, prefetch, device,
// group, rank, world_size.
Hello SampleHello() {
  return Hello{"trainer-3 (resnet50)",      123456, 96, false, JoinPolicy::kNextEpoch, 7, "cuda:1",
               "GROUPMARK torchrun:5f3a:0", 3,      8};
}

Welcome SampleWelcome() {
  Welcome m;
  m.consumer_id = 0x0123456789ABCDEFull;
  m.server_pid = 4242;
  m.server_name = "demo";
  m.window = 4;
  m.producer_batch_size = 256;
  m.fields = {
      FieldSpec{"image", DType::kFloat16, {3, 224, 224}, MemoryKind::kCuda},
      FieldSpec{"label", DType::kInt64, {}, MemoryKind::kHost},
      FieldSpec{"DTYPEFIELD", DType::kBFloat16, {2, 1, 5, 1 << 20}, MemoryKind::kHost},
  };
  Allocation host;
  host.kind = MemoryKind::kHost;
  host.bytes = 1ull << 33;
  host.shm_name = "SHMMARK-batchcast-1000-demo-ring";
  host.device_index = -1;
  Allocation cuda;
  cuda.kind = MemoryKind::kCuda;
  cuda.bytes = 1234567890123ull;
  cuda.shm_name = "";
  cuda.device_index = 3;
  cuda.mem_handle = PatternHandle(1);
  for (uint8_t s = 0; s < 4; ++s) cuda.event_handles.push_back(PatternHandle(10 + s));
  m.rings = {RingInfo{3, {host, cuda}}, RingInfo{5, {}}};
  m.home_ring = 1;
  m.epoch_len = 1281167;
  m.batches_per_epoch = 13345;
  m.heartbeat_interval_ms = 250;
  m.heartbeat_timeout_ms = 2000;
  m.stream = "source=dataset;seed=7;fields=image:float16[3,224,224] label:int64[]";
  m.resume_slots = 4;
  m.start = 0x1122334455667788ull;
  return m;
}

Batch SampleBatch() {
  Batch m;
  m.request_id = 77;
  m.lease_id = 0xFFFFFFFFFFFFFFFEull;
  m.epoch = 3;
  m.step = 412;
  m.first_seq = 9876543210ull;
  m.skipped = 17;
  m.segments = {Segment{3, 250, 6, 2}, Segment{0, 0, 256, 2}, Segment{1, 0, 2, 3}};
  for (int64_t i = 0; i < 264; ++i) m.indices.push_back(i * 4099 - 5);
  m.indices[7] = INT64_MIN;
  m.indices[8] = INT64_MAX;
  m.epoch_start = 9876500000ull;
  m.next_seq = 9876543474ull;
  return m;
}

// A NEXT that also carries leases to release, where this build's NEXT can
// (a template, so that the discarded branch is not checked).
template <typename T>
void AddReleases(T& m) {
  if constexpr (requires { m.releases; }) m.releases = {4, 5, 0xFFFFFFFFFFFFFFF0ull};
}
Next SampleNext() {
  Next m;
  m.request_id = 0xDEADBEEFCAFEull;
  AddReleases(m);
  return m;
}

// One non-trivial instance of every message type, in variant order.
std::vector<Message> SampleMessages() {
  std::vector<Message> out;
  out.push_back(SampleHello());
  out.push_back(SampleWelcome());
  out.push_back(SampleNext());
  out.push_back(SampleBatch());
  out.push_back(EndOfEpoch{99, 5, 5004, 12, 6405000, 6405001});
  out.push_back(Error{31, StatusCode::kResourceExhausted,
                      "consumer 'x' asked for batch size 100000; the limit is 512"});
  out.push_back(Release{{1, 2, 3, 0xFFFFFFFFFFFFFFFFull, 42}});
  out.push_back(Heartbeat{});
  out.push_back(Bye{{12, 0xFFFFFFFFFFFFFFFFull, 1}});
  out.push_back(Stats{});
  out.push_back(StatsReply{R"({"consumers":[{"name":"a","delivered":12}],"produced":1024})"});
  out.push_back(Resume{"source=synthetic;seed=3", 2, 40, 2562334, 2563614, 9, 8, 64});
  out.push_back(Resumed{2563614});
  out.push_back(Attach{1, 4242});
  Attached a;
  a.options = {"data=/data/train", "size=224", "seed=7"};
  a.ring = SampleWelcome().rings.front();
  a.fields = SampleWelcome().fields;
  a.window = 16;
  a.resume_slots = 4;
  a.batch_size = 256;
  a.dataset_size = 1281167;
  a.listing_digest = 0x8899AABBCCDDEEFFull;
  a.device_output = true;
  a.listing = "/run/user/1000/batchcast/imnet.listing";
  out.push_back(a);
  out.push_back(Ready{});
  out.push_back(Work{7, 9876543210ull, 3, {5, 1, INT64_MAX}, {8, 9}, 4, true});
  out.push_back(Done{7, 9876543210ull, {5, INT64_MAX}});
  return out;
}

// Variants of the samples with empty/default contents, which must round-trip too.
std::vector<Message> EdgeMessages() {
  std::vector<Message> out;
  out.push_back(Hello{});
  Welcome w;
  w.window = 1;
  w.producer_batch_size = 1;
  out.push_back(w);  // no fields, no allocations
  Welcome big = SampleWelcome();
  big.window = kMaxWindow;
  big.resume_slots = 0;  // the window and resume slots together are at most kMaxWindow
  big.producer_batch_size = kMaxBatch;
  out.push_back(big);
  out.push_back(Next{});
  out.push_back(Batch{});  // no segments, no indices
  Batch one;
  one.segments = {Segment{0, 0, 1, 0}};
  one.indices = {5};
  out.push_back(one);
  out.push_back(EndOfEpoch{});
  out.push_back(Error{0, StatusCode::kInvalidArgument, ""});
  out.push_back(Error{1, StatusCode::kDataLoss, std::string(kMaxString, 'e')});
  out.push_back(Release{});
  out.push_back(Bye{});
  out.push_back(StatsReply{});
  out.push_back(StatsReply{std::string(100000, 'j')});
  out.push_back(Resume{});
  out.push_back(Resumed{});
  Attached a;
  a.window = 1;
  a.batch_size = 1;
  out.push_back(a);
  out.push_back(Work{0, 0, 0, {0}, {}, 0, false});
  out.push_back(Done{});
  return out;
}

std::vector<Bytes> ValidEncodings() {
  std::vector<Bytes> out;
  for (const Message& m : SampleMessages()) out.push_back(EncodeBytes(m));
  for (const Message& m : EdgeMessages()) {
    Bytes b = EncodeBytes(m);
    if (b.size() < 4096) out.push_back(std::move(b));  // keep the fuzz corpus small
  }
  return out;
}

// ---- round trips ----

// `m` encoded and decoded back; nullopt (and a test failure) when that fails
// or gives another message type.
template <typename T>
std::optional<T> RoundTrip(const T& m) {
  Result<Message> back = DecodeBytes(EncodeBytes(m));
  if (!back.ok()) {
    ADD_FAILURE() << back.status().ToString();
    return std::nullopt;
  }
  if (const T* got = std::get_if<T>(&*back)) return *got;
  ADD_FAILURE() << "decoded as " << MessageName(*back);
  return std::nullopt;
}

TEST(ProtocolTest, SamplesCoverEveryMessageType) {
  const std::vector<Message> samples = SampleMessages();
  ASSERT_EQ(samples.size(), std::variant_size_v<Message>);
  for (size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(samples[i].index(), i);
}

TEST(ProtocolTest, RoundTripEveryMessage) {
  for (const std::vector<Message>& set : {SampleMessages(), EdgeMessages()}) {
    for (const Message& m : set) {
      SCOPED_TRACE(std::string(MessageName(m)));
      const Bytes frame = EncodeBytes(m);
      Result<Message> back = DecodeBytes(frame);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(back->index(), m.index());
      EXPECT_TRUE(*back == m);
      EXPECT_EQ(MessageName(*back), MessageName(m));
      // Encoding is deterministic.
      EXPECT_EQ(EncodeBytes(*back), frame);
    }
  }
}

TEST(ProtocolTest, RoundTripKeepsWelcomeDetails) {
  const Welcome w = SampleWelcome();
  const std::optional<Welcome> got = RoundTrip(w);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->fields.size(), 3u);
  EXPECT_EQ(got->fields[0].shape, (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(got->fields[0].dtype, DType::kFloat16);
  EXPECT_EQ(got->fields[0].memory, MemoryKind::kCuda);
  EXPECT_TRUE(got->fields[1].shape.empty());
  ASSERT_EQ(got->rings.size(), 2u);
  EXPECT_EQ(got->home_ring, 1u);
  EXPECT_EQ(got->rings[0].device, 3);
  EXPECT_EQ(got->rings[1].device, 5);
  EXPECT_TRUE(got->rings[1].allocations.empty());
  const std::vector<Allocation>& allocations = got->rings[0].allocations;
  ASSERT_EQ(allocations.size(), 2u);
  EXPECT_EQ(allocations[0].shm_name, w.rings[0].allocations[0].shm_name);
  EXPECT_EQ(allocations[0].device_index, -1);
  EXPECT_EQ(allocations[1].kind, MemoryKind::kCuda);
  EXPECT_EQ(allocations[1].device_index, 3);
  EXPECT_EQ(allocations[1].mem_handle, PatternHandle(1));
  ASSERT_EQ(allocations[1].event_handles.size(), 4u);
  for (uint8_t s = 0; s < 4; ++s) {
    EXPECT_EQ(allocations[1].event_handles[s], PatternHandle(10 + s));
  }
}

TEST(ProtocolTest, HomeRingMustBeARing) {
  Welcome w = SampleWelcome();
  w.home_ring = 2;
  Result<Message> m = DecodeBytes(EncodeBytes(w));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("home ring"), std::string::npos) << m.status().message();
}

TEST(ProtocolTest, SegmentKeepsItsRing) {
  Batch b;
  b.segments = {Segment{1, 2, 3, 4, 7}};
  b.indices = {1, 2, 3};
  const std::optional<Batch> got = RoundTrip(b);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->segments.size(), 1u);
  EXPECT_EQ(got->segments[0].ring, 7u);
}

TEST(ProtocolTest, RoundTripKeepsBatchDetails) {
  const Batch b = SampleBatch();
  const std::optional<Batch> got = RoundTrip(b);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->segments, b.segments);
  EXPECT_EQ(got->indices, b.indices);
  EXPECT_EQ(got->indices[7], INT64_MIN);
  EXPECT_EQ(got->lease_id, 0xFFFFFFFFFFFFFFFEull);
}

TEST(ProtocolTest, MessageNames) {
  const std::vector<std::string> names = {
      "HELLO",   "WELCOME",   "NEXT",     "BATCH", "END_OF_EPOCH", "ERROR",
      "RELEASE", "HEARTBEAT", "BYE",      "STATS", "STATS_REPLY",  "RESUME",
      "RESUMED", "ATTACH",    "ATTACHED", "READY", "WORK",         "DONE"};
  const std::vector<Message> samples = SampleMessages();
  ASSERT_EQ(names.size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) EXPECT_EQ(MessageName(samples[i]), names[i]);
}

TEST(ProtocolTest, HeaderLayout) {
  const std::vector<Message> samples = SampleMessages();
  const uint8_t types[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  for (size_t i = 0; i < samples.size(); ++i) {
    const Bytes f = EncodeBytes(samples[i]);
    ASSERT_GE(f.size(), 6u);
    EXPECT_EQ(f[0], 'B');
    EXPECT_EQ(f[1], 'C');
    EXPECT_EQ(f[2] | (f[3] << 8), kProtocolVersion);
    EXPECT_EQ(f[4], types[i]);
    EXPECT_EQ(f[5], 0);
  }
  EXPECT_EQ(Encode(Heartbeat{}).size(), 6u);
}

TEST(ProtocolTest, GoldenEncodings) {
  // Pins the little-endian wire format so that an accidental change is caught.
  EXPECT_EQ(EncodeBytes(EndOfEpoch{0x0102030405060708ull, 0x0A0B0C0D, 3, 0x1122, 0x33, 0x44}),
            (Bytes{'B',  'C',  7, 0, 5, 0, 8,    7,    6, 5, 4, 3, 2, 1, 0x0D, 0x0C,
                   0x0B, 0x0A, 3, 0, 0, 0, 0x22, 0x11, 0, 0, 0, 0, 0, 0, 0x33, 0,
                   0,    0,    0, 0, 0, 0, 0x44, 0,    0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(EncodeBytes(Bye{{5}}),
            (Bytes{'B', 'C', 7, 0, 9, 0, 1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(EncodeBytes(Error{2, StatusCode::kNotFound, "ab"}),
            (Bytes{'B', 'C', 7, 0, 6, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 'a', 'b'}));
  EXPECT_EQ(EncodeBytes(Release{{5}}),
            (Bytes{'B', 'C', 7, 0, 7, 0, 1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(EncodeBytes(Resumed{0x0102}), (Bytes{'B', 'C', 7, 0, 13, 0, 2, 1, 0, 0, 0, 0, 0, 0}));
  // RESUME: the identity, then epoch, step, epoch start, next seq, skipped,
  // world size and the batch size it was saved with.
  const Bytes resume = EncodeBytes(Resume{"s", 1, 2, 3, 4, 5, 6, 64});
  const Bytes resume_tail = {2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0,  0, 0, 0,
                             0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 64, 0, 0, 0};
  ASSERT_GE(resume.size(), resume_tail.size());
  EXPECT_TRUE(std::equal(resume_tail.begin(), resume_tail.end(),
                         resume.end() - static_cast<std::ptrdiff_t>(resume_tail.size())));
  const Hello h{"n", 0x01020304, 32, true, JoinPolicy::kNextEpoch, 2, "", "g", 1, 3};
  // A segment: slot, offset, count, producer epoch, ring.
  Batch b;
  b.segments = {Segment{1, 2, 3, 4, 5}};
  b.indices = {7, 7, 7};
  const Bytes batch = EncodeBytes(b);
  const Bytes segment = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0};
  EXPECT_NE(std::search(batch.begin(), batch.end(), segment.begin(), segment.end()), batch.end());
  EXPECT_EQ(EncodeBytes(h), (Bytes{'B', 'C', 7, 0, 1,   0,  // header
                                   1,   0,   0, 0, 'n',     // name
                                   4,   3,   2, 1,          // pid
                                   32,  0,   0, 0,          // batch_size
                                   1,   1,   2, 0,          // drop_last, join, prefetch
                                   0,   0,   0, 0,          // device
                                   1,   0,   0, 0, 'g',     // group
                                   1,   0,   0, 0,          // rank
                                   3,   0,   0, 0}));       // world_size
}

TEST(ProtocolTest, EncodeToAppends) {
  std::string buf = "prefix";
  EncodeTo(Next{5}, buf);
  EXPECT_EQ(buf.substr(0, 6), "prefix");
  EXPECT_EQ(buf.substr(6), Encode(Next{5}));
  const size_t size = buf.size();
  EncodeTo(Bye{}, buf);
  EXPECT_EQ(buf.substr(size), Encode(Bye{}));
}

TEST(ProtocolTest, ToStatus) {
  const Status s = ToStatus(Error{1, StatusCode::kUnavailable, "server gone"});
  EXPECT_EQ(s, UnavailableError("server gone"));
}

TEST(ProtocolTest, ReservedHeaderByteIsIgnored) {
  Bytes f = EncodeBytes(Next{9});
  f[5] = 0xAB;
  Result<Message> m = DecodeBytes(f);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(*m == Message(Next{9}));
}

// ---- hostile input ----

void ExpectInvalid(const Bytes& frame, const std::string& what) {
  Result<Message> m = DecodeBytes(frame);
  ASSERT_FALSE(m.ok()) << what << " decoded as " << MessageName(*m);
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << what;
  EXPECT_FALSE(m.status().message().empty()) << what;
}

// `good` with each of `values` written (little-endian) at byte `at` is
// invalid ("WHAT VALUE"); with `mention`, the error message names it.
template <typename T>
void ExpectInvalidWith(const Bytes& good, size_t at, std::initializer_list<T> values,
                       const std::string& what, const std::string& mention = "") {
  for (T v : values) {
    Bytes f = good;
    PokeLE<T>(f, at, v);
    ExpectInvalid(f, what + " " + std::to_string(v));
    if (!mention.empty()) {
      EXPECT_NE(DecodeBytes(f).status().message().find(mention), std::string::npos) << what;
    }
  }
}

TEST(ProtocolHostileTest, EveryStrictPrefixFails) {
  for (const std::vector<Message>& set : {SampleMessages(), EdgeMessages()}) {
    for (const Message& msg : set) {
      const Bytes full = EncodeBytes(msg);
      for (size_t n = 0; n < full.size(); ++n) {
        // Every prefix of the small encodings; of the big ones (long strings),
        // the first and last 300 and every 97th in between.
        if (full.size() > 8192 && n > 300 && n + 300 < full.size() && n % 97 != 0) continue;
        const Bytes prefix(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
        ExpectInvalid(prefix, std::string(MessageName(msg)) + " prefix of " + std::to_string(n));
        if (HasFailure()) return;
      }
    }
  }
}

TEST(ProtocolHostileTest, ShortFrameMessage) {
  Result<Message> m = DecodeBytes(Bytes{'B', 'C', 1});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("header"), std::string::npos) << m.status().ToString();
  ExpectInvalid(Bytes{}, "empty frame");
}

TEST(ProtocolHostileTest, BadMagic) {
  for (const Message& msg : SampleMessages()) {
    for (size_t pos : {0u, 1u}) {
      Bytes f = EncodeBytes(msg);
      f[pos] ^= 0x20;  // 'b' / 'c'
      ExpectInvalid(f, "bad magic");
      Result<Message> m = DecodeBytes(f);
      EXPECT_NE(m.status().message().find("magic"), std::string::npos) << m.status().ToString();
    }
  }
  ExpectInvalid(Bytes{'C', 'B', 1, 0, 8, 0}, "swapped magic");
  ExpectInvalid(Bytes{0, 0, 0, 0, 0, 0}, "zeros");
}

TEST(ProtocolHostileTest, WrongVersionNamesBothVersions) {
  for (uint16_t v :
       {uint16_t{0}, uint16_t{1}, uint16_t{2}, uint16_t{3}, uint16_t{513}, uint16_t{0xFFFF}}) {
    for (const Message& msg : SampleMessages()) {
      Bytes f = EncodeBytes(msg);
      PokeLE<uint16_t>(f, 2, v);
      Result<Message> m = DecodeBytes(f);
      ASSERT_FALSE(m.ok());
      EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
      const std::string& text = m.status().message();
      EXPECT_NE(text.find("version"), std::string::npos) << text;
      // Both numbers appear as whole numbers.
      const std::regex peer("(^|[^0-9])" + std::to_string(v) + "([^0-9]|$)");
      const std::regex ours("(^|[^0-9])" + std::to_string(kProtocolVersion) + "([^0-9]|$)");
      EXPECT_TRUE(std::regex_search(text, peer)) << text;
      EXPECT_TRUE(std::regex_search(text, ours)) << text;
    }
  }
}

TEST(ProtocolHostileTest, ResumeValues) {
  // A place before its epoch's start, a world size beyond the limit, a
  // window and resume slots beyond kMaxWindow together.
  ExpectInvalid(EncodeBytes(Resume{"s", 1, 2, 100, 99, 0, 0}), "next_seq < epoch_start");
  ExpectInvalid(EncodeBytes(Resume{"s", 1, 2, 100, 100, 0, kMaxWorldSize + 1}), "world_size");
  EXPECT_TRUE(DecodeBytes(EncodeBytes(Resume{"s", 1, 2, 100, 100, 0, kMaxWorldSize})).ok());
  Welcome w = SampleWelcome();
  w.resume_slots = kMaxWindow - w.window + 1;
  ExpectInvalid(EncodeBytes(w), "resume slots");
  w.resume_slots = kMaxWindow - w.window;
  EXPECT_TRUE(DecodeBytes(EncodeBytes(w)).ok());
}

TEST(ProtocolHostileTest, UnknownType) {
  for (uint8_t type : {uint8_t{0}, uint8_t{19}, uint8_t{20}, uint8_t{100}, uint8_t{255}}) {
    Bytes f = Header(static_cast<MessageType>(type));
    ExpectInvalid(f, "unknown type " + std::to_string(type));
    Result<Message> m = DecodeBytes(f);
    EXPECT_NE(m.status().message().find(std::to_string(type)), std::string::npos)
        << m.status().ToString();
    // With a plausible body after the header.
    PutLE<uint64_t>(f, 1);
    ExpectInvalid(f, "unknown type with body " + std::to_string(type));
  }
}

TEST(ProtocolHostileTest, TrailingBytes) {
  for (const std::vector<Message>& set : {SampleMessages(), EdgeMessages()}) {
    for (const Message& msg : set) {
      for (size_t extra : {1u, 7u, 64u}) {
        Bytes f = EncodeBytes(msg);
        f.insert(f.end(), extra, 0);
        ExpectInvalid(f, std::string(MessageName(msg)) + " + " + std::to_string(extra));
        Result<Message> m = DecodeBytes(f);
        EXPECT_NE(m.status().message().find("trailing"), std::string::npos)
            << m.status().ToString();
      }
    }
  }
}

// Runs `decode` `reps` times and fails when it is not fast: a decoder that
// trusted a huge count would allocate gigabytes (and take seconds) or throw.
template <typename F>
void ExpectFast(F decode, const std::string& what, int reps = 200) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) decode();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  EXPECT_LT(ms, 500) << what << ": " << reps << " decodes took " << ms << " ms";
}

Bytes BatchPrefix(uint32_t segments) {
  Bytes f = Header(MessageType::kBatch);
  PutLE<uint64_t>(f, 1);  // request_id
  PutLE<uint64_t>(f, 2);  // lease_id
  PutLE<uint32_t>(f, 0);  // epoch
  PutLE<uint32_t>(f, 0);  // step
  PutLE<uint64_t>(f, 0);  // first_seq
  PutLE<uint64_t>(f, 0);  // skipped
  PutLE<uint32_t>(f, segments);
  return f;
}

TEST(ProtocolHostileTest, HugeIndexCountFailsFast) {
  // A Batch whose one segment and index count both say 2^31 samples, in a
  // 70-byte frame.
  Bytes f = BatchPrefix(1);
  PutLE<uint32_t>(f, 0);         // slot
  PutLE<uint32_t>(f, 0);         // offset
  PutLE<uint32_t>(f, 1u << 31);  // count
  PutLE<uint32_t>(f, 0);         // producer_epoch
  PutLE<uint32_t>(f, 1u << 31);  // index count
  ASSERT_EQ(f.size(), 70u);
  ExpectInvalid(f, "2^31 indices");
  ExpectFast([&] { (void)DecodeBytes(f); }, "2^31 indices");

  // No segments, 2^31 indices, in a 54-byte frame.
  Bytes g = BatchPrefix(0);
  PutLE<uint32_t>(g, 1u << 31);
  ExpectInvalid(g, "2^31 indices without segments");
  ExpectFast([&] { (void)DecodeBytes(g); }, "2^31 indices without segments");

  // A count within kMaxBatch but beyond the frame must not allocate kMaxBatch
  // indices either.
  Bytes h = BatchPrefix(1);
  PutLE<uint32_t>(h, 0);
  PutLE<uint32_t>(h, 0);
  PutLE<uint32_t>(h, static_cast<uint32_t>(kMaxBatch));
  PutLE<uint32_t>(h, 0);
  PutLE<uint32_t>(h, static_cast<uint32_t>(kMaxBatch));
  PutLE<int64_t>(h, 1);
  ExpectInvalid(h, "kMaxBatch indices in a small frame");
  ExpectFast([&] { (void)DecodeBytes(h); }, "kMaxBatch indices in a small frame", 2000);
}

TEST(ProtocolHostileTest, HugeCountsFailFast) {
  std::vector<std::pair<std::string, Bytes>> frames;
  for (uint32_t n : {0xFFFFFFFFu, 1u << 31, static_cast<uint32_t>(kMaxSegments),
                     static_cast<uint32_t>(kMaxSegments) + 1}) {
    frames.emplace_back("segments " + std::to_string(n), BatchPrefix(n));
  }
  // A RELEASE or BYE whose lease list claims `n` ids and holds one.
  auto lease_list = [](MessageType type, uint32_t n) {
    Bytes f = Header(type);
    PutLE<uint32_t>(f, n);
    PutLE<uint64_t>(f, 1);
    return f;
  };
  for (uint32_t n : {0xFFFFFFFFu, static_cast<uint32_t>(kMaxReleases),
                     static_cast<uint32_t>(kMaxReleases) + 1}) {
    frames.emplace_back("leases " + std::to_string(n), lease_list(MessageType::kRelease, n));
    frames.emplace_back("kept leases " + std::to_string(n), lease_list(MessageType::kBye, n));
    Bytes g = Header(MessageType::kNext);
    PutLE<uint64_t>(g, 7);  // request_id
    PutLE<uint32_t>(g, n);
    PutLE<uint64_t>(g, 1);
    frames.emplace_back("next with releases " + std::to_string(n), g);
  }
  for (uint32_t n :
       {0xFFFFFFFFu, static_cast<uint32_t>(kMaxJson), static_cast<uint32_t>(kMaxJson) + 1}) {
    Bytes f = Header(MessageType::kStatsReply);
    PutLE<uint32_t>(f, n);
    f.push_back('{');
    frames.emplace_back("json " + std::to_string(n), f);
  }
  {
    Bytes f = Header(MessageType::kHello);
    PutLE<uint32_t>(f, 0xFFFFFFFFu);  // name length
    frames.emplace_back("hello name", f);
  }
  {
    Bytes f = Header(MessageType::kError);
    PutLE<uint64_t>(f, 0);
    f.push_back(3);
    PutLE<uint32_t>(f, static_cast<uint32_t>(kMaxString) + 1);
    f.insert(f.end(), kMaxString + 1, 'x');  // the bytes are there, but too many
    frames.emplace_back("error message over the limit", f);
  }
  // Welcome with huge field / allocation / dimension / event counts.
  auto welcome_head = [](uint32_t fields) {
    Bytes f = Header(MessageType::kWelcome);
    PutLE<uint64_t>(f, 1);  // consumer_id
    PutLE<uint32_t>(f, 2);  // server_pid
    PutLE<uint32_t>(f, 0);  // server_name ""
    PutLE<uint32_t>(f, 4);  // window
    PutLE<uint32_t>(f, 8);  // producer_batch_size
    PutLE<uint32_t>(f, fields);
    return f;
  };
  for (uint32_t n :
       {0xFFFFFFFFu, static_cast<uint32_t>(kMaxFields), static_cast<uint32_t>(kMaxFields) + 1}) {
    frames.emplace_back("fields " + std::to_string(n), welcome_head(n));
  }
  for (uint32_t dims :
       {0xFFFFFFFFu, static_cast<uint32_t>(kMaxDims), static_cast<uint32_t>(kMaxDims) + 1}) {
    Bytes f = welcome_head(1);
    PutLE<uint32_t>(f, 1);
    f.push_back('x');
    f.push_back(0);  // dtype
    f.push_back(0);  // memory
    PutLE<uint32_t>(f, dims);
    PutLE<int64_t>(f, 3);
    frames.emplace_back("dims " + std::to_string(dims), f);
  }
  for (uint32_t n : {0xFFFFFFFFu, static_cast<uint32_t>(kMaxRings) + 1}) {
    Bytes f = welcome_head(0);
    PutLE<uint32_t>(f, n);
    frames.emplace_back("rings " + std::to_string(n), f);
  }
  for (uint32_t n : {0xFFFFFFFFu, static_cast<uint32_t>(kMaxAllocations) + 1}) {
    Bytes f = welcome_head(0);
    PutLE<uint32_t>(f, 1);  // one ring
    PutLE<int32_t>(f, -1);  // its device
    PutLE<uint32_t>(f, n);
    frames.emplace_back("allocations " + std::to_string(n), f);
  }
  for (uint32_t n :
       {0xFFFFFFFFu, static_cast<uint32_t>(kMaxWindow), static_cast<uint32_t>(kMaxWindow) + 1}) {
    Bytes f = welcome_head(0);
    PutLE<uint32_t>(f, 1);  // one ring
    PutLE<int32_t>(f, 0);   // its device
    PutLE<uint32_t>(f, 1);  // one allocation
    f.push_back(1);         // kind cuda
    PutLE<uint64_t>(f, 4096);
    PutLE<uint32_t>(f, 0);  // shm_name ""
    PutLE<int32_t>(f, 0);
    f.insert(f.end(), kIpcHandleBytes, 0xAA);
    PutLE<uint32_t>(f, n);  // event handles
    f.insert(f.end(), kIpcHandleBytes, 0xBB);
    frames.emplace_back("event handles " + std::to_string(n), f);
  }
  for (const auto& [what, frame] : frames) {
    SCOPED_TRACE(what);
    ExpectInvalid(frame, what);
    ExpectFast([&] { (void)DecodeBytes(frame); }, what);
  }
}

TEST(ProtocolHostileTest, UnknownEnumValues) {
  // dtype 200 and memory kind 9 in a field spec.
  {
    const Bytes good = EncodeBytes(SampleWelcome());
    const size_t name = Find(good, "DTYPEFIELD");
    ASSERT_NE(name, std::string::npos);
    const size_t dtype_at = name + std::strlen("DTYPEFIELD");
    ASSERT_EQ(good[dtype_at], static_cast<uint8_t>(DType::kBFloat16));
    ASSERT_EQ(good[dtype_at + 1], static_cast<uint8_t>(MemoryKind::kHost));
    ExpectInvalidWith<uint8_t>(good, dtype_at, {kNumDTypes, 200, 255}, "dtype", "dtype");
    ExpectInvalidWith<uint8_t>(good, dtype_at + 1, {2, 9, 255}, "field memory kind");
    // Each valid dtype decodes.
    for (uint8_t dtype = 0; dtype < kNumDTypes; ++dtype) {
      Bytes f = good;
      f[dtype_at] = dtype;
      Result<Message> m = DecodeBytes(f);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ(std::get<Welcome>(*m).fields[2].dtype, static_cast<DType>(dtype));
    }
  }
  // memory kind 9 in an allocation: kind u8 | bytes u64 | shm_name (u32 len + bytes).
  {
    const Bytes good = EncodeBytes(SampleWelcome());
    const size_t name = Find(good, "SHMMARK");
    ASSERT_NE(name, std::string::npos);
    const size_t kind_at = name - 4 - 8 - 1;
    ASSERT_EQ(good[kind_at], static_cast<uint8_t>(MemoryKind::kHost));
    ExpectInvalidWith<uint8_t>(good, kind_at, {2, 9, 255}, "allocation memory kind");
  }
  // join 7 and drop_last 2 in a Hello.
  {
    Hello h = SampleHello();
    h.name = "n";
    const Bytes good = EncodeBytes(h);
    const size_t drop_last_at = 6 + 4 + 1 + 4 + 4;
    const size_t join_at = drop_last_at + 1;
    ASSERT_EQ(good[drop_last_at], 0);
    ASSERT_EQ(good[join_at], static_cast<uint8_t>(JoinPolicy::kNextEpoch));
    ExpectInvalidWith<uint8_t>(good, join_at, {2, 7, 255}, "join");
    ExpectInvalidWith<uint8_t>(good, drop_last_at, {2, 255}, "drop_last");
    Bytes f = good;
    f[join_at] = 0;
    Result<Message> m = DecodeBytes(f);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(std::get<Hello>(*m).join, JoinPolicy::kImmediate);
  }
  // Error codes 0 (OK is not an error) and 200.
  {
    const Bytes good = EncodeBytes(Error{5, StatusCode::kInternal, "boom"});
    const size_t code_at = 6 + 8;
    ASSERT_EQ(good[code_at], static_cast<uint8_t>(StatusCode::kInternal));
    ExpectInvalidWith<uint8_t>(good, code_at, {0, 11, 200, 255}, "error code");
    for (uint8_t code = 1; code <= 10; ++code) {
      Bytes f = good;
      f[code_at] = code;
      Result<Message> m = DecodeBytes(f);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ(std::get<Error>(*m).code, static_cast<StatusCode>(code));
    }
  }
}

TEST(ProtocolHostileTest, BadValues) {
  const Bytes good = EncodeBytes(SampleWelcome());
  // Welcome: window and producer batch size follow consumer_id, server_pid and
  // the server name "demo".
  const size_t window_at = 6 + 8 + 4 + 4 + 4;
  const size_t batch_at = window_at + 4;
  ASSERT_EQ(good[window_at], 4);
  ExpectInvalidWith<uint32_t>(good, window_at, {0, kMaxWindow + 1, 0xFFFFFFFF}, "window");
  ExpectInvalidWith<uint32_t>(good, batch_at, {0, kMaxBatch + 1, 0xFFFFFFFF}, "producer batch");
  // Field dimensions must be in [1, 2^31].
  {
    const size_t name = Find(good, "DTYPEFIELD");
    const size_t dim0_at = name + std::strlen("DTYPEFIELD") + 2 + 4;
    int64_t d0 = 0;
    std::memcpy(&d0, good.data() + dim0_at, 8);
    ASSERT_EQ(d0, 2);
    ExpectInvalidWith<int64_t>(good, dim0_at, {0, -1, INT64_MIN, (int64_t{1} << 31) + 1, INT64_MAX},
                               "dimension");
    Bytes f = good;
    PokeLE<int64_t>(f, dim0_at, int64_t{1} << 31);
    EXPECT_TRUE(DecodeBytes(f).ok());
  }
  // Batch: an empty segment, and index counts that do not match the segments.
  {
    Batch b;
    b.segments = {Segment{0, 0, 0, 0}};
    ExpectInvalid(EncodeBytes(b), "empty segment");
    b.segments = {Segment{0, 0, 2, 0}, Segment{1, 0, 3, 0}};
    b.indices = {1, 2, 3, 4};
    ExpectInvalid(EncodeBytes(b), "4 indices for 5 samples");
    b.indices = {1, 2, 3, 4, 5, 6};
    ExpectInvalid(EncodeBytes(b), "6 indices for 5 samples");
    b.indices = {1, 2, 3, 4, 5};
    EXPECT_TRUE(DecodeBytes(EncodeBytes(b)).ok());
  }
  // Segment counts whose sum overflows 32 bits do not wrap around to a match.
  {
    Bytes f = BatchPrefix(2);
    for (int s = 0; s < 2; ++s) {
      PutLE<uint32_t>(f, 0);
      PutLE<uint32_t>(f, 0);
      PutLE<uint32_t>(f, s == 0 ? 0xFFFFFFFFu : 2u);
      PutLE<uint32_t>(f, 0);
    }
    PutLE<uint32_t>(f, 1);  // 0xFFFFFFFF + 2 == 1 (mod 2^32)
    PutLE<int64_t>(f, 7);
    ExpectInvalid(f, "segment sum overflow");
  }
  // Hello: the group fields are consistent: a world_size of 1..kMaxWorldSize
  // with a non-empty group and rank below it, or neither.
  {
    Hello h = SampleHello();
    const Bytes good = EncodeBytes(h);
    const size_t group_at = Find(good, "GROUPMARK");
    ASSERT_NE(group_at, std::string::npos);
    const size_t rank_at = group_at + h.group.size();
    const size_t world_at = rank_at + 4;
    ExpectInvalidWith<uint32_t>(good, world_at, {0, 3, kMaxWorldSize + 1, 0xFFFFFFFF}, "world_size",
                                "world_size");
    ExpectInvalidWith<uint32_t>(good, rank_at, {8, 9, 0xFFFFFFFF}, "rank >= world_size", "rank");
    Bytes f = good;
    PokeLE<uint32_t>(f, rank_at, 7);
    ASSERT_TRUE(DecodeBytes(f).ok());
    EXPECT_EQ(std::get<Hello>(*DecodeBytes(f)).rank, 7u);
    h.world_size = 0;
    ExpectInvalid(EncodeBytes(h), "a group without a world_size");
    h.group = "";
    ExpectInvalid(EncodeBytes(h), "a rank without a world_size");
    h.rank = 0;
    EXPECT_TRUE(DecodeBytes(EncodeBytes(h)).ok()) << "no group";
    h.world_size = 2;
    ExpectInvalid(EncodeBytes(h), "a world_size without a group");
    h.group = std::string(kMaxGroupName + 1, 'g');
    ExpectInvalid(EncodeBytes(h), "long group name");
    h.group = std::string(kMaxGroupName, 'g');
    h.world_size = kMaxWorldSize;
    h.rank = kMaxWorldSize - 1;
    EXPECT_TRUE(DecodeBytes(EncodeBytes(h)).ok());
  }
  // Strings over the limit.
  {
    Hello h;
    h.name = std::string(kMaxString + 1, 'n');
    ExpectInvalid(EncodeBytes(h), "long name");
    h.name = std::string(kMaxString, 'n');
    EXPECT_TRUE(DecodeBytes(EncodeBytes(h)).ok());
  }
}

// ---- fuzz ----

// Checks one decode of arbitrary bytes: never a crash; an error is an
// InvalidArgument with a message; a success re-encodes to the same bytes
// (the codec is canonical, except for the ignored reserved header byte).
void CheckArbitraryFrame(const Bytes& frame, size_t& accepted) {
  Result<Message> m = DecodeBytes(frame);
  if (!m.ok()) {
    ASSERT_EQ(m.status().code(), StatusCode::kInvalidArgument) << m.status().ToString();
    ASSERT_FALSE(m.status().message().empty());
    return;
  }
  ++accepted;
  Bytes expected = frame;
  expected[5] = 0;
  ASSERT_EQ(EncodeBytes(*m), expected) << "non-canonical accepted " << MessageName(*m);
}

TEST(ProtocolFuzzTest, RandomMutationsNeverCrash) {
  const std::vector<Bytes> corpus = ValidEncodings();
  std::mt19937_64 rng(0xBA7C4C57);  // fully specified by the standard: deterministic
  auto below = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const uint32_t interesting[] = {
      0,          1,          2,       0x7F,     0x80,           0xFF,       0x100,
      0xFFFF,     0x10000,    0x10001, 1u << 20, (1u << 20) + 1, 0x7FFFFFFF, 0x80000000,
      0xFFFFFFFE, 0xFFFFFFFF, 4096,    4097,     16u << 20,      64};
  constexpr int kIterations = 1'000'000;
  size_t accepted = 0;
  Bytes frame;
  for (int it = 0; it < kIterations; ++it) {
    const size_t mode = below(16);
    if (mode == 0) {
      // A pure random frame; half of them with a valid header so that the
      // body decoders see it.
      frame.resize(below(200));
      for (uint8_t& b : frame) b = static_cast<uint8_t>(rng());
      if (frame.size() >= 6 && (rng() & 1)) {
        frame[0] = 'B';
        frame[1] = 'C';
        frame[2] = kProtocolVersion & 0xFF;
        frame[3] = kProtocolVersion >> 8;
        frame[4] = static_cast<uint8_t>(1 + below(12));
      }
    } else {
      frame = corpus[below(corpus.size())];
      const size_t mutations = 1 + below(3);
      for (size_t k = 0; k < mutations; ++k) {
        const size_t op = below(7);
        if (frame.empty()) {
          frame.push_back(static_cast<uint8_t>(rng()));
          continue;
        }
        const size_t pos = below(frame.size());
        switch (op) {
          case 0:  // flip one bit
            frame[pos] ^= static_cast<uint8_t>(1u << below(8));
            break;
          case 1:  // replace one byte
            frame[pos] = static_cast<uint8_t>(rng());
            break;
          case 2: {  // insert 1..16 random bytes
            const size_t n = 1 + below(16);
            Bytes ins(n);
            for (uint8_t& b : ins) b = static_cast<uint8_t>(rng());
            frame.insert(frame.begin() + static_cast<ptrdiff_t>(below(frame.size() + 1)),
                         ins.begin(), ins.end());
            break;
          }
          case 3: {  // delete 1..16 bytes
            const size_t n = std::min(frame.size() - pos, 1 + below(16));
            frame.erase(frame.begin() + static_cast<ptrdiff_t>(pos),
                        frame.begin() + static_cast<ptrdiff_t>(pos + n));
            break;
          }
          case 4:  // truncate
            frame.resize(pos);
            break;
          case 5:  // an interesting 32-bit value (counts, lengths, enums)
            if (pos + 4 <= frame.size()) {
              const uint32_t v = interesting[below(std::size(interesting))];
              std::memcpy(frame.data() + pos, &v, 4);
            }
            break;
          case 6:  // duplicate a chunk (repeated fields, longer arrays)
            if (pos < frame.size()) {
              const size_t n = std::min(frame.size() - pos, 1 + below(32));
              const Bytes chunk(frame.begin() + static_cast<ptrdiff_t>(pos),
                                frame.begin() + static_cast<ptrdiff_t>(pos + n));
              frame.insert(frame.begin() + static_cast<ptrdiff_t>(below(frame.size() + 1)),
                           chunk.begin(), chunk.end());
            }
            break;
        }
      }
    }
    CheckArbitraryFrame(frame, accepted);
    if (HasFatalFailure()) {
      std::string hex;
      for (uint8_t b : frame) {
        char buf[4];
        std::snprintf(buf, sizeof(buf), "%02x", b);
        hex += buf;
      }
      FAIL() << "iteration " << it << ", frame " << hex;
    }
  }
  // Sanity: the mutator keeps some frames valid (bit flips inside payloads),
  // so the success path is exercised too.
  EXPECT_GT(accepted, 1000u);
  RecordProperty("accepted", static_cast<int>(accepted));
}

}  // namespace
}  // namespace batchcast::proto
