// Consumer: a training process's connection to a batchcast server.
//
//   batchcast::ConsumerOptions options;
//   options.endpoint = "demo";          // a server name or ipc:// / tcp:// endpoint
//   options.batch_size = 48;            // independent of the producer's batch
//   auto consumer = batchcast::Consumer::Connect(options);
//   if (!consumer.ok()) { ... consumer.status().ToString() ... }
//   while (true) {
//     batchcast::Result<batchcast::Batch> batch = (*consumer)->Next();
//     if (!batch.ok()) break;                   // server gone, stream ended, ...
//     if (batch->end_of_epoch()) continue;      // the next Next() starts a new epoch
//     auto image = batch->field("image");       // zero-copy view of the ring
//   }
//
// Semantics (docs/semantics.md, "Consumer semantics"): each consumer counts its own
// epochs of epoch_len() samples; batches_per_epoch() batches then an
// end-of-epoch marker. Up to `prefetch` requests are kept in flight. A
// background thread sends heartbeats, so a consumer may take long between
// Next() calls; a server that dies or stops answering makes Next() fail with
// Unavailable within heartbeat_timeout (2 s by default).
//
// CUDA rings (server --device cuda:N): the client maps the server's device
// allocation once (CUDA IPC) and hands out device pointers of the ring's
// device N (device()); see batch.h for stream ordering and leases. No host
// synchronization happens in Next(). The consumer says which GPU it computes
// on (ConsumerOptions::device, by default the current device at Connect): a
// server with a ring per GPU (--device cuda:0,1 or cuda:all) serves it from
// the ring of that GPU, so N is its own device. A consumer on a GPU M without
// a ring of its own (a server on cuda:0 only, a consumer on cuda:1) is served
// from the first ring: every batch size works (a batch spanning slots is
// gathered on N, with N made current only inside the library), and the
// fields are on N. It copies the batch to M itself: cudaMemcpyPeerAsync with
// N current, on a stream of N ordered after the batch (the delivery stream, or one given to
// RecordStream()); torch's `.to(M)` does exactly that. (Kernels on M should
// not read the fields directly: a gathered batch lives in a stream-ordered
// pool of N, which only N may access.) It is never given a copy on M
// implicitly. Both processes must see the same GPUs under the same numbers
// (the same CUDA_VISIBLE_DEVICES).
//
// Thread-safety: Next() and Stats() may be called from one thread at a time;
// Batches may be destroyed on any thread. Batches may outlive the Consumer:
// the connection stays open (without a window position) until the last one is
// gone.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "batchcast/client/batch.h"
#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/field_spec.h"
#include "batchcast/core/join_policy.h"
#include "batchcast/core/status.h"

namespace batchcast {

namespace internal {
class Session;
class WaitClock;
}  // namespace internal

// A consumer's place in its server's stream, to resume there in a new
// process (docs/semantics.md, "Resume"): Consumer::position() after the last
// Next(), saved with the model's checkpoint; ConsumerOptions::resume_from
// (or Consumer::Resume before the first Next()) in the restarted process,
// against the same server or one started again with the same options. The
// batches that follow are the ones the consumer would have got (the same
// samples in the same order); a server of another stream (dataset, seed,
// transform, shard, ...) refuses it naming what differs. A consumer of a
// group saves its group's place: every rank of the restarted group resumes
// from a place saved at the same step (any rank's).
struct ConsumerPosition {
  // The text format's version (ToString, Parse).
  static constexpr uint32_t kFormat = 1;
  std::string stream;        // the stream's identity (the server's, at WELCOME)
  uint32_t epoch = 0;        // the consumer epoch it is in
  uint32_t step = 0;         // batches it got in that epoch
  uint64_t epoch_start = 0;  // the seq that epoch starts at
  uint64_t next_seq = 0;     // the seq it continues from
  uint64_t skipped = 0;      // samples it skipped (lag_policy skip)
  uint32_t batch_size = 0;   // its batch size (a resume may use another: docs/semantics.md)
  uint32_t world_size = 0;   // its group's ranks (0: no group); a resume needs the same
  uint32_t rank = 0;         // its rank (informative)
  bool operator==(const ConsumerPosition&) const = default;

  // One line of text: "batchcast-position/1 epoch=3 step=17 ... check=HEX
  // stream=...". Parse reads it back: InvalidArgument naming what is wrong
  // (a missing or malformed field, a check that does not match, text of a
  // newer format).
  std::string ToString() const;
  static Result<ConsumerPosition> Parse(std::string_view text);
  // A digest of every field (16 hex digits), which ToString writes and
  // Parse checks: a state changed or cut on its way back is refused.
  std::string Check() const;

