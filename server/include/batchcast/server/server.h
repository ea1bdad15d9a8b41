// Server: the batchcast producer, usable in-process.
//
// A Server owns the shared ring (host shared memory or CUDA IPC memory), a
// control thread that serves consumers over a ZeroMQ ROUTER socket, and either
// a pipeline thread that fills the ring from a Source, or nothing, when the
// caller produces batches itself through BeginBatch/CommitBatch (the Python
// `batchcast.Producer` does that).
//
// Semantics (docs/semantics.md): samples get consecutive seq numbers; a slot is
// rewritten only when no attached consumer needs any sample in it and no lease
// pins it ("Leases"); consumers may lag by at most `window` slots; lag
// policies block, skip or evict.
//
// Thread-safety: all methods are thread-safe. Destroying the Server stops it.
// The server runs a control thread (the socket, heartbeats, the time-based
// rules) and a producer thread per ring (the source's batches); the source
// may add threads of its own. Their names start with "bc-".
//
// A GPU server in a process that runs CUDA work of its own (a C++ trainer):
// give the process 32 CUDA hardware queues, CUDA_DEVICE_MAX_CONNECTIONS=32 in
// its environment before its first CUDA call, or the server's decode waits
// behind the trainer's kernels, since its many streams share the process's
// hardware queues (batchcast.Server does it itself). A server in a process
// of its own is best with CUDA's default 8. The server logs the number it
// sees.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"
#include "batchcast/server/server_options.h"
#include "batchcast/sources/source.h"

namespace batchcast {

class Server {
 public:
  // Starts a server whose source is built from options.source (MakeSource).
  // With several GPUs (options.gpus, all_gpus: --device cuda:0,1 or
  // cuda:all) a ring, a source and a producer per GPU, each consumer served
  // from the ring of its own GPU (docs/semantics.md, "Several GPUs");
  // InvalidArgument for cuda:all without a GPU.
  static Result<std::unique_ptr<Server>> Start(ServerOptions options);
  // Starts a server over `source` (one device).
  static Result<std::unique_ptr<Server>> Start(ServerOptions options,
                                               std::unique_ptr<Source> source);
  // Starts a server with no pipeline: the caller produces batches of the given
  // fields with BeginBatch/CommitBatch; `epoch_len` samples make an epoch
  // (every producer epoch must have exactly that many). One device.
  static Result<std::unique_ptr<Server>> StartExternal(ServerOptions options,
                                                       std::vector<FieldSpec> fields,
                                                       uint64_t epoch_len);

  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& endpoint() const;
  const ServerOptions& options() const;
  uint64_t epoch_len() const;

  // The stats as JSON text (the same as `batchcast-server stat NAME --json`).
  std::string StatsJson() const;

  // External production (servers made by StartExternal; the others answer
  // InvalidArgument). BeginBatch blocks until a slot may be written (window,
  // leases, lag policy), until `timeout`, or until Stop(). `count` samples
  // (1..batch_size) with dataset `indices` of producer epoch `epoch`; batches of
  // one epoch must add up to epoch_len before the next epoch starts.
  // Errors: DeadlineExceeded, Cancelled (stopped), InvalidArgument.
  // The returned view's `indices` are the server's copy of `indices` (valid
  // until CommitBatch); its `stream` is unset: CommitBatch takes the stream
  // the writes were queued on.
  Result<SlotView> BeginBatch(uint32_t epoch, std::span<const int64_t> indices,
                              std::chrono::milliseconds timeout);
  // Publishes a slot filled after BeginBatch (InvalidArgument if it is not
  // being written, e.g. committed twice). With a device ring, the slot's
  // interprocess event is first recorded on `cuda_stream` (a cudaStream_t of
  // the ring's device; nullptr = its legacy default stream): the writes to the
  // slot must have been queued on that stream (or be complete) by then.
  Status CommitBatch(const SlotView& slot, CudaStreamRef cuda_stream = {});
  // Declares that no more batches will come (consumers see the stream end).
  void EndStream();

  // Blocks until the server finished (stream ended and all consumers left, a
  // producer error, or Stop()) or `timeout` passed (returns false then).
  bool WaitFor(std::chrono::milliseconds timeout);
  // The final status: OK, or the error that stopped the producer.
  Status status() const;
  // Stops everything; consumers get a clear "server stopped" error. Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  // A ring on each of `devices` filled by sources[i].
  static Result<std::unique_ptr<Server>> StartRings(ServerOptions options,
                                                    const std::vector<int>& devices,
                                                    std::vector<std::unique_ptr<Source>> sources);
  std::unique_ptr<Impl> impl_;
};

}  // namespace batchcast
