// Batch, its shared state (batch_state.h): how a BATCH reply becomes a Batch
// and how its lease and private copies end.
#include <algorithm>
#include <span>
#include <utility>

#include "batch_state.h"
#include "core/src/dlpack.h"

namespace batchcast {
namespace internal {

// The one way to make a Batch from a state (the constructor is private).
struct BatchAccess {
  static Batch Make(std::shared_ptr<BatchState> state) { return Batch(std::move(state)); }
};

namespace {

// Field `fi` of a batch of `n` samples at `data` (on `device`).
FieldView MakeFieldView(const FieldSpec& f, Device device, size_t n, const void* data) {
  FieldView v;
  v.name = f.name;
  v.dtype = f.dtype;
  v.device = device;
  v.data = data;
  v.shape.push_back(static_cast<int64_t>(n));
  v.shape.insert(v.shape.end(), f.shape.begin(), f.shape.end());
  v.bytes = f.bytes_per_sample() * n;
  return v;
}

// Checks that the segments lie in the rings and hold exactly `n` samples.
Status CheckSegments(const MappedRing& ring, const std::vector<Segment>& segments, size_t n) {
  const RingLayout& layout = ring.layout();
  uint64_t samples = 0;
  for (const Segment& s : segments) {
    if (s.slot >= layout.slots() || s.offset + uint64_t{s.count} > layout.batch_size() ||
        s.ring >= ring.ring_count()) {
      return InternalError("server sent a segment outside the ring");
    }
    samples += s.count;
  }
  if (samples != n) {
    return InternalError("server sent segments of " + std::to_string(samples) +
                         " samples for a batch of " + std::to_string(n));
  }
  return Status::Ok();
}

// Where each field's samples are: in the home ring (one segment there), or
// in private buffers the home ring's views fill, one per view, on `stream`
// (recorded in state.gathered), copying from whichever ring each segment
// lies on (Note [Placement], server/src/scheduler.h).
Result<std::vector<const uint8_t*>> PlaceFields(const MappedRing& ring, BatchState& state,
                                                CudaStreamRef stream) {
  const RingLayout& layout = ring.layout();
  const std::vector<FieldSpec>& fields = layout.fields();
  std::vector<const uint8_t*> data(fields.size(), nullptr);
  if (state.zero_copy) {
    const Segment& s = state.segments[0];
    for (size_t fi = 0; fi < fields.size(); ++fi) {
      data[fi] = ring.view(fields[fi].memory).data() + layout.SampleOffset(fi, s.slot, s.offset);
    }
    return data;
  }
  for (const std::unique_ptr<RingView>& view : ring.views()) {
    std::vector<RingCopy> copies;
    std::vector<size_t> offsets(fields.size(), 0);
    size_t bytes = 0;
    for (size_t fi = 0; fi < fields.size(); ++fi) {
      if (fields[fi].memory != view->device().kind) continue;
      offsets[fi] = bytes;
      for (const Segment& s : state.segments) {
        const RingView* from = nullptr;  // the home ring's own
        if (s.ring != ring.home()) {
          BATCHCAST_ASSIGN_OR_RETURN(from, ring.view(s.ring, fields[fi].memory));
        }
        const size_t n = fields[fi].bytes_per_sample() * s.count;
        copies.push_back(RingCopy{from, layout.SampleOffset(fi, s.slot, s.offset), bytes, n});
        bytes += n;
      }
    }
    if (bytes == 0) continue;
    BATCHCAST_ASSIGN_OR_RETURN(void* buffer, view->Gather(copies, bytes, stream));
    state.gathered.push_back({view.get(), buffer});
    for (size_t fi = 0; fi < fields.size(); ++fi) {
      if (fields[fi].memory == view->device().kind) {
        data[fi] = static_cast<const uint8_t*>(buffer) + offsets[fi];
      }
    }
  }
  return data;
}

}  // namespace

Result<Batch> MakeBatch(std::shared_ptr<Session> session, proto::Batch reply,
                        CudaStreamRef stream) {
  auto state = std::make_shared<BatchState>();
  // From here on the state ends the lease when it dies, failures included.
  state->session = session;
  state->lease_id = reply.lease_id;
  state->epoch = reply.epoch;
  state->step = reply.step;
  state->first_seq = reply.first_seq;
  state->skipped = reply.skipped;
  state->indices = std::move(reply.indices);
  state->segments = std::move(reply.segments);
  const MappedRing& ring = session->ring();
  // Zero-copy: one slot, on the home ring.
  state->zero_copy = state->segments.size() == 1 && state->segments[0].ring == ring.home();
  {
    MutexLock lock(&state->streams_mu);
    state->streams.push_back(stream);
  }
  const size_t n = state->indices.size();
  BATCHCAST_RETURN_IF_ERROR(CheckSegments(ring, state->segments, n));
  // Note [Device ring ordering], step 3: no host sync.
  BATCHCAST_RETURN_IF_ERROR(ring.OrderAfterProducer(state->segments, stream));
  BATCHCAST_ASSIGN_OR_RETURN(std::vector<const uint8_t*> data, PlaceFields(ring, *state, stream));
  const std::vector<FieldSpec>& fields = ring.layout().fields();
  for (size_t fi = 0; fi < fields.size(); ++fi) {
    state->fields.push_back(
        MakeFieldView(fields[fi], ring.view(fields[fi].memory).device(), n, data[fi]));
  }
  if (!state->zero_copy) {
    // The copy is private: the ring may move on once the copies completed
    // (Note [Device leases]; on the host they already did).
    session->ReleaseAfter(std::exchange(state->lease_id, 0),
                          ring.TokensAfter(std::span<const CudaStreamRef>(&stream, 1)));
  }
  return BatchAccess::Make(std::move(state));
}

Batch MakeEndOfEpoch(const proto::EndOfEpoch& marker) {
  auto state = std::make_shared<BatchState>();
  state->end_of_epoch = true;
  state->epoch = marker.epoch;
  state->step = marker.batches;
  state->skipped = marker.skipped;
  return BatchAccess::Make(std::move(state));
}

Status BatchState::RecordStream(CudaStreamRef stream) {
  if (!session) return Status::Ok();
  MutexLock lock(&streams_mu);
  if (std::find(streams.begin(), streams.end(), stream) != streams.end()) return Status::Ok();
  BATCHCAST_RETURN_IF_ERROR(session->ring().StreamWaitsFor(stream, streams.front()));
  streams.push_back(stream);
  return Status::Ok();
}

BatchState::~BatchState() {
  if (!session) return;
  std::vector<CudaStreamRef> used;
  {
    MutexLock lock(&streams_mu);
    used = streams;
  }
  for (const Gathered& g : gathered) g.view->FreeGather(g.data, used);
  if (lease_id != 0) session->ReleaseAfter(lease_id, session->ring().TokensAfter(used));
}

}  // namespace internal

// ---- Batch ----

bool Batch::end_of_epoch() const { return state_ && state_->end_of_epoch; }
uint32_t Batch::epoch() const { return state_ ? state_->epoch : 0; }
uint32_t Batch::step() const { return state_ ? state_->step : 0; }
size_t Batch::size() const { return state_ ? state_->indices.size() : 0; }
uint64_t Batch::first_seq() const { return state_ ? state_->first_seq : 0; }
uint64_t Batch::skipped() const { return state_ ? state_->skipped : 0; }
bool Batch::zero_copy() const { return state_ && state_->zero_copy; }
std::span<const int64_t> Batch::indices() const {
  return state_ ? std::span<const int64_t>(state_->indices) : std::span<const int64_t>();
}
std::vector<uint32_t> Batch::producer_epochs() const {
  std::vector<uint32_t> out;
  if (state_) {
    for (const Segment& s : state_->segments) out.push_back(s.producer_epoch);
  }
  return out;
}

Result<FieldView> Batch::field(std::string_view name) const {
  if (state_) {
    for (const FieldView& f : state_->fields) {
      if (f.name == name) return f;
    }
  }
  return NotFoundError("no field '" + std::string(name) + "' in this batch" +
                       (end_of_epoch() ? " (it is an end-of-epoch marker)" : ""));
}

std::vector<std::string> Batch::field_names() const {
  std::vector<std::string> out;
  if (state_) {
    for (const FieldView& f : state_->fields) out.push_back(f.name);
  }
  return out;
}

Status Batch::RecordStream(CudaStreamRef cuda_stream) const {
  return state_ ? state_->RecordStream(cuda_stream) : Status::Ok();
}

// The tensor holds the state, and so the lease (Note [Leases]), until its
// deleter runs.
Result<DLManagedTensor*> Batch::ToDLPack(std::string_view name) const {
  BATCHCAST_ASSIGN_OR_RETURN(FieldView view, field(name));
  return MakeDLManagedTensor(const_cast<void*>(view.data), view.shape, view.dtype, view.device,
                             state_);
}

}  // namespace batchcast
