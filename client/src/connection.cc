#include "connection.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "batchcast/core/logging.h"
#include "batchcast/core/runtime_dir.h"

namespace batchcast {

using SteadyClock = std::chrono::steady_clock;

namespace {
std::string DefaultConsumerName() {
  std::string exe = "consumer";
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) exe = path.filename().string();
  return exe + ":" + std::to_string(getpid());
}

// The longest a released lease waits for a NEXT to carry it.
constexpr std::chrono::milliseconds kReleaseFlush(10);

int64_t MsSince(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t).count();
}
}  // namespace

internal::BatchState::~BatchState() {
  if (connection && lease_id != 0) connection->Release(lease_id);
}

Connection::Connection(const ConsumerOptions& options)
    : options_(options), socket_(context_, zmq::socket_type::dealer) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  socket_.set(zmq::sockopt::linger, 200);
  socket_.set(zmq::sockopt::rcvhwm, 100000);
  socket_.set(zmq::sockopt::sndhwm, 100000);
  socket_.set(zmq::sockopt::maxmsgsize, int64_t{64} << 20);
}

Connection::~Connection() {
  {
    std::lock_guard lock(hb_mu_);
    hb_stop_ = true;
  }
  hb_cv_.notify_all();
  if (hb_thread_.joinable()) hb_thread_.join();
  {
    std::lock_guard lock(sock_mu_);
    FlushReleasesLocked();
    if (!detached_ && fatal_.ok()) SendLocked(proto::Bye{});
  }
  socket_.close();
  if (wake_fd_ >= 0) close(wake_fd_);
}

Result<std::shared_ptr<Connection>> Connection::Open(const ConsumerOptions& options) {
  if (options.batch_size == 0) return InvalidArgumentError("batch_size must be at least 1");
  if (options.prefetch == 0) return InvalidArgumentError("prefetch must be at least 1");
  std::shared_ptr<Connection> c(new Connection(options));
  if (c->wake_fd_ < 0) return InternalError("eventfd failed");
  BATCHCAST_ASSIGN_OR_RETURN(c->endpoint_, ResolveEndpoint(options.endpoint));
  if (c->endpoint_.starts_with("ipc://")) {
    const std::string path = c->endpoint_.substr(6);
    if (!std::filesystem::exists(path)) {
      return NotFoundError("no batchcast server at " + c->endpoint_ +
                           " (no such socket); start one with `batchcast-server serve ... --name " +
                           std::string(options.endpoint) + "`");
    }
  }
  if (c->options_.name.empty()) c->options_.name = DefaultConsumerName();
  try {
    c->socket_.connect(c->endpoint_);
  } catch (const zmq::error_t& e) {
    return UnavailableError("cannot connect to " + c->endpoint_ + ": " + e.what());
  }
  BATCHCAST_RETURN_IF_ERROR(c->Handshake());
  BATCHCAST_RETURN_IF_ERROR(c->MapRing());
  Connection* raw = c.get();
  c->hb_thread_ = std::thread([raw] { raw->HeartbeatLoop(); });
  return c;
}

void Connection::SendLocked(const proto::Message& m) {
  buffer_.clear();
  proto::EncodeTo(m, buffer_);
  try {
    if (!socket_.send(zmq::buffer(buffer_), zmq::send_flags::dontwait)) {
      if (fatal_.ok()) fatal_ = UnavailableError("server at " + endpoint_ + " is not reading");
    }
    last_sent_ = SteadyClock::now();
  } catch (const zmq::error_t& e) {
    if (fatal_.ok()) fatal_ = UnavailableError(std::string("send failed: ") + e.what());
  }
}

Status Connection::Handshake() {
  proto::Hello h;
  h.name = options_.name;
  h.pid = static_cast<uint32_t>(getpid());
  h.batch_size = options_.batch_size;
  h.drop_last = options_.drop_last;
  h.join = options_.join;
  h.prefetch = options_.prefetch;
  std::lock_guard lock(sock_mu_);
  SendLocked(h);
  const auto deadline = SteadyClock::now() + options_.connect_timeout;
  while (SteadyClock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::max(left, std::chrono::milliseconds(1)));
    zmq::message_t msg;
    if (!socket_.recv(msg, zmq::recv_flags::dontwait)) continue;
    Result<proto::Message> m =
        proto::Decode({static_cast<const uint8_t*>(msg.data()), msg.size()});
    if (!m.ok()) return m.status().WithContext("bad reply from " + endpoint_);
    if (auto* w = std::get_if<proto::Welcome>(&*m)) {
      welcome_ = std::move(*w);
      last_heard_ = SteadyClock::now();
      return Status::Ok();
    }
    if (auto* e = std::get_if<proto::Error>(&*m)) {
      return proto::ToStatus(*e).WithContext("server refused the connection");
    }
    // A heartbeat or stray message before WELCOME: keep waiting.
  }
  return UnavailableError("server at " + endpoint_ + " did not answer within " +
                          std::to_string(options_.connect_timeout.count()) + " ms");
}

