#include "connection.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>

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
  if (!connection) return;
  if (!on_device) {
    if (lease_id != 0) connection->Release(lease_id);
    return;
  }
  // Note [Device leases]: zero-copy leases end after the work queued on every
  // stream that used the batch; a gathered batch's lease is already pending.
  std::vector<CudaStreamRef> used;
  {
    std::lock_guard lock(streams_mu);
    used = streams;
  }
  if (gather_device != nullptr) {
    // Free the private copy in stream order after all users: the delivery
    // stream waits for the other streams first.
    for (size_t i = 1; i < used.size(); ++i) {
      auto e = cuda::Event::Create(cuda_device);
      if (e.ok() && e->Record(used[i]).ok()) {
        (void)e->BlockStream(used[0]);
      } else {
        (void)cuda::SynchronizeStream(used[i]);
      }
    }
    (void)cuda::FreeAsync(cuda_device, gather_device, used.empty() ? CudaStreamRef() : used[0]);
  }
  if (lease_id != 0) connection->ReleaseAfter(lease_id, used);
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
    // Note [Device leases]: the GPU work that read our batches finishes before
    // their leases end and before the ring's mapping closes.
    std::lock_guard lock(release_mu_);
    for (PendingRelease& p : pending_) {
      for (const cuda::Event& e : p.events) (void)e.Synchronize();
    }
    PollPendingLocked();
  }
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
  c->cuda_stream_.store(options.cuda_stream);
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
      const std::string where = "cuda:" + std::to_string(a.device_index);
      if (!cuda::BuiltWithCuda()) {
        return InvalidArgumentError("the server's ring is in CUDA memory (" + where +
                                    "), which this build of the client (without CUDA) cannot map");
      }
      if (a.event_handles.size() != welcome_.window) {
        return InternalError("the server sent " + std::to_string(a.event_handles.size()) +
                             " slot events for a window of " + std::to_string(welcome_.window));
      }
      // Note [CUDA IPC lifetimes]: mapped once, kept until the connection ends.
      cuda_device_ = a.device_index;
      Result<std::shared_ptr<cuda::IpcMapping>> m = cuda::OpenIpcMemory(a.mem_handle, cuda_device_);
      if (!m.ok()) {
        return m.status().WithContext("cannot map the server's CUDA ring on " + where +
                                      " (the consumer must run on the same machine and see the "
                                      "same GPUs, e.g. the same CUDA_VISIBLE_DEVICES)");
      }
      device_ring_ = std::move(*m);
      for (const proto::IpcHandle& h : a.event_handles) {
        Result<cuda::Event> e = cuda::Event::OpenIpc(h, cuda_device_);
        if (!e.ok()) return e.status().WithContext("cannot open the ring's slot events");
        slot_events_.push_back(std::move(*e));
      }
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

Result<cuda::Event> Connection::TakeEventLocked() {
  if (!spare_events_.empty()) {
    cuda::Event e = std::move(spare_events_.back());
    spare_events_.pop_back();
    return e;
  }
  return cuda::Event::Create(cuda_device_);
}

void Connection::ReleaseAfter(uint64_t lease_id, const std::vector<CudaStreamRef>& streams) {
  std::lock_guard lock(release_mu_);
  PendingRelease p;
  p.lease_id = lease_id;
  for (CudaStreamRef stream : streams) {
    Result<cuda::Event> e = TakeEventLocked();
    Status s = e.ok() ? e->Record(stream) : e.status();
    if (s.ok()) {
      p.events.push_back(std::move(*e));
    } else {
      // E.g. a stream of another device: order by waiting for it instead.
      static std::once_flag warned;
      std::call_once(warned, [&] {
        BC_LOG_WARN("cannot record a CUDA event on a consumer stream ({}); waiting for the "
                    "stream before releasing batches instead",
                    s.message());
      });
      (void)cuda::SynchronizeStream(stream);
    }
  }
  pending_.push_back(std::move(p));
}

