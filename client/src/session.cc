#include "session.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "batchcast/cuda/runtime.h"
#include "core/src/catch_all.h"
#include "core/src/logging.h"
#include "core/src/runtime_dir.h"
#include "core/src/thread_name.h"
#include "curve_client.h"
#include "server_probe.h"

namespace batchcast::internal {

using SteadyClock = std::chrono::steady_clock;

namespace {

// The longest a released lease waits for a NEXT to carry it (Note [Client
// socket ownership]); also the flush thread's period.
constexpr std::chrono::milliseconds kReleaseFlush(10);
// How often the server's pid is checked (when it is visible to us), and its
// liveness while connecting (server_probe.h).
constexpr std::chrono::milliseconds kPidCheck(100);

std::string DefaultConsumerName() {
  std::string exe = "consumer";
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) exe = path.filename().string();
  return exe + ":" + std::to_string(getpid());
}

// What HELLO says of the consumer's device (ConsumerOptions::device): "cuda:M"
// or "" (no GPU). "" asks CUDA for the calling thread's current device.
Result<std::string> HelloDevice(const std::string& option) {
  if (option.empty()) {
    if (!cuda::BuiltWithCuda()) return std::string();
    Result<int> current = cuda::CurrentDevice();
    return current.ok() ? DeviceName(Device::Cuda(*current)) : std::string();
  }
  // "cpu:N": host ring N of a server with several (a test setup).
  if (option.starts_with("cpu:")) return option;
  Result<Device> d = ParseDevice(option);
  if (!d.ok()) return InvalidArgumentError("device: " + d.status().message());
  return d->is_cuda() ? DeviceName(*d) : std::string();
}

int64_t MsSince(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t).count();
}

}  // namespace

Session::Session(const ConsumerOptions& options)
    : options_(options), socket_(context_, zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::linger, 200);
  socket_.set(zmq::sockopt::rcvhwm, 100000);
  socket_.set(zmq::sockopt::sndhwm, 100000);
  socket_.set(zmq::sockopt::maxmsgsize, int64_t{64} << 20);
}

Session::~Session() {
  {
    MutexLock lock(&flush_mu_);
    flush_stop_ = true;
  }
  flush_cv_.SignalAll();
  if (flush_thread_.joinable()) flush_thread_.join();
  {
    // Note [Device leases]: the GPU work that read our batches finishes before
    // their leases end and before the ring's mapping closes (with ring_).
    MutexLock lock(&lease_mu_);
    ledger_.WaitForPending();
  }
  MutexLock lock(&sock_mu_);
  FlushReleases();
  if (!detached_ && fatal_.ok()) Send(proto::Bye{});
  watch_.reset();  // stops monitoring the socket first
  socket_.close();
}

Result<std::shared_ptr<Session>> Session::Open(const ConsumerOptions& options) {
  if (options.batch_size == 0) return InvalidArgumentError("batch_size must be at least 1");
  if (options.prefetch == 0) return InvalidArgumentError("prefetch must be at least 1");
  std::shared_ptr<Session> s(new Session(options));
  BATCHCAST_ASSIGN_OR_RETURN(s->endpoint_, ResolveEndpoint(options.endpoint));
  BATCHCAST_RETURN_IF_ERROR(CheckKeyFileUse(s->endpoint_, options.key_file));
  BATCHCAST_RETURN_IF_ERROR(CheckLocalServer(s->endpoint_, options.endpoint));
  if (s->options_.name.empty()) s->options_.name = DefaultConsumerName();
  BATCHCAST_ASSIGN_OR_RETURN(s->group_, ResolveGroup(options));
  BATCHCAST_ASSIGN_OR_RETURN(s->hello_device_, HelloDevice(options.device));
  BATCHCAST_RETURN_IF_ERROR(s->Handshake());
  s->server_pid_visible_ =
      s->endpoint_.starts_with("ipc://") && ProcessAlive(static_cast<int>(s->welcome_.server_pid));
  // Heartbeats from the WELCOME on: mapping the ring may take seconds (a
  // CUDA ring's first mapping creates this process's context on the device),
  // and the server drops a consumer that is silent for heartbeat_timeout.
  // The thread never touches ring_; a failed mapping ends it (~Session, BYE).
  Session* raw = s.get();
  s->flush_thread_ = std::thread([raw] {
    SetThreadName("bc-flush");
    raw->FlushLoop();
  });
  BATCHCAST_ASSIGN_OR_RETURN(MappedRing ring, MappedRing::Map(s->welcome_));
  s->ring_.emplace(std::move(ring));
  return s;
}