Status Connection::MapRing() {
  BATCHCAST_ASSIGN_OR_RETURN(
      RingLayout layout,
      RingLayout::Make(welcome_.fields, welcome_.window, welcome_.producer_batch_size));
  for (const proto::Allocation& a : welcome_.allocations) {
    if (a.bytes != layout.allocation_bytes(a.kind)) {
      return InternalError("ring size mismatch: server says " + std::to_string(a.bytes) +
                           " bytes, layout needs " + std::to_string(layout.allocation_bytes(a.kind)));
    }
    if (a.kind == MemoryKind::kHost) {
      BATCHCAST_ASSIGN_OR_RETURN(host_ring_, HostSharedMemory::Open(a.shm_name));
      if (host_ring_->size() < a.bytes) return InternalError("shared ring smaller than announced");
    } else {
      return InvalidArgumentError("the server's ring is in CUDA memory, which this build of the "
                                  "client cannot map");
    }
  }
  layout_.emplace(std::move(layout));
  server_pid_visible_ = endpoint_.starts_with("ipc://") &&
                        ProcessAlive(static_cast<int>(welcome_.server_pid));
  return Status::Ok();
}

void Connection::Release(uint64_t lease_id) {
  {
    std::lock_guard lock(release_mu_);
    releases_.push_back(lease_id);
    held_.erase(lease_id);
  }
  // The next NEXT carries it; if none comes, the heartbeat thread sends it
  // within kReleaseFlush.
}

void Connection::FlushReleasesLocked() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(release_mu_);
    ids.swap(releases_);
  }
  if (!ids.empty() && fatal_.ok()) SendLocked(proto::Release{std::move(ids)});
}

void Connection::HandleLocked(proto::Message m) {
  last_heard_ = SteadyClock::now();
  if (std::holds_alternative<proto::Heartbeat>(m)) return;
  if (auto* s = std::get_if<proto::StatsReply>(&m)) {
    stats_reply_ = std::move(s->json);
    return;
  }
  if (auto* e = std::get_if<proto::Error>(&m); e != nullptr && e->request_id == 0) {
    if (fatal_.ok()) fatal_ = proto::ToStatus(*e);
    return;
  }
  if (std::holds_alternative<proto::Batch>(m) || std::holds_alternative<proto::EndOfEpoch>(m) ||
      std::holds_alternative<proto::Error>(m)) {
    if (in_flight_ > 0) --in_flight_;
    if (detached_) {
      if (auto* b = std::get_if<proto::Batch>(&m); b != nullptr && b->lease_id != 0) {
        std::lock_guard lock(release_mu_);
        releases_.push_back(b->lease_id);
      }
      return;
    }
    replies_.push_back(std::move(m));
    return;
  }
  BC_LOG_WARN("ignored an unexpected {} from the server", proto::MessageName(m));
}

