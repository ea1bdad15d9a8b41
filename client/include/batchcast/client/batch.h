// Batch: one consumer batch, or the end-of-epoch marker.
//
// A Batch views `size()` consecutive samples of the producer's stream. When
// they lie in one ring slot the field data points straight into the shared
// ring (zero copy) and the Batch holds a *lease* on that slot: the server will
// not overwrite it until the lease ends (docs/semantics.md, "Leases").
// When they span slots, the client gathered them into a private buffer and
// the lease already ended.
//
// The lease ends when the Batch and every DLPack tensor made from it are gone.
// Batch is move-only; destroying it from any thread is safe.
//
// CUDA rings (server --device cuda:N): field data are device pointers of the
// producer's device (FieldView::device = {kCuda, N}). The data is ready in the
// order of the consumer's CUDA stream (ConsumerOptions::cuda_stream): work
// queued on that stream after Next() returned sees the batch; the host never
// waited for it. When the batch dies, the lease ends only after the work
// queued on that stream (and on streams added with RecordStream) so far has
// completed, so kernels still reading the batch are never raced by the
// producer. A batch that spans slots was gathered by an asynchronous copy on
// that stream into a private device buffer, freed in stream order.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "batchcast/core/cuda_stream.h"
#include "batchcast/core/dtype.h"
#include "batchcast/core/field_spec.h"
#include "batchcast/core/status.h"

struct DLManagedTensor;  // <dlpack/dlpack.h>

namespace batchcast {

namespace internal {
struct BatchState;
struct BatchAccess;
}  // namespace internal

// A field of a batch: a dense tensor of shape [size(), *per-sample shape].
struct FieldView {
  std::string name;
  const void* data = nullptr;
  std::vector<int64_t> shape;
  DType dtype = DType::kUInt8;
  Device device;
  size_t bytes = 0;
};

class Batch {
 public:
  Batch() = default;  // an empty batch (size 0, not end of epoch)
  Batch(Batch&&) noexcept = default;
  Batch& operator=(Batch&&) noexcept = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch() = default;

  // True for the marker that ends the consumer's epoch (no data then).
  bool end_of_epoch() const;
  // The consumer's epoch (for the marker: the epoch that ended).
  uint32_t epoch() const;
  // Batch number inside the epoch (for the marker: the batches it had).
  uint32_t step() const;
  // Samples in the batch.
  size_t size() const;
  // Seq number of the first sample in the producer's stream. Seqs of dropped
  // files are holes (no sample), so a batch may span more seqs than size().
  uint64_t first_seq() const;
  // Samples this consumer skipped so far (lag_policy skip).
  uint64_t skipped() const;
  // True when the data is a view of the shared ring (one segment).
  bool zero_copy() const;
  // The producer epoch of each run of samples (usually one value).
  std::vector<uint32_t> producer_epochs() const;
  // Dataset index of each sample.
  std::span<const int64_t> indices() const;

  // NotFound for an unknown field name.
  Result<FieldView> field(std::string_view name) const;
  std::vector<std::string> field_names() const;

  // A standard DLPack tensor viewing field `name`; the caller owns it and must
  // call its deleter exactly once. The lease lives until then.
  Result<DLManagedTensor*> ToDLPack(std::string_view name) const;

  // CUDA rings: makes `cuda_stream` (a cudaStream_t of the producer's device)
  // wait until the batch's data is ready, and makes the lease's end wait for
  // the work queued on it too. For batches used on more than the consumer's
  // stream. No-op for host rings.
  Status RecordStream(CudaStreamRef cuda_stream) const;

 private:
  friend struct internal::BatchAccess;
  explicit Batch(std::shared_ptr<internal::BatchState> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::BatchState> state_;
};

}  // namespace batchcast