Status Session::Handshake() {
  proto::Hello h;
  h.name = options_.name;
  h.pid = static_cast<uint32_t>(getpid());
  h.batch_size = options_.batch_size;
  h.drop_last = options_.drop_last;
  h.join = options_.join;
  h.prefetch = options_.prefetch;
  if (group_) {
    h.group = group_->group;
    h.rank = group_->rank;
    h.world_size = group_->world_size;
  }
  h.device = hello_device_;
  MutexLock lock(&sock_mu_);
  // Note [Transport security]: tcp:// is CURVE; the watch says at once why a
  // connection cannot succeed.
  BATCHCAST_ASSIGN_OR_RETURN(
      TransportWatch secured,
      TransportWatch::Secure(context_, socket_, endpoint_, options_.key_file));
  TransportWatch& watch = watch_.emplace(std::move(secured));
  try {
    socket_.connect(endpoint_);
  } catch (const zmq::error_t& e) {
    return UnavailableError("cannot connect to " + endpoint_ + ": " + e.what());
  }
  Send(h);
  const auto deadline = SteadyClock::now() + options_.connect_timeout;
  while (fatal_.ok() && SteadyClock::now() < deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    Poll(std::clamp(left, std::chrono::milliseconds(1), kPidCheck));
    zmq::message_t msg;
    if (!socket_.recv(msg, zmq::recv_flags::dontwait)) {
      // A server that dies while we wait is noticed at once, not at the deadline.
      BATCHCAST_RETURN_IF_ERROR(CheckLocalServer(endpoint_, options_.endpoint));
      BATCHCAST_RETURN_IF_ERROR(watch.Check());
      continue;
    }
    Result<proto::Message> m = proto::Decode({static_cast<const uint8_t*>(msg.data()), msg.size()});
    if (!m.ok()) return m.status().WithContext("bad reply from " + endpoint_);
    if (auto* w = std::get_if<proto::Welcome>(&*m)) {
      welcome_ = std::move(*w);
      last_heard_ = SteadyClock::now();
      // Say something at once: a consumer is "unconfirmed" until it does
      // (Note [Peer limits], server/src/peer_guard.h). A resuming one says
      // RESUME, so that it never pins the ring at its join point.
      if (options_.resume_from) return ResumeLocked(*options_.resume_from);
      Send(proto::Heartbeat{});
      return Status::Ok();
    }
    if (auto* e = std::get_if<proto::Error>(&*m)) {
      return proto::ToStatus(*e).WithContext("server refused the connection");
    }
    // A heartbeat or stray message before WELCOME: keep waiting.
  }
  if (!fatal_.ok()) return fatal_;
  return UnavailableError("server at " + endpoint_ + " did not answer within " +
                          std::to_string(options_.connect_timeout.count()) + " ms");
}

void Session::Send(const proto::Message& m) {
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

void Session::Poll(std::chrono::milliseconds timeout) {
  // The transport's monitor too: a lost tcp:// connection wakes the wait.
  zmq::pollitem_t items[2] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                              {watch_ ? watch_->monitor_handle() : nullptr, 0, ZMQ_POLLIN, 0}};
  try {
    zmq::poll(items, items[1].socket != nullptr ? 2 : 1, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR && fatal_.ok()) {
      fatal_ = UnavailableError(std::string("poll failed: ") + e.what());
    }
  }
}

void Session::Drain() {
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
    Result<proto::Message> m = proto::Decode({static_cast<const uint8_t*>(msg.data()), msg.size()});
    if (!m.ok()) {
      if (fatal_.ok()) fatal_ = m.status().WithContext("bad message from the server");
      return;
    }
    Handle(std::move(*m));
  }
}

