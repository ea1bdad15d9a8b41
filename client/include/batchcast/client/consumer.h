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
// Semantics (DESIGN.md "Consumer semantics"): each consumer counts its own
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

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "batchcast/client/batch.h"
#include "batchcast/core/field_spec.h"
#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/join_policy.h"
#include "batchcast/core/status.h"

namespace batchcast {

namespace internal {
class Session;
}  // namespace internal

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
};

class Consumer {
 public:
  // Connects and joins the stream. NotFound when no server of that name runs,
  // Unavailable when it does not answer, InvalidArgument for options the server
  // refuses (with its reason), and for a malformed `device`.
  static Result<std::unique_ptr<Consumer>> Connect(ConsumerOptions options);

  ~Consumer();  // leaves the stream (BYE)
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // The next batch, or the end-of-epoch marker. Errors: Unavailable (server
  // gone or stopped), OutOfRange (the stream ended), DeadlineExceeded (timeout),
  // ResourceExhausted (evicted, or too many unreleased batches).
  Result<Batch> Next();
  // Changes the delivery stream of the following batches (see
  // ConsumerOptions::cuda_stream), e.g. to the framework's current stream.
  void set_cuda_stream(CudaStreamRef cuda_stream);

  // Batches in one epoch, as announced (floor or ceil of epoch_len /
  // batch_size). Files the server drops while decoding (on_error=skip) make
  // epochs shorter: at most one batch fewer per dropped file in that epoch.
  uint64_t batches_per_epoch() const;
  uint64_t epoch_len() const;
  uint64_t consumer_id() const;
  uint32_t producer_batch_size() const;
  uint32_t window() const;
  // Where the ring (and so every zero-copy field) lives: {kHost, -1} or {kCuda, N}.
  Device device() const;
  const std::vector<FieldSpec>& fields() const;
  // The server's stats as JSON text.
  Result<std::string> Stats();

 private:
  explicit Consumer(std::shared_ptr<internal::Session> session);
  // Shared with every live Batch (it outlives the Consumer while they do).
  std::shared_ptr<internal::Session> session_;
  std::atomic<CudaStreamRef> cuda_stream_;  // the delivery stream of the next batches
};

// Asks the server at `endpoint_or_name` for its stats (JSON text) without
// joining the stream.
Result<std::string> QueryStats(const std::string& endpoint_or_name,
                               std::chrono::milliseconds timeout);

}  // namespace batchcast
