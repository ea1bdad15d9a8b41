#include "ring_view.h"

#include <algorithm>
#include <set>

#include "batchcast/core/check.h"

namespace batchcast::internal {

Result<MappedRing> MappedRing::Map(const proto::Welcome& welcome) {
  // The resume lane's slots follow the window's (Note [Resume]).
  BATCHCAST_ASSIGN_OR_RETURN(RingLayout layout,
                             RingLayout::Make(welcome.fields, welcome.window,
                                              welcome.producer_batch_size, welcome.resume_slots));
  if (welcome.rings.empty() || welcome.home_ring >= welcome.rings.size()) {
    return InternalError("the server announced no ring for this consumer");
  }
  const uint32_t slots = layout.slots();
  MappedRing ring(std::move(layout), slots);
  ring.home_ = welcome.home_ring;
  for (const proto::RingInfo& r : welcome.rings) ring.allocations_.push_back(r.allocations);
  BATCHCAST_ASSIGN_OR_RETURN(ring.views_, ring.MapRing(ring.allocations_[ring.home_]));
  ring.peers_ = std::make_unique<Peers>();
  {
    MutexLock lock(&ring.peers_->mu);
    ring.peers_->views.resize(ring.allocations_.size());
  }
  return ring;
}

Result<MappedRing::Views> MappedRing::MapRing(const std::vector<proto::Allocation>& allocations,
                                              int open_in) const {
  Views views;
  for (const proto::Allocation& a : allocations) {
    const size_t expected = layout_.allocation_bytes(a.kind);
    if (a.bytes != expected) {
      return InternalError("ring size mismatch: server says " + std::to_string(a.bytes) +
                           " bytes, layout needs " + std::to_string(expected));
    }
    Result<std::unique_ptr<RingView>> view =
        a.kind == MemoryKind::kHost ? MapHostRing(a) : MapCudaRing(a, slots_, open_in);
    if (!view.ok()) return view.status();
    views.push_back(std::move(*view));
  }
  for (const FieldSpec& f : layout_.fields()) {
    if (Find(views, f.memory) == nullptr) {
      return InternalError("the server announced no ring allocation for field '" + f.name + "'");
    }
  }
  return views;
}

const RingView* MappedRing::Find(const Views& views, MemoryKind kind) {
  for (const std::unique_ptr<RingView>& v : views) {
    if (v->device().kind == kind) return v.get();
  }
  return nullptr;
}

Result<const RingView*> MappedRing::view(uint32_t ring, MemoryKind kind) const {
  BATCHCAST_CHECK(ring < ring_count()) << ring << " of " << ring_count() << " rings";
  const RingView* found = nullptr;
  if (ring == home_) {
    found = Find(views_, kind);
  } else {
    MutexLock lock(&peers_->mu);
    Views& views = peers_->views[ring];
    if (views.empty()) {
      // Note [Peer rings]: in the home GPU's context where peer access allows.
      const RingView* home_cuda = Find(views_, MemoryKind::kCuda);
      Result<Views> mapped =
          MapRing(allocations_[ring], home_cuda != nullptr ? home_cuda->device().index : -1);
      if (!mapped.ok()) {
        return mapped.status().WithContext("cannot map ring " + std::to_string(ring) +
                                           " of the server (a batch placed there)");
      }
      views = std::move(*mapped);
    }
    found = Find(views, kind);
  }
  if (found == nullptr) return InternalError("no ring view for a field's memory kind");
  return found;
}

Status MappedRing::OrderAfterProducer(std::span<const Segment> segments,
                                      CudaStreamRef stream) const {
  std::set<std::pair<uint32_t, uint32_t>> slots;  // (ring, slot)
  for (const Segment& s : segments) slots.emplace(s.ring, s.slot);
  const RingView* home = Find(views_, MemoryKind::kCuda);
  if (home == nullptr) return Status::Ok();  // host memory: nothing to order
  for (const auto& [ring, slot] : slots) {
    BATCHCAST_ASSIGN_OR_RETURN(const RingView* v, view(ring, MemoryKind::kCuda));
    const uint32_t one[] = {slot};
    BATCHCAST_RETURN_IF_ERROR(v->OrderAfterProducer(one, stream, home->device()));
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
