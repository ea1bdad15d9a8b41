#include "ring_view.h"

#include <algorithm>

#include "batchcast/core/check.h"

namespace batchcast::internal {

Result<MappedRing> MappedRing::Map(const proto::Welcome& welcome) {
  // The resume lane's slots follow the window's (Note [Resume]).
  BATCHCAST_ASSIGN_OR_RETURN(RingLayout layout,
                             RingLayout::Make(welcome.fields, welcome.window,
                                              welcome.producer_batch_size, welcome.resume_slots));
  const uint32_t slots = layout.slots();
  MappedRing ring(std::move(layout));
  for (const proto::Allocation& a : welcome.allocations) {
    const size_t expected = ring.layout_.allocation_bytes(a.kind);
    if (a.bytes != expected) {
      return InternalError("ring size mismatch: server says " + std::to_string(a.bytes) +
                           " bytes, layout needs " + std::to_string(expected));
    }
    Result<std::unique_ptr<RingView>> view =
        a.kind == MemoryKind::kHost ? MapHostRing(a) : MapCudaRing(a, slots);
    if (!view.ok()) return view.status();
    ring.views_.push_back(std::move(*view));
  }
  for (const FieldSpec& f : ring.layout_.fields()) {
    const bool mapped = std::any_of(ring.views_.begin(), ring.views_.end(),
                                    [&](const auto& v) { return v->device().kind == f.memory; });
    if (!mapped) {
      return InternalError("the server announced no ring allocation for field '" + f.name + "'");
    }
  }
  return ring;
}

const RingView& MappedRing::view(MemoryKind kind) const {
  for (const std::unique_ptr<RingView>& v : views_) {
    if (v->device().kind == kind) return *v;
  }
  BATCHCAST_CHECK(false) << "no ring view for a memory kind Map() checked";
  return *views_.front();
}

Status MappedRing::OrderAfterProducer(std::span<const uint32_t> slots, CudaStreamRef stream) const {
  for (const std::unique_ptr<RingView>& v : views_) {
    BATCHCAST_RETURN_IF_ERROR(v->OrderAfterProducer(slots, stream));
  }
  return Status::Ok();
}

Status MappedRing::StreamWaitsFor(CudaStreamRef stream, CudaStreamRef after) const {
  for (const std::unique_ptr<RingView>& v : views_) {
    BATCHCAST_RETURN_IF_ERROR(v->StreamWaitsFor(stream, after));
  }
  return Status::Ok();
}

CompletionTokens MappedRing::TokensAfter(std::span<const CudaStreamRef> streams) const {
  CompletionTokens tokens;
  for (const std::unique_ptr<RingView>& v : views_) {
    for (std::unique_ptr<CompletionToken>& t : v->TokensAfter(streams))
      tokens.push_back(std::move(t));
  }
  return tokens;
}

}  // namespace batchcast::internal
