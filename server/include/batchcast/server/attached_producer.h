// AttachedProducer: decodes one ring of a running server in this process.
//
// A server with a ring per GPU decodes ring r on GPU r in its own process.
// Without MPS the GPU time-slices that process's CUDA context against the
// trainer's on GPU r. An AttachedProducer made in the trainer's process
// takes the decode of ring r over: it builds the server's source for the
// ring's device (from the server's options: the same dataset, transforms
// and seed, so every sample is what the server would have written), maps the
// ring's memory and fills each slot the server grants to ring r, on a stream
// of its own, in the trainer's context. The stream, its order and what each
// consumer gets do not change (docs/semantics.md, "Attached producers").
// Python: batchcast.Loader(..., produce=True) makes one for the Loader's ring.
//
// The server decodes the ring again, from the batch in hand, when the
// producer stops (Stop, the destructor), fails, or its process dies; no
// sample is lost or repeated (Note [Attached producers],
// server/src/attach_point.h).
//
// Requirements: the server runs on this node, by name (its attach sockets
// live in the runtime directory) and accepts attached producers (--attach,
// the default); its dataset is an image folder or synthetic data (not tar
// shards); a GPU ring decodes on its GPU (nvJPEG). A process holds a ring's
// device memory through CUDA IPC, like a consumer.
//
// Thread-safety: all methods are thread-safe. The producer runs a thread of
// its own ("bc-attached"), with the ring's device current, plus the source's
// threads. It reads the dataset as the server scanned it (a listing the
// server saves to its runtime directory at the first attach), without
// listing the folder or reading a header again.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "batchcast/core/status.h"

namespace batchcast {

class AttachedProducer {
 public:
  // Attaches to ring `ring` (an index into the server's rings: WELCOME's
  // home ring for a consumer) of the server named `server_name`. Returns
  // once the source is built and the server may hand it batches. Errors:
  // NotFound (no such server or ring, or --no-attach), ResourceExhausted
  // (the ring has a producer already), InvalidArgument (tar shards, a ring
  // filled on the CPU, a dataset that differs from the server's), the
  // source's errors (no nvJPEG, ...), DeadlineExceeded (no answer within
  // `timeout`).
  static Result<std::unique_ptr<AttachedProducer>> Start(
      std::string_view server_name, uint32_t ring,
      std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Stop().
  ~AttachedProducer();
  AttachedProducer(const AttachedProducer&) = delete;
  AttachedProducer& operator=(const AttachedProducer&) = delete;

  // Finishes the batch in hand, waits for its GPU work, detaches (the server
  // decodes the ring again; another producer may attach to it once this
  // returns) and joins the thread. Idempotent.
  void Stop();
  // Whether it still decodes the ring (false after Stop, a failure, or when
  // the server stopped or detached it).
  bool running() const;
  // OK while it runs and after Stop; otherwise why it ended: the source's
  // error, Unavailable when the server stopped or detached it.
  Status status() const;
  // Batches and samples it wrote.
  uint64_t batches() const;
  uint64_t samples() const;
  // The ring's device (-1: a host ring).
  int device() const;

  struct Impl;

 private:
  explicit AttachedProducer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace batchcast
