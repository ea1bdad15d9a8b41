// Server: the batchcast producer, usable in-process.
//
// A Server owns the shared ring (host shared memory or CUDA IPC memory), a
// control thread that serves consumers over a ZeroMQ ROUTER socket, and either
// a pipeline thread that fills the ring from a Source, or nothing, when the
// caller produces batches itself through BeginBatch/CommitBatch (the Python
// `batchcast.Producer` does that).
//
// Semantics (DESIGN.md): samples get consecutive seq numbers; a slot is
// rewritten only when no attached consumer needs any sample in it and no lease
// pins it (Note [Leases] in server/src/scheduler.h); consumers may lag by at
// most `window` slots; lag policies block, skip or evict.
//
// Thread-safety: all methods are thread-safe. Destroying the Server stops it.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"
#include "batchcast/server/server_options.h"
#include "batchcast/server/source.h"

namespace batchcast {

// A slot handed to an external producer by BeginBatch.
struct WriteSlot {
  uint32_t slot = 0;
  uint64_t first_seq = 0;
  uint32_t count = 0;
  std::vector<uint8_t*> field_data;  // sample 0 of the slot, per field
  std::vector<size_t> field_bytes;   // bytes per sample, per field
  Device device;                     // {kCuda, N}: field_data are device pointers
};

class Server {
 public:
  // Starts a server whose source is built from options (synthetic or data).
  static Result<std::unique_ptr<Server>> Start(ServerOptions options);
  // Starts a server over `source`.
  static Result<std::unique_ptr<Server>> Start(ServerOptions options,
                                               std::unique_ptr<Source> source);
  // Starts a server with no pipeline: the caller produces batches of the given
  // fields with BeginBatch/CommitBatch; `epoch_len` samples make an epoch
  // (every producer epoch must have exactly that many).
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

  // External production. BeginBatch blocks until a slot may be written (window,
  // leases, lag policy), until `timeout`, or until Stop(). `count` samples
  // (1..batch_size) with dataset `indices` of producer epoch `epoch`; batches of
  // one epoch must add up to epoch_len before the next epoch starts.
  // Errors: DeadlineExceeded, Cancelled (stopped), InvalidArgument.
  Result<WriteSlot> BeginBatch(uint32_t epoch, std::span<const int64_t> indices,
                               std::chrono::milliseconds timeout);
  // Publishes a slot filled after BeginBatch. With a device ring, the slot's
  // interprocess event is first recorded on `cuda_stream` (a cudaStream_t of
  // the ring's device; nullptr = its legacy default stream): the writes to the
  // slot must have been queued on that stream (or be complete) by then.
  Status CommitBatch(const WriteSlot& slot, void* cuda_stream = nullptr);
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
  std::unique_ptr<Impl> impl_;
};

// Builds the source named by options: SyntheticSource when options.synthetic > 0,
// else the image dataset at options.data.
Result<std::unique_ptr<Source>> MakeSource(const ServerOptions& options);

}  // namespace batchcast