void Connection::PollPendingLocked() {
  for (size_t i = 0; i < pending_.size();) {
    PendingRelease& p = pending_[i];
    bool done = true;
    for (const cuda::Event& e : p.events) {
      Result<bool> q = e.Query();
      if (q.ok() && !*q) {
        done = false;
        break;
      }  // an error means the work is gone (e.g. the context died): done
    }
    if (!done) {
      ++i;
      continue;
    }
    if (p.lease_id != 0) {
      releases_.push_back(p.lease_id);
      held_.erase(p.lease_id);
    }
    for (cuda::Event& e : p.events) spare_events_.push_back(std::move(e));
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
}

Status Connection::RecordStream(internal::BatchState& state, CudaStreamRef stream) {
  if (!state.on_device) return Status::Ok();
  std::lock_guard lock(state.streams_mu);
  for (CudaStreamRef s : state.streams) {
    if (s == stream) return Status::Ok();
  }
  Result<cuda::Event> e = cuda::Event::Create(cuda_device_);
  if (!e.ok()) return e.status();
  BATCHCAST_RETURN_IF_ERROR(e->Record(state.streams.empty() ? CudaStreamRef() : state.streams[0]));
  BATCHCAST_RETURN_IF_ERROR(e->BlockStream(stream));
  state.streams.push_back(stream);
  return Status::Ok();
}

void Connection::FlushReleasesLocked() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(release_mu_);
    if (!pending_.empty()) PollPendingLocked();
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
      if (!pending_.empty()) PollPendingLocked();
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
  const bool on_device = device_ring_ != nullptr;
  const CudaStreamRef stream = cuda_stream_.load();
  if (on_device) {
    // Note [Device ring ordering], step 3: the delivery stream waits for the
    // producer's writes of every slot the batch reads. No host sync.
    state->on_device = true;
    state->cuda_device = cuda_device_;
    state->streams.push_back(stream);
    std::set<uint32_t> slots;
    for (const Segment& s : state->segments) {
      if (!slots.insert(s.slot).second) continue;
      if (Status st = slot_events_[s.slot].BlockStream(stream); !st.ok()) {
        if (b.lease_id != 0) Release(b.lease_id);
        return st.WithContext("cannot order the consumer's CUDA stream after the producer");
      }
    }
  }
  size_t host_gather = 0, device_gather = 0;
  if (!state->zero_copy) {
    for (const FieldSpec& f : layout.fields()) {
      (f.memory == MemoryKind::kCuda ? device_gather : host_gather) += f.bytes_per_sample() * n;
    }
    state->gather.resize(host_gather);
    if (device_gather > 0) {
      Result<void*> p = cuda::AllocAsync(cuda_device_, device_gather, stream);
      if (!p.ok()) {
        if (b.lease_id != 0) Release(b.lease_id);
        return p.status().WithContext("cannot allocate the batch's gather buffer");
      }
      state->gather_device = *p;
    }
  }
  size_t host_off = 0, device_off = 0;
  for (size_t fi = 0; fi < layout.fields().size(); ++fi) {
    const FieldSpec& f = layout.fields()[fi];
    const bool dev = f.memory == MemoryKind::kCuda;
    const uint8_t* base = dev ? device_ring_->data() : host_ring_->data();
    FieldView v;
    v.name = f.name;
    v.dtype = f.dtype;
    v.device = dev ? Device{MemoryKind::kCuda, cuda_device_} : Device{MemoryKind::kHost, -1};
    v.shape.push_back(static_cast<int64_t>(n));
    v.shape.insert(v.shape.end(), f.shape.begin(), f.shape.end());
    v.bytes = f.bytes_per_sample() * n;
    if (state->zero_copy) {
      const Segment& s = state->segments[0];
      v.data = base + layout.SampleOffset(fi, s.slot, s.offset);
    } else {
      uint8_t* dst = dev ? static_cast<uint8_t*>(state->gather_device) + device_off
                         : state->gather.data() + host_off;
      v.data = dst;
      for (const Segment& s : state->segments) {
        const size_t bytes = f.bytes_per_sample() * s.count;
        const uint8_t* src = base + layout.SampleOffset(fi, s.slot, s.offset);
        if (dev) {
          if (Status st = cuda::CopyAsync(dst, src, bytes, stream); !st.ok()) {
            // The copies already queued may still read the ring: wait for them.
            (void)cuda::SynchronizeStream(stream);
            (void)cuda::FreeAsync(cuda_device_, state->gather_device, stream);
            state->gather_device = nullptr;
            if (b.lease_id != 0) Release(b.lease_id);
            return st.WithContext("cannot gather the batch on the GPU");
          }
        } else {
          std::memcpy(dst, src, bytes);
        }
        dst += bytes;
      }
      (dev ? device_off : host_off) += v.bytes;
    }
    state->fields.push_back(std::move(v));
  }
  if (on_device) {
    state->connection = self;  // keeps the mapping and the lease bookkeeping alive
    if (b.lease_id != 0) {
      std::lock_guard lock(release_mu_);
      held_.insert(b.lease_id);
    }
    if (state->zero_copy) {
      state->lease_id = b.lease_id;  // ends after the user's GPU work (Note [Device leases])
    } else if (b.lease_id != 0) {
      ReleaseAfter(b.lease_id, {stream});  // ends when the gather copies complete
    }
  } else if (state->zero_copy) {
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

Status Batch::RecordStream(CudaStreamRef cuda_stream) const {
  if (!state_ || !state_->on_device || !state_->connection) return Status::Ok();
  return state_->connection->RecordStream(*state_, cuda_stream);
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
void Consumer::set_cuda_stream(CudaStreamRef cuda_stream) { connection_->set_cuda_stream(cuda_stream); }
uint64_t Consumer::batches_per_epoch() const { return connection_->welcome().batches_per_epoch; }
uint64_t Consumer::epoch_len() const { return connection_->welcome().epoch_len; }
uint64_t Consumer::consumer_id() const { return connection_->welcome().consumer_id; }
uint32_t Consumer::producer_batch_size() const {
  return connection_->welcome().producer_batch_size;
}
uint32_t Consumer::window() const { return connection_->welcome().window; }
Device Consumer::device() const {
  for (const proto::Allocation& a : connection_->welcome().allocations) {
    if (a.kind == MemoryKind::kCuda) return Device{MemoryKind::kCuda, a.device_index};
  }
  return Device{MemoryKind::kHost, -1};
}
const std::vector<FieldSpec>& Consumer::fields() const { return connection_->welcome().fields; }
Result<std::string> Consumer::Stats() { return connection_->Stats(); }

}  // namespace batchcast