void Connection::DrainLocked() {
  while (true) {
    zmq::message_t msg;
    zmq::recv_result_t r;
    try {
      r = socket_.recv(msg, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t& e) {
      if (fatal_.ok()) fatal_ = UnavailableError(std::string("receive failed: ") + e.what());
      return;
    }
    if (!r) return;
    Result<proto::Message> m =
        proto::Decode({static_cast<const uint8_t*>(msg.data()), msg.size()});
    if (!m.ok()) {
      if (fatal_.ok()) fatal_ = m.status().WithContext("bad message from the server");
      return;
    }
    HandleLocked(std::move(*m));
  }
}

// Heartbeat if due, releases, and the server's liveness (heartbeats and pid).
void Connection::KeepAliveLocked() {
  FlushReleasesLocked();
  const auto now = SteadyClock::now();
  const auto interval = std::chrono::milliseconds(welcome_.heartbeat_interval_ms);
  if (now - last_sent_ >= interval) SendLocked(proto::Heartbeat{});
  if (!fatal_.ok()) return;
  if (server_pid_visible_ && now - last_pid_check_ >= std::chrono::milliseconds(100)) {
    last_pid_check_ = now;
    if (!ProcessAlive(static_cast<int>(welcome_.server_pid))) {
      fatal_ = UnavailableError("server '" + welcome_.server_name + "' (pid " +
                                std::to_string(welcome_.server_pid) + ") has exited");
      return;
    }
  }
  if (MsSince(last_heard_) > welcome_.heartbeat_timeout_ms) {
    fatal_ = UnavailableError("server '" + welcome_.server_name + "' stopped answering: nothing "
                              "heard for " + std::to_string(MsSince(last_heard_)) + " ms");
  }
}

void Connection::TopUpLocked() {
  while (!detached_ && fatal_.ok() && in_flight_ + replies_.size() < options_.prefetch) {
    proto::Next next{next_request_id_++, {}};
    {
      std::lock_guard lock(release_mu_);
      next.releases.swap(releases_);
    }
    SendLocked(next);
    ++in_flight_;
  }
}

Result<Batch> Connection::Next(const std::shared_ptr<Connection>& self) {
  std::optional<proto::Message> reply;
  {
    std::lock_guard lock(sock_mu_);
    if (detached_) return CancelledError("the consumer was closed");
    const auto start = SteadyClock::now();
    DrainLocked();
    while (replies_.empty() && fatal_.ok()) {
      TopUpLocked();
      KeepAliveLocked();
      if (!fatal_.ok()) break;
      auto slice = std::chrono::milliseconds(welcome_.heartbeat_interval_ms / 2 + 1);
      if (options_.timeout.count() > 0) {
        const auto left = options_.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 SteadyClock::now() - start);
        if (left.count() <= 0) {
          return DeadlineExceededError(
              "no batch from server '" + welcome_.server_name + "' within " +
              std::to_string(options_.timeout.count()) +
              " ms (the producer may be slow or paced by a slower consumer; see "
              "`batchcast-server stat " + welcome_.server_name + "`)");
        }
        slice = std::min(slice, left);
      }
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                                 {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, slice);
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) fatal_ = UnavailableError(std::string("poll failed: ") + e.what());
      }
      if (items[1].revents & ZMQ_POLLIN) {
        uint64_t v;
        [[maybe_unused]] ssize_t n = read(wake_fd_, &v, sizeof(v));
      }
      DrainLocked();
    }
    if (replies_.empty()) {
      // Fatal: the server is gone, stopped, or evicted us.
      return fatal_;
    }
    reply = std::move(replies_.front());
    replies_.pop_front();
    TopUpLocked();
    FlushReleasesLocked();
  }
  if (auto* e = std::get_if<proto::Error>(&*reply)) return proto::ToStatus(*e);
  if (auto* eoe = std::get_if<proto::EndOfEpoch>(&*reply)) {
    auto state = std::make_shared<internal::BatchState>();
    state->end_of_epoch = true;
    state->epoch = eoe->epoch;
    state->step = eoe->batches;
    state->skipped = eoe->skipped;
    return Batch(std::move(state));
  }
  return MakeBatch(self, std::move(std::get<proto::Batch>(*reply)));
}

