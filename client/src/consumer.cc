// Consumer: the public handle over a session (session.h); a batch reply
// becomes a Batch in batch.cc.
#include "batchcast/client/consumer.h"

#include "batch_state.h"
#include "core/src/catch_all.h"
#include "session.h"
#include "wait_clock.h"

namespace batchcast {

Consumer::Consumer(std::shared_ptr<internal::Session> session)
    : session_(std::move(session)),
      wait_(std::make_unique<internal::WaitClock>(std::chrono::steady_clock::now())) {}

Consumer::~Consumer() {
  if (session_) session_->Detach();
}

// The public calls run inside CatchAll (core/src/catch_all.h): whatever the
// code below them throws reaches the caller as a Status.
Result<std::unique_ptr<Consumer>> Consumer::Connect(ConsumerOptions options) {
  return CatchAll("Consumer::Connect", [&]() -> Result<std::unique_ptr<Consumer>> {
    BATCHCAST_ASSIGN_OR_RETURN(std::shared_ptr<internal::Session> session,
                               internal::Session::Open(options));
    std::unique_ptr<Consumer> consumer(new Consumer(std::move(session)));
    consumer->cuda_stream_.store(options.cuda_stream);
    // Where it starts (Note [Resume]): the saved place, or its join point.
    const internal::Session& s = *consumer->session_;
    consumer->position_ = options.resume_from.value_or(ConsumerPosition{});
    ConsumerPosition& p = consumer->position_;
    p.stream = s.welcome().stream;
    p.batch_size = options.batch_size;
    if (const std::optional<GroupMembership>& g = s.group()) {
      p.world_size = g->world_size;
      p.rank = g->rank;
    }
    if (!options.resume_from) p.epoch_start = p.next_seq = s.welcome().start;
    return consumer;
  });
}

Result<Batch> Consumer::Next() {
  return CatchAll("Consumer::Next", [this]() -> Result<Batch> {
    wait_->Begin(std::chrono::steady_clock::now());
    Result<proto::Message> waited = session_->NextReply();
    wait_->End(std::chrono::steady_clock::now());
    BATCHCAST_ASSIGN_OR_RETURN(proto::Message reply, std::move(waited));
    if (auto* e = std::get_if<proto::Error>(&reply)) return proto::ToStatus(*e);
    // Note [Resume]: the place after what the user now gets.
    if (auto* eoe = std::get_if<proto::EndOfEpoch>(&reply)) {
      position_.epoch = eoe->epoch + 1;
      position_.step = 0;
      position_.epoch_start = eoe->next_epoch_start;
      position_.next_seq = eoe->next_seq;
      position_.skipped = eoe->skipped;
      return internal::MakeEndOfEpoch(*eoe);
    }
    const proto::Batch& b = std::get<proto::Batch>(reply);
    position_.epoch = b.epoch;
    position_.step = b.step + 1;
    position_.epoch_start = b.epoch_start;
    position_.next_seq = b.next_seq;
    position_.skipped = b.skipped;
    return internal::MakeBatch(session_, std::move(std::get<proto::Batch>(reply)),
                               cuda_stream_.load());
  });
}

ConsumerPosition Consumer::position() const { return position_; }

Status Consumer::Resume(const ConsumerPosition& place) {
  return CatchAll("Consumer::Resume", [&]() -> Status {
    BATCHCAST_RETURN_IF_ERROR(session_->Resume(place));
    const ConsumerPosition now = position_;
    position_ = place;
    position_.stream = now.stream;
    position_.batch_size = now.batch_size;
    position_.world_size = now.world_size;
    position_.rank = now.rank;
    return Status::Ok();
  });
}

double Consumer::wait_seconds() const { return wait_->Total(std::chrono::steady_clock::now()); }
WaitShare Consumer::TakeWaitShare() { return wait_->Take(std::chrono::steady_clock::now()); }
void Consumer::set_cuda_stream(CudaStreamRef cuda_stream) { cuda_stream_.store(cuda_stream); }
uint64_t Consumer::batches_per_epoch() const { return session_->welcome().batches_per_epoch; }
uint64_t Consumer::epoch_len() const { return session_->welcome().epoch_len; }
uint64_t Consumer::consumer_id() const { return session_->welcome().consumer_id; }
uint32_t Consumer::producer_batch_size() const { return session_->welcome().producer_batch_size; }
uint32_t Consumer::window() const { return session_->welcome().window; }
const std::string& Consumer::server_name() const { return session_->welcome().server_name; }
uint32_t Consumer::home_ring() const { return session_->welcome().home_ring; }
const std::vector<FieldSpec>& Consumer::fields() const { return session_->welcome().fields; }
Result<std::string> Consumer::Stats() {
  return CatchAll("Consumer::Stats", [this] { return session_->Stats(); });
}
const std::optional<GroupMembership>& Consumer::group() const { return session_->group(); }

Device Consumer::device() const {
  // The home ring's device: every field of every batch is there.
  const proto::Welcome& w = session_->welcome();
  for (const proto::Allocation& a : w.rings.at(w.home_ring).allocations) {
    if (a.kind == MemoryKind::kCuda) return Device::Cuda(a.device_index);
  }
  return Device::Cpu();
}

}  // namespace batchcast
