// The batchcast wire protocol: message structs and their versioned codec.
// Private to the project (never installed): included as "core/src/protocol.h"
// by the server, the client and their tests.
//
// Every message is one ZeroMQ frame (the ROUTER adds the peer identity):
//   magic "BC" (2 bytes) | version u16 | type u8 | reserved u8 | body
// little-endian throughout. Decode() checks the magic, the version, every
// length and every enum value against the limits below, and rejects trailing
// bytes, so malformed input from a peer is a Status, never a crash or a huge
// allocation.
//
// Conversation (docs/semantics.md, "Protocol"): HELLO -> WELCOME | ERROR;
// NEXT -> BATCH | END_OF_EPOCH | ERROR (answered in request order);
// RELEASE, HEARTBEAT and BYE need no answer; the server also sends HEARTBEAT;
// STATS -> STATS_REPLY (JSON text); RESUME (before the first NEXT) -> RESUMED | ERROR.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "batchcast/core/field_spec.h"
#include "batchcast/core/join_policy.h"
#include "batchcast/core/status.h"
#include "core/src/ring_layout.h"

namespace batchcast {

// 2: HELLO carries the consumer group (group, rank, world_size).
// 3: WELCOME carries every ring of the server (and the consumer's home ring);
//    a segment names its ring.
// 4: resume (Note [Resume], server/src/scheduler.h): RESUME -> RESUMED;
//    WELCOME carries the stream's identity, the resume slots and the
//    consumer's start; BATCH and END_OF_EPOCH say where the consumer's epoch
//    starts and continues.
// 5: attached producers (Note [Attached producers], server/src/attach_point.h):
//    ATTACH -> ATTACHED | ERROR, READY, WORK -> DONE | ERROR, on a ring's
//    attach socket.
// 6: ATTACHED names the server's saved dataset listing (Note [Shared
//    listing], sources/src/dataset_listing.cc).
// 7: RESUME carries the batch size the place was saved with.
inline constexpr uint16_t kProtocolVersion = 7;

namespace proto {

// Bounds every decoder enforces.
inline constexpr size_t kMaxString = 4096;
inline constexpr size_t kMaxFields = 64;
inline constexpr size_t kMaxDims = 8;
inline constexpr size_t kMaxAllocations = 4;
inline constexpr size_t kMaxRings = 64;
inline constexpr size_t kMaxWindow = 65536;
inline constexpr size_t kMaxBatch = 1 << 20;
inline constexpr size_t kMaxSegments = 65536;
inline constexpr size_t kMaxReleases = 65536;
inline constexpr size_t kMaxJson = 16 << 20;
inline constexpr size_t kIpcHandleBytes = 64;
inline constexpr size_t kMaxGroupName = 256;
inline constexpr uint32_t kMaxWorldSize = 4096;

enum class MessageType : uint8_t {
  kHello = 1,
  kWelcome = 2,
  kNext = 3,
  kBatch = 4,
  kEndOfEpoch = 5,
  kError = 6,
  kRelease = 7,
  kHeartbeat = 8,
  kBye = 9,
  kStats = 10,
  kStatsReply = 11,
  kResume = 12,
  kResumed = 13,
  kAttach = 14,
  kAttached = 15,
  kReady = 16,
  kWork = 17,
  kDone = 18,
};

using IpcHandle = std::array<uint8_t, kIpcHandleBytes>;

struct Hello {
  std::string name;  // consumer name, for logs and stats
  uint32_t pid = 0;
  uint32_t batch_size = 0;
  bool drop_last = true;
  JoinPolicy join = JoinPolicy::kImmediate;
  uint16_t prefetch = 2;
  std::string device;  // "" = the producer's device
  // Consumer group (docs/semantics.md, "Groups"): world_size 0 = none (the whole
  // stream; group is then empty and rank 0); else a non-empty group name and
  // rank < world_size.
  std::string group;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  bool operator==(const Hello&) const = default;
};

// One shared allocation of the ring.
struct Allocation {
  MemoryKind kind = MemoryKind::kHost;
  uint64_t bytes = 0;
  std::string shm_name;                  // kHost: POSIX shared memory object name
  int32_t device_index = -1;             // kCuda: the producer's device
  IpcHandle mem_handle{};                // kCuda: cudaIpcMemHandle_t bytes
  std::vector<IpcHandle> event_handles;  // kCuda: one interprocess event per slot
  bool operator==(const Allocation&) const = default;
};

// One ring of the server (one per GPU with --device cuda:0,1; Note [Rings per
// GPU], server/src/device_list.h): its device and allocations, each holding
// every slot of the window.
struct RingInfo {
  int32_t device = -1;  // the ring's GPU, -1 for a host ring
  std::vector<Allocation> allocations;
  bool operator==(const RingInfo&) const = default;
};

struct Welcome {
  uint64_t consumer_id = 0;
  uint32_t server_pid = 0;
  std::string server_name;
  uint32_t window = 0;
  uint32_t producer_batch_size = 0;
  std::vector<FieldSpec> fields;
  // At least one; a Segment's `ring` indexes it. `home_ring`: the ring of the
  // consumer's own device, which its fields are on (zero-copy from there,
  // copied from the others).
  std::vector<RingInfo> rings;
  uint32_t home_ring = 0;
  uint64_t epoch_len = 0;          // samples in one consumer epoch
  uint64_t batches_per_epoch = 0;  // for this consumer's batch size and drop_last
  uint32_t heartbeat_interval_ms = 0;
  uint32_t heartbeat_timeout_ms = 0;
  // Note [Resume]: the stream's identity (stream_identity.h), the ring slots
  // after the window's that a catching-up consumer is served from (the
  // client maps window + resume_slots slots), and the seq this consumer's
  // epoch 0 starts at (its group's, in a group).
  std::string stream;
  uint32_t resume_slots = 0;
  uint64_t start = 0;
  bool operator==(const Welcome&) const = default;
};

// Asks for the next batch; also ends the listed leases (a RELEASE carried
// along, which saves a message per batch on the hot path).
struct Next {
  uint64_t request_id = 0;
  std::vector<uint64_t> releases;
  bool operator==(const Next&) const = default;
};

struct Batch {
  uint64_t request_id = 0;
  uint64_t lease_id = 0;  // 0: nothing to release
  uint32_t epoch = 0;     // the consumer's epoch
  uint32_t step = 0;      // batch number inside that epoch
  uint64_t first_seq = 0;
  uint64_t skipped = 0;  // samples this consumer has skipped so far (lag policy skip)
  std::vector<Segment> segments;
  std::vector<int64_t> indices;  // dataset index of each sample
  // Note [Resume]: the seq this epoch starts at, and the seq the consumer
  // continues from after this batch (its group's next round, in a group).
  uint64_t epoch_start = 0;
  uint64_t next_seq = 0;
  bool operator==(const Batch&) const = default;
};

struct EndOfEpoch {
  uint64_t request_id = 0;
  uint32_t epoch = 0;    // the epoch that ended
  uint32_t batches = 0;  // batches delivered in it
  uint64_t skipped = 0;
  // Note [Resume]: where the next epoch starts, and where the consumer
  // continues (later than that only after a lag-policy skip).
  uint64_t next_epoch_start = 0;
  uint64_t next_seq = 0;
  bool operator==(const EndOfEpoch&) const = default;
};

// The request_id of an ERROR that answers a STATS (which carries no id),
// e.g. when a peer asks too often; no NEXT ever has it.
inline constexpr uint64_t kStatsRequestId = UINT64_MAX;

struct Error {
  uint64_t request_id = 0;  // 0 when not an answer to a NEXT; kStatsRequestId for STATS
  StatusCode code = StatusCode::kInternal;
  std::string message;
  bool operator==(const Error&) const = default;
};

struct Release {
  std::vector<uint64_t> lease_ids;
  bool operator==(const Release&) const = default;
};

struct Heartbeat {
  bool operator==(const Heartbeat&) const = default;
};
// Leaves the stream. `kept_leases` are the batches the client still holds
// (Note [Leases]); every other lease of this consumer ends at once.
struct Bye {
  std::vector<uint64_t> kept_leases;
  bool operator==(const Bye&) const = default;
};
struct Stats {
  bool operator==(const Stats&) const = default;
};
struct StatsReply {
  std::string json;
  bool operator==(const StatsReply&) const = default;
};

// The request_id of an ERROR that answers a RESUME (which carries no id).
inline constexpr uint64_t kResumeRequestId = UINT64_MAX - 1;

// Note [Resume]: moves a consumer that has asked for nothing yet to a saved
// place in the stream: RESUMED, or ERROR (kResumeRequestId) naming what is
// wrong; the consumer then stays where it was.
struct Resume {
  std::string stream;  // the identity the place was saved in (WELCOME's)
  uint32_t epoch = 0;  // the consumer epoch
  uint32_t step = 0;   // batches it got in it (rounds, in a group)
  uint64_t epoch_start = 0;
  uint64_t next_seq = 0;
  uint64_t skipped = 0;
  uint32_t world_size = 0;  // its group's then (0: none)
  // Its batch size then (0: unknown, taken to be the resuming consumer's):
  // a group resumed with another counts the rounds left in the interrupted
  // epoch in the new size (Note [Resume]).
  uint32_t batch_size = 0;
  bool operator==(const Resume&) const = default;
};
struct Resumed {
  uint64_t next_seq = 0;  // where it continues
  bool operator==(const Resumed&) const = default;
};

// Note [Attached producers] (server/src/attach_point.h): a process that
// takes over the decode of one ring says ATTACH on that ring's attach
// socket; the server answers ATTACHED (what the holder needs to build the
// same source and map the ring) or ERROR. The holder says READY once it can
// write, then gets WORK (a granted slot) and answers DONE (the samples it
// wrote) or ERROR (it gives up; the server writes the slot itself). BYE
// detaches; the server answers BYE once the ring is free again.
struct Attach {
  uint32_t ring = 0;
  uint32_t pid = 0;
  bool operator==(const Attach&) const = default;
};
struct Attached {
  // The server's source options, "name=value" (Server option table names).
  std::vector<std::string> options;
  RingInfo ring;
  std::vector<FieldSpec> fields;  // as in the ring (their memory kind the ring's)
  uint32_t window = 0;            // the ring's slots: window + resume_slots
  uint32_t resume_slots = 0;
  uint32_t batch_size = 0;      // samples per slot
  uint64_t dataset_size = 0;    // Source::size() of the server's source
  uint64_t listing_digest = 0;  // Source::listing_digest()
  bool device_output = false;   // the ring's source writes device memory itself
  // The server's saved scan of its dataset (Note [Shared listing]), which
  // the holder's source reads instead of scanning; empty: none (scan).
  std::string listing;
  bool operator==(const Attached&) const = default;
};
struct Ready {
  bool operator==(const Ready&) const = default;
};
// Fill `slot` with the samples `indices` (seqs from first_seq, producer epoch
// `epoch`); `next` is the read-ahead hint (ReadAhead).
struct Work {
  uint32_t slot = 0;
  uint64_t first_seq = 0;
  uint32_t epoch = 0;
  std::vector<int64_t> indices;
  std::vector<int64_t> next;
  uint32_t next_epoch = 0;
  bool next_guess = false;
  bool operator==(const Work&) const = default;
};
// The slot of WORK `first_seq` is written: `indices` name the samples
// written, in place order (Source::FillBatch's compaction; the others are
// holes). For a device ring the slot's event was recorded first.
struct Done {
  uint32_t slot = 0;
  uint64_t first_seq = 0;
  std::vector<int64_t> indices;
  bool operator==(const Done&) const = default;
};

// In MessageType order: alternative i is wire type i + 1 (never reorder).
using Message =
    std::variant<Hello, Welcome, Next, Batch, EndOfEpoch, Error, Release, Heartbeat, Bye, Stats,
                 StatsReply, Resume, Resumed, Attach, Attached, Ready, Work, Done>;

std::string_view MessageName(const Message& message);

// Encodes `message` with the current protocol version.
std::string Encode(const Message& message);

// Appends the encoding to `out` (lets hot paths reuse a buffer).
void EncodeTo(const Message& message, std::string& out);

// Decodes one frame. Fails with InvalidArgument (bad magic, lengths, values,
// trailing bytes) or with a version mismatch message naming both versions.
Result<Message> Decode(std::span<const uint8_t> frame);

inline Status ToStatus(const Error& error) { return Status(error.code, error.message); }

}  // namespace proto
}  // namespace batchcast