  // For bindings (batchcast.Loader's state dict): the integer fields by name,
  // in the text's order; and a position from text values by name (those of
  // ToString: the integers, "stream" and "check"), checked as Parse checks.
  std::vector<std::pair<std::string_view, uint64_t>> Integers() const;
  static Result<ConsumerPosition> FromFields(
      uint64_t format, std::map<std::string, std::string, std::less<>> fields);
};

struct ConsumerOptions {
  std::string endpoint = "batchcast";  // server name, ipc://PATH or tcp://HOST:PORT
  uint32_t batch_size = 64;
  bool drop_last = true;
  JoinPolicy join = JoinPolicy::kImmediate;
  uint16_t prefetch = 2;
  // Limit on one Next(); 0 = wait as long as the server is alive.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds connect_timeout{10000};
  std::string name;  // shown in server stats; default "<program>:<pid>"
  // tcp:// endpoints (CURVE: docs/security.md): the server's key file; "" =
  // $BATCHCAST_KEY_FILE, else this user's key on this machine (what a server
  // of this user uses by default). Not for ipc:// endpoints.
  std::string key_file;
  // The GPU this consumer computes on, told to the server (HELLO), which
  // serves it from the ring of that GPU when it has one (--device cuda:0,1):
  // "cuda:M"; "" = the calling thread's current CUDA device at Connect (none
  // in a build without CUDA or without a visible GPU; this initializes the
  // CUDA runtime); "cpu" = no GPU (the server's first ring; CUDA untouched).
  std::string device;
  // CUDA rings: the stream (a cudaStream_t of the ring's device) on which
  // batches are delivered and used; nullptr = that device's legacy default
  // stream. See batch.h.
  CudaStreamRef cuda_stream;

  // Consumer groups (docs/semantics.md, "Groups, several GPUs, several nodes"): the
  // consumers of one server that name the same `group`, each with its own
  // `rank` of `world_size`, split the stream like DistributedSampler: each
  // consumer epoch of the group is cut into chunks of batch_size samples and
  // chunk k goes to rank k % world_size; every rank gets the same number of
  // batches per epoch (the last incomplete round of world_size chunks is
  // dropped for all: drop_last must be true), and together they see each
  // sample of the epoch once. All ranks must use the same batch_size, join
  // and world_size. Other consumers (other groups, none) get the whole stream.
  // Unset fields come from the launcher: under torchrun or SLURM (LOCAL_RANK
  // / SLURM_LOCALID ...) the consumer joins its job's group with its local
  // rank (ResolveGroup below; docs/semantics.md, "Groups"); explicit values
  // win; group = "" opts out (the whole stream), as BATCHCAST_GROUP=none in
  // the environment does.
  std::optional<std::string> group;
  std::optional<uint32_t> rank;
  std::optional<uint32_t> world_size;

  // Resume (docs/semantics.md, "Resume"): start at this saved place
  // (Consumer::position() of an earlier process) instead of the join point.
  std::optional<ConsumerPosition> resume_from;
};

// How much of an interval a consumer spent waiting for data
// (Consumer::TakeWaitShare): a job's own "input-bound" figure.
struct WaitShare {
  double wait_s = 0;  // seconds Next() waited for the server in the interval
  double wall_s = 0;  // the interval's length in seconds
  // wait_s / wall_s, from 0 to 1 (0 for an empty interval).
  double fraction() const { return wall_s > 0 ? std::min(1.0, wait_s / wall_s) : 0.0; }
};

// The group a consumer joins, as ResolveGroup decided.
struct GroupMembership {
  std::string group;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  // Where it came from: "options", or the launcher's variables
  // ("torchrun (LOCAL_RANK, LOCAL_WORLD_SIZE)", ...).
  std::string source;
};
// The group `options` join (nullopt: none, the whole stream): explicit
// fields win, the others come from the launcher's environment; a launcher
// world of one local rank is no group unless `group` is named. InvalidArgument
// for inconsistent values (rank >= world_size, a rank without a group, ...)
// and for launcher variables that are set but unusable.
Result<std::optional<GroupMembership>> ResolveGroup(const ConsumerOptions& options);

class Consumer {
 public:
  // Connects and joins the stream. NotFound when no server of that name runs
  // (or no key file for tcp://), Unavailable when it does not answer,
  // PermissionDenied when a tcp:// server refuses the key, InvalidArgument for
  // options the server refuses (with its reason), group fields ResolveGroup
  // refuses, and a malformed `device`.
  // With options.resume_from, the server's refusal of the place
  // (InvalidArgument naming what differs, see Resume) fails the connection.
  static Result<std::unique_ptr<Consumer>> Connect(ConsumerOptions options);