void Session::Handle(proto::Message m) {
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
  if (auto* e = std::get_if<proto::Error>(&m);
      e != nullptr && e->request_id == proto::kStatsRequestId) {
    stats_error_ = proto::ToStatus(*e);  // a STATS refused (asked too often): not fatal
    return;
  }
  if (auto* e = std::get_if<proto::Error>(&m);
      e != nullptr && e->request_id == proto::kResumeRequestId) {
    resume_answer_ = proto::ToStatus(*e);  // the place was refused: not fatal
    return;
  }
  if (std::holds_alternative<proto::Resumed>(m)) {
    resume_answer_ = Status::Ok();
    return;
  }
  if (std::holds_alternative<proto::Batch>(m) || std::holds_alternative<proto::EndOfEpoch>(m) ||
      std::holds_alternative<proto::Error>(m)) {
    if (in_flight_ > 0) --in_flight_;
    if (auto* b = std::get_if<proto::Batch>(&m)) {
      MutexLock lock(&lease_mu_);
      ledger_.Arrive(b->lease_id);  // released at once after Detach
    }
    if (!detached_) replies_.push_back(std::move(m));
    return;
  }
  BC_LOG_WARN("ignored an unexpected {} from the server", proto::MessageName(m));
}

std::vector<uint64_t> Session::TakeReleases() {
  MutexLock lock(&lease_mu_);
  return ledger_.Take();
}

void Session::FlushReleases() {
  std::vector<uint64_t> ids = TakeReleases();
  if (!ids.empty() && fatal_.ok()) Send(proto::Release{std::move(ids)});
}

void Session::KeepAlive() {
  FlushReleases();
  const auto now = SteadyClock::now();
  if (now - last_sent_ >= std::chrono::milliseconds(welcome_.heartbeat_interval_ms)) {
    Send(proto::Heartbeat{});
  }
  if (!fatal_.ok()) return;
  if (watch_) {
    if (Status lost = watch_->CheckConnection(); !lost.ok()) {
      fatal_ = std::move(lost);
      return;
    }
  }
  if (server_pid_visible_ && now - last_pid_check_ >= kPidCheck) {
    last_pid_check_ = now;
    if (!ProcessAlive(static_cast<int>(welcome_.server_pid))) {
      fatal_ = UnavailableError("server '" + welcome_.server_name + "' (pid " +
                                std::to_string(welcome_.server_pid) + ") has exited");
      return;
    }
  }
  if (MsSince(last_heard_) > welcome_.heartbeat_timeout_ms) {
    fatal_ = UnavailableError("server '" + welcome_.server_name +
                              "' stopped answering: nothing "
                              "heard for " +
                              std::to_string(MsSince(last_heard_)) + " ms");
  }
}

void Session::TopUp() {
  while (!detached_ && fatal_.ok() && in_flight_ + replies_.size() < options_.prefetch) {
    Send(proto::Next{next_request_id_++, TakeReleases()});
    ++in_flight_;
  }
}

Result<proto::Message> Session::NextReply() {
  MutexLock lock(&sock_mu_);
  if (detached_) return CancelledError("the consumer was closed");
  const auto start = SteadyClock::now();
  Drain();
  while (replies_.empty() && fatal_.ok()) {
    TopUp();
    KeepAlive();
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
            "`batchcast-server stat " +
            welcome_.server_name + "`)");
      }
      slice = std::min(slice, left);
    }
    Poll(slice);
    Drain();
  }
  if (replies_.empty()) return fatal_;  // the server is gone, stopped, or evicted us
  // Batches that came before a connection-level error are still delivered
  // (a rank of a broken group gets what its peers got), but an error reply
  // after it is its consequence ("this consumer left the stream", answering
  // a NEXT sent before the error arrived): the cause is what the user sees.
  if (!fatal_.ok() && std::holds_alternative<proto::Error>(replies_.front())) return fatal_;
  proto::Message reply = std::move(replies_.front());
  replies_.pop_front();
  if (auto* b = std::get_if<proto::Batch>(&reply)) {
    MutexLock leases(&lease_mu_);
    ledger_.Deliver(b->lease_id);
  }
  TopUp();
  FlushReleases();
  return reply;
}