Result<Batch> Connection::MakeBatch(const std::shared_ptr<Connection>& self, proto::Batch b) {
  auto state = std::make_shared<internal::BatchState>();
  state->epoch = b.epoch;
  state->step = b.step;
  state->first_seq = b.first_seq;
  state->skipped = b.skipped;
  state->indices = std::move(b.indices);
  state->segments = std::move(b.segments);
  const size_t n = state->indices.size();
  const RingLayout& layout = *layout_;
  for (const Segment& s : state->segments) {
    if (s.slot >= layout.window() || s.offset + uint64_t{s.count} > layout.batch_size()) {
      if (b.lease_id != 0) Release(b.lease_id);
      return InternalError("server sent a segment outside the ring");
    }
  }
  state->zero_copy = state->segments.size() == 1;
  size_t gather_bytes = 0;
  if (!state->zero_copy) {
    for (const FieldSpec& f : layout.fields()) gather_bytes += f.bytes_per_sample() * n;
    state->gather.resize(gather_bytes);
  }
  size_t gather_off = 0;
  for (size_t fi = 0; fi < layout.fields().size(); ++fi) {
    const FieldSpec& f = layout.fields()[fi];
    const uint8_t* base = host_ring_->data();
    FieldView v;
    v.name = f.name;
    v.dtype = f.dtype;
    v.device = Device{MemoryKind::kHost, -1};
    v.shape.push_back(static_cast<int64_t>(n));
    v.shape.insert(v.shape.end(), f.shape.begin(), f.shape.end());
    v.bytes = f.bytes_per_sample() * n;
    if (state->zero_copy) {
      const Segment& s = state->segments[0];
      v.data = base + layout.SampleOffset(fi, s.slot, s.offset);
    } else {
      uint8_t* dst = state->gather.data() + gather_off;
      v.data = dst;
      for (const Segment& s : state->segments) {
        const size_t bytes = f.bytes_per_sample() * s.count;
        std::memcpy(dst, base + layout.SampleOffset(fi, s.slot, s.offset), bytes);
        dst += bytes;
      }
      gather_off += v.bytes;
    }
    state->fields.push_back(std::move(v));
  }
  if (state->zero_copy) {
    state->connection = self;
    state->lease_id = b.lease_id;
    std::lock_guard lock(release_mu_);
    held_.insert(b.lease_id);
  } else if (b.lease_id != 0) {
    Release(b.lease_id);  // the copy is private: the ring may move on
  }
  return Batch(std::move(state));
}

Result<std::string> Connection::Stats() {
  std::lock_guard lock(sock_mu_);
  if (!fatal_.ok()) return fatal_;
  stats_reply_.reset();
  SendLocked(proto::Stats{});
  const auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  while (!stats_reply_ && fatal_.ok() && SteadyClock::now() < deadline) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    DrainLocked();
    KeepAliveLocked();
  }
  if (!stats_reply_) return fatal_.ok() ? DeadlineExceededError("no stats reply") : fatal_;
  return *std::exchange(stats_reply_, std::nullopt);
}

void Connection::Detach() {
  std::lock_guard lock(sock_mu_);
  if (detached_) return;
  detached_ = true;
  {
    std::lock_guard rl(release_mu_);
    for (const proto::Message& m : replies_) {
      if (auto* b = std::get_if<proto::Batch>(&m); b != nullptr && b->lease_id != 0) {
        releases_.push_back(b->lease_id);
      }
    }
  }
  replies_.clear();
  FlushReleasesLocked();
  std::vector<uint64_t> kept;
  {
    std::lock_guard rl(release_mu_);
    kept.assign(held_.begin(), held_.end());
  }
  if (fatal_.ok()) SendLocked(proto::Bye{std::move(kept)});
}

void Connection::HeartbeatLoop() {
  std::unique_lock lock(hb_mu_);
  while (!hb_stop_) {
    hb_cv_.wait_for(lock, kReleaseFlush);
    if (hb_stop_) break;
    if (sock_mu_.try_lock()) {
      if (fatal_.ok()) {
        DrainLocked();
        KeepAliveLocked();
      }
      sock_mu_.unlock();
    }
  }
}

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

// ---- Consumer ----

Consumer::Consumer(std::shared_ptr<Connection> connection) : connection_(std::move(connection)) {}
Consumer::~Consumer() {
  if (connection_) connection_->Detach();
}

Result<std::unique_ptr<Consumer>> Consumer::Connect(ConsumerOptions options) {
  BATCHCAST_ASSIGN_OR_RETURN(std::shared_ptr<Connection> c, Connection::Open(options));
  return std::unique_ptr<Consumer>(new Consumer(std::move(c)));
}

Result<Batch> Consumer::Next() { return connection_->Next(connection_); }
uint64_t Consumer::batches_per_epoch() const { return connection_->welcome().batches_per_epoch; }
uint64_t Consumer::epoch_len() const { return connection_->welcome().epoch_len; }
uint64_t Consumer::consumer_id() const { return connection_->welcome().consumer_id; }
uint32_t Consumer::producer_batch_size() const {
  return connection_->welcome().producer_batch_size;
}
uint32_t Consumer::window() const { return connection_->welcome().window; }
const std::vector<FieldSpec>& Consumer::fields() const { return connection_->welcome().fields; }
Result<std::string> Consumer::Stats() { return connection_->Stats(); }

}  // namespace batchcast