  ~Consumer();  // leaves the stream (BYE)
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // The next batch, or the end-of-epoch marker. Errors: Unavailable (server
  // gone or stopped), OutOfRange (the stream ended), DeadlineExceeded (timeout,
  // or a group whose ranks did not all connect within the server's
  // group_timeout), ResourceExhausted (evicted, or too many unreleased
  // batches), Cancelled (a rank of this consumer's group left: it gets no
  // batch its departed peer did not get).
  Result<Batch> Next();
  // The place after the last batch or end-of-epoch marker Next() returned
  // (before the first: where the consumer starts), to save for a resume.
  // Same threads as Next().
  ConsumerPosition position() const;
  // Moves this consumer, before its first Next(), to a saved place, as
  // ConsumerOptions::resume_from does at Connect. InvalidArgument naming
  // what is wrong: a place saved from another stream (the differing
  // components with both values), by a group of another world size (or
  // without a group), a place no epoch has, a group whose other ranks
  // resumed elsewhere or already read, a place the server cannot serve
  // (its ring no longer holds it and it cannot write it again, with why),
  // or a call after the first Next(). The consumer then stays where it was.
  Status Resume(const ConsumerPosition& place);
  // Changes the delivery stream of the following batches (see
  // ConsumerOptions::cuda_stream), e.g. to the framework's current stream.
  void set_cuda_stream(CudaStreamRef cuda_stream);

  // Batches in one epoch, as announced (floor or ceil of epoch_len /
  // batch_size; in a group, floor(epoch_len / (world_size * batch_size)),
  // with epoch_len the smallest shard's when the server is one of several
  // shards). Files the server drops while decoding (on_error=skip) make
  // epochs shorter: at most one batch fewer per dropped file in that epoch.
  uint64_t batches_per_epoch() const;
  uint64_t epoch_len() const;
  uint64_t consumer_id() const;
  uint32_t producer_batch_size() const;
  uint32_t window() const;
  // Where the ring (and so every zero-copy field) lives: {kHost, -1} or {kCuda, N}.
  Device device() const;
  // The server's name and the index of the ring that serves this consumer
  // among its rings (what batchcast::AttachedProducer::Start takes).
  const std::string& server_name() const;
  uint32_t home_ring() const;
  // The group it joined (ResolveGroup), nullopt when it reads the whole
  // stream. batches_per_epoch() is then this rank's count.
  const std::optional<GroupMembership>& group() const;
  const std::vector<FieldSpec>& fields() const;
  // The server's stats as JSON text.
  Result<std::string> Stats();
  // Seconds Next() has waited for the server's reply since Connect, a wait
  // in progress included (the client's side of the server's per-consumer
  // `wait_s`, docs/stats.md; with prefetch the server's figure counts
  // requests parked ahead too). Any thread.
  double wait_seconds() const;
  // The share of the wall time that Next() waited for data since the
  // previous call (the first: since Connect), a wait in progress included;
  // measured here, no server asked. A training loop logs
  // `100 * TakeWaitShare().fraction()` as "input-bound %" every log
  // interval. Each call starts a new interval: one caller should take them.
  // Any thread.
  WaitShare TakeWaitShare();

 private:
  explicit Consumer(std::shared_ptr<internal::Session> session);
  // Shared with every live Batch (it outlives the Consumer while they do).
  std::shared_ptr<internal::Session> session_;
  std::atomic<CudaStreamRef> cuda_stream_;     // the delivery stream of the next batches
  std::unique_ptr<internal::WaitClock> wait_;  // wait_seconds(), TakeWaitShare()
  ConsumerPosition position_;                  // position(); Next() and Resume() update it
};

// Asks the server at `endpoint_or_name` for its stats (JSON text) without
// joining the stream. `key_file`: as ConsumerOptions::key_file (tcp:// only).
Result<std::string> QueryStats(const std::string& endpoint_or_name,
                               std::chrono::milliseconds timeout, const std::string& key_file = "");

}  // namespace batchcast