Result<std::string> Session::Stats() {
  MutexLock lock(&sock_mu_);
  if (!fatal_.ok()) return fatal_;
  stats_reply_.reset();
  stats_error_ = Status::Ok();
  FlushReleases();  // so that the stats count the batches released so far
  Send(proto::Stats{});
  const auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  while (!stats_reply_ && stats_error_.ok() && fatal_.ok() && SteadyClock::now() < deadline) {
    Poll(std::chrono::milliseconds(50));
    Drain();
    KeepAlive();
  }
  if (!stats_error_.ok()) return stats_error_;
  if (!stats_reply_) return fatal_.ok() ? DeadlineExceededError("no stats reply") : fatal_;
  return *std::exchange(stats_reply_, std::nullopt);
}

Status Session::Resume(const ConsumerPosition& place) {
  MutexLock lock(&sock_mu_);
  if (detached_) return CancelledError("the consumer was closed");
  if (!fatal_.ok()) return fatal_;
  if (next_request_id_ != 1) {
    return InvalidArgumentError(
        "a consumer resumes before its first batch: this one asked for batches already "
        "(load the state before iterating)");
  }
  return ResumeLocked(place);
}

Status Session::ResumeLocked(const ConsumerPosition& place) {
  const proto::Resume r{.stream = place.stream,
                        .epoch = place.epoch,
                        .step = place.step,
                        .epoch_start = place.epoch_start,
                        .next_seq = place.next_seq,
                        .skipped = place.skipped,
                        .world_size = place.world_size,
                        .batch_size = place.batch_size};
  if (r.next_seq < r.epoch_start) {
    return InvalidArgumentError("not a saved consumer position: next_seq " +
                                std::to_string(r.next_seq) + " is before epoch_start " +
                                std::to_string(r.epoch_start));
  }
  resume_answer_.reset();
  Send(r);
  const auto deadline = SteadyClock::now() + options_.connect_timeout;
  while (!resume_answer_ && fatal_.ok() && SteadyClock::now() < deadline) {
    Poll(std::chrono::milliseconds(50));
    Drain();
    KeepAlive();
  }
  if (resume_answer_) return std::exchange(resume_answer_, std::nullopt)->WithContext("resume");
  if (!fatal_.ok()) return fatal_;
  return UnavailableError("server '" + welcome_.server_name +
                          "' did not answer the resume within " +
                          std::to_string(options_.connect_timeout.count()) + " ms");
}

void Session::Detach() {
  MutexLock lock(&sock_mu_);
  if (detached_) return;
  detached_ = true;
  replies_.clear();
  {
    MutexLock leases(&lease_mu_);
    ledger_.Detach();  // what was only prefetched is released (Note [Client leases])
  }
  FlushReleases();
  std::vector<uint64_t> kept;
  {
    MutexLock leases(&lease_mu_);
    kept = ledger_.Held();
  }
  if (fatal_.ok()) Send(proto::Bye{std::move(kept)});
}

void Session::Release(uint64_t lease_id) {
  MutexLock lock(&lease_mu_);
  ledger_.Release(lease_id);
}

void Session::ReleaseAfter(uint64_t lease_id, CompletionTokens tokens) {
  MutexLock lock(&lease_mu_);
  ledger_.ReleaseAfter(lease_id, std::move(tokens));
}

void Session::KeepAliveOrFail() {
  try {
    if (fatal_.ok()) {
      Drain();
      KeepAlive();
    }
  } catch (...) {
    if (fatal_.ok()) fatal_ = UnexpectedException("the consumer's flush thread");
  }
}

void Session::FlushLoop() {
  const Status s = CatchAll("the consumer's flush thread", [this] {
    while (true) {
      {
        MutexLock lock(&flush_mu_);
        if (!flush_stop_) flush_cv_.WaitFor(&flush_mu_, kReleaseFlush);
        if (flush_stop_) return;
      }
      if (sock_mu_.TryLock()) {
        KeepAliveOrFail();
        sock_mu_.Unlock();
      }
    }
  });
  if (!s.ok()) BC_LOG_ERROR("{}", s.message());
}

}  // namespace batchcast::internal
