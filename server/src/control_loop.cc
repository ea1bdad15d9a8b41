#include "control_loop.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/src/catch_all.h"
#include "core/src/endpoint.h"
#include "core/src/escape.h"
#include "core/src/logging.h"
#include "core/src/runtime_dir.h"
#include "device_list.h"
#include "open_file_limit.h"
#include "router_message.h"

namespace batchcast {
namespace {

// The liveness and lag-policy clock of Scheduler::Tick.
constexpr auto kTickPeriod = std::chrono::milliseconds(100);
// How long one zmq_poll waits at most, so that timers run on time.
constexpr auto kPollTimeout = std::chrono::milliseconds(20);
// Messages handled per loop turn at most, so that the outbox gets flushed too.
constexpr int kMaxReceivesPerTurn = 1024;
// Consumer names are shown (logs, stats, `batchcast-server stat`) escaped and
// cut to this many bytes.
constexpr size_t kMaxShownName = 128;
// Malformed messages answered per peer (Note [Peer limits]); a peer that
// keeps sending them is ignored, so that it cannot fill its send queue.
constexpr uint64_t kMaxErrorReplies = 100;
// Messages queued per peer, each way. A consumer has at most max_leases
// batches and a few heartbeats in flight; a peer that stops reading cannot
// make the server hold more than this many replies for it (it is dropped
// when its queue is full), nor send more than this many ahead of the loop.
constexpr int kQueuedMessagesPerPeer = 1000;

}  // namespace

WakeFd::WakeFd() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

WakeFd::~WakeFd() {
  if (fd_ >= 0) close(fd_);
}

void WakeFd::Signal() const {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof(one));
}

void WakeFd::Drain() const {
  uint64_t v;
  [[maybe_unused]] ssize_t n = read(fd_, &v, sizeof(v));
}

ControlLoop::ControlLoop(ControlLoopOptions options)
    : options_(std::move(options)), endpoint_(options_.endpoint), guard_(options_.peer_limits) {}

Result<std::unique_ptr<ControlLoop>> ControlLoop::Create(ControlLoopOptions options) {
  if (options.welcome.rings.empty() || options.scheduler == nullptr) {
    return InternalError("a control loop without a ring");
  }
  std::unique_ptr<ControlLoop> loop(new ControlLoop(std::move(options)));
  if (!loop->wake_.ok()) return InternalError("eventfd failed");
  const std::string& endpoint = loop->options_.endpoint;
  zmq::socket_t& router = loop->router_.emplace(loop->context_, zmq::socket_type::router);
  router.set(zmq::sockopt::router_mandatory, 1);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::sndhwm, kQueuedMessagesPerPeer);
  router.set(zmq::sockopt::rcvhwm, kQueuedMessagesPerPeer);
  router.set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
  if (endpoint.starts_with("tcp://")) {
    BATCHCAST_CHECK(loop->options_.curve_key.has_value()) << "tcp:// needs the server's key";
    // Note [Handshake limits]: a quarter of the descriptors at most.
    const size_t max_pending = std::clamp<size_t>(OpenFileLimit() / 4, 16, 256);
    BATCHCAST_ASSIGN_OR_RETURN(
        loop->curve_,
        CurveServer::Attach(loop->context_, router, loop->options_.curve_key->key, max_pending));
  }
  const std::string path = IpcPath(endpoint);
  if (!path.empty()) {
    // A socket file nobody listens on is a leftover of a dead server; one
    // that is listened on belongs to a live server of another name.
    if (ProbeSocket(path) == ServerProbe::State::kRunning) {
      loop->router_.reset();
      return UnavailableError("cannot bind " + endpoint +
                              ": another server is listening there (pick another --endpoint)");
    }
    unlink(path.c_str());
  }
  try {
    router.bind(BindAddress(endpoint));
  } catch (const zmq::error_t& e) {
    loop->router_.reset();
    return UnavailableError("cannot bind " + endpoint + ": " + e.what());
  }
  if (!path.empty()) chmod(path.c_str(), 0600);
  // tcp:// port 0 or *: the port the system picked.
  if (endpoint.starts_with("tcp://")) loop->endpoint_ = router.get(zmq::sockopt::last_endpoint);
  if (loop->curve_) {
    const KeyFile& k = *loop->options_.curve_key;
    BC_LOG_INFO("tcp:// connections need the key {}{} (CURVE, public key {})", k.path,
                k.created ? ", made now" : "", k.key.public_key);
    // Beyond loopback (allow_remote): the ring itself is still this machine's.
    if (!IsLoopbackTcp(endpoint)) {
      BC_LOG_WARN(
          "{} accepts connections from other machines holding the key; consumers "
          "must share this machine's memory (/dev/shm or the GPU)",
          loop->endpoint_);
    }
  }
  const WakeFd* wake = &loop->wake_;
  loop->options_.scheduler->set_wakeup([wake] { wake->Signal(); });
  return loop;
}

void ControlLoop::Remove(const std::string& identity, const std::string& reason) {
  options_.scheduler->Remove(identity, reason);
}

ControlLoop::~ControlLoop() {
  if (!router_) return;
  router_->close();
  router_.reset();
  if (const std::string path = IpcPath(options_.endpoint); !path.empty()) unlink(path.c_str());
}

void ControlLoop::RequestStop(Status why) {
  {
    MutexLock l(&stop_mu_);
    if (stop_reason_.ok()) stop_reason_ = std::move(why);
  }
  stopping_ = true;
  wake_.Signal();
}

void ControlLoop::SendTo(const std::string& identity, const proto::Message& message) {
  send_buffer_.clear();
  proto::EncodeTo(message, send_buffer_);
  try {
    auto r1 =
        router_->send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    auto r2 = r1 ? router_->send(zmq::buffer(send_buffer_), zmq::send_flags::dontwait)
                 : zmq::send_result_t{};
    if (!r1 || !r2) {
      Remove(identity, "its connection is not reading (send queue full)");
    }
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) {
      Remove(identity, "its connection is gone");
    } else {
      BC_LOG_WARN("send to a consumer failed: {}", e.what());
    }
  }
}

void ControlLoop::FlushOutbox() {
  options_.scheduler->TakeOutbox(outbox_);
  for (const Outgoing& o : outbox_) SendTo(o.identity, o.message);
}

void ControlLoop::Drop(const std::string& identity, const std::string& reason) {
  Remove(identity, reason);
  guard_.Forget(identity);
  SendTo(identity, proto::Error{0, StatusCode::kResourceExhausted,
                                "the server dropped this connection: " + reason});
}

void ControlLoop::HandleHello(const std::string& identity, proto::Hello hello) {
  // The name is the peer's: shown escaped (logs, stats, `stat`), never raw.
  hello.name = EscapeText(hello.name, kMaxShownName);
  // So is the group's name (one escaping for every rank: they still match).
  hello.group = EscapeText(hello.group);
  const Clock::time_point now = Clock::now();
  if (options_.scheduler->HasConsumer(identity)) {
    // A consumer already: Note [Admission] counts it a repeater, and the
    // Scheduler refuses the HELLO.
    guard_.OnRepeatedHello(identity, now);
    Admit(identity, hello);
    return;
  }
  switch (guard_.OnHello(identity, now)) {
    case PeerGuard::HelloAnswer::kAdmit:
      if (!Admit(identity, hello)) {
        waiting_hellos_[identity] = std::move(hello);
        guard_.WaitAgain(identity);
      }
      return;
    case PeerGuard::HelloAnswer::kWait:
      waiting_hellos_[identity] = std::move(hello);
      return;
    case PeerGuard::HelloAnswer::kRefuse:
      BC_LOG_WARN_LIMITED("refused a HELLO: {} consumers are waiting to join", guard_.waiting());
      SendTo(identity, proto::Error{0, StatusCode::kResourceExhausted,
                                    std::to_string(guard_.waiting()) +
                                        " consumers are waiting to join this server; try again"});
      return;
  }
}

void ControlLoop::AdmitWaiting() {
  if (waiting_hellos_.empty()) return;
  const Clock::time_point now = Clock::now();
  for (const std::string& id : guard_.TakeStaleWaiting(now)) {
    waiting_hellos_.erase(id);
    SendTo(id, proto::Error{0, StatusCode::kResourceExhausted,
                            "waited too long to join: too many consumers are joining this "
                            "server at once; try again"});
  }
  while (std::optional<std::string> id = guard_.NextAdmission(now)) {
    auto it = waiting_hellos_.find(*id);
    if (it == waiting_hellos_.end()) continue;
    proto::Hello hello = std::move(it->second);
    waiting_hellos_.erase(it);
    if (!Admit(*id, hello)) {  // full of unconfirmed consumers: its turn comes again
      waiting_hellos_[*id] = std::move(hello);
      guard_.WaitAgain(*id);
      break;
    }
  }
}

bool ControlLoop::Admit(const std::string& identity, const proto::Hello& hello) {
  // Note [Placement]: its home ring is the ring of its GPU.
  std::vector<int> devices;
  for (const proto::RingInfo& r : options_.welcome.rings) devices.push_back(r.device);
  Result<size_t> home = RingForConsumer(EscapeText(hello.device, 64), devices);
  if (!home.ok()) {
    SendTo(identity, proto::Error{0, home.status().code(), home.status().message()});
    return true;
  }
  // Over ipc:// the consumer's pid is one of this machine's.
  const bool same_host = options_.endpoint.starts_with("ipc://");
  Result<Scheduler::Admission> a =
      options_.scheduler->AddConsumer(identity, hello, same_host, static_cast<uint32_t>(*home));
  if (!a.ok() && a.status().code() == StatusCode::kResourceExhausted && guard_.unconfirmed() > 0) {
    return false;  // Note [Admission]: places free up as they speak or expire
  }
  if (!a.ok()) {
    BC_LOG_WARN_LIMITED("refused consumer '{}' (pid {}): {}", hello.name, hello.pid,
                        a.status().message());
    SendTo(identity, proto::Error{0, a.status().code(), a.status().message()});
    return true;
  }
  guard_.OnWelcomed(identity, Clock::now());
  proto::Welcome w = options_.welcome;
  w.home_ring = static_cast<uint32_t>(*home);
  w.consumer_id = a->consumer_id;
  w.batches_per_epoch = a->batches_per_epoch;
  w.start = a->start;
  SendTo(identity, w);
  return true;
}

void ControlLoop::HandleStats(const std::string& identity) {
  switch (guard_.OnStats(identity, Clock::now())) {
    case PeerGuard::StatsAnswer::kFresh:
      stats_cache_ = options_.stats_json();
      break;
    case PeerGuard::StatsAnswer::kCached:
      if (stats_cache_.empty()) stats_cache_ = options_.stats_json();
      break;
    case PeerGuard::StatsAnswer::kRefuse:
      BC_LOG_WARN_LIMITED("a peer asks for stats more than {} times a second; refusing",
                          guard_.limits().stats_per_second);
      SendTo(identity, proto::Error{proto::kStatsRequestId, StatusCode::kResourceExhausted,
                                    "too many STATS requests: at most " +
                                        std::to_string(guard_.limits().stats_per_second) +
                                        " a second per connection"});
      return;
    case PeerGuard::StatsAnswer::kDrop:
      return;
  }
  SendTo(identity, proto::StatsReply{stats_cache_});
}

void ControlLoop::HandleMessage(const std::string& identity, std::span<const uint8_t> payload) {
  Result<proto::Message> decoded = proto::Decode(payload);
  if (!decoded.ok()) {
    const uint64_t n = guard_.OnBadMessage(identity, Clock::now());
    BC_LOG_WARN_LIMITED("ignored a message from a peer ({} so far from it): {}", n,
                        decoded.status().message());
    if (n <= kMaxErrorReplies) {
      SendTo(identity, proto::Error{0, StatusCode::kInvalidArgument, decoded.status().message()});
    }
    return;
  }
  proto::Message& m = *decoded;
  if (auto* hello = std::get_if<proto::Hello>(&m)) {
    HandleHello(identity, std::move(*hello));
    return;
  }
  if (std::holds_alternative<proto::Stats>(m)) {
    HandleStats(identity);
    return;
  }
  guard_.OnConsumerMessage(identity);
  Scheduler* const scheduler = options_.scheduler;
  if (!scheduler->HasConsumer(identity)) {
    if (!std::holds_alternative<proto::Bye>(m) && !std::holds_alternative<proto::Release>(m) &&
        !std::holds_alternative<proto::Heartbeat>(m)) {
      // Unavailable, as for a server that is gone: a consumer whose server
      // was restarted on the same endpoint (its socket reconnects to the new
      // one) or dropped it must connect again.
      SendTo(identity, proto::Error{0, StatusCode::kUnavailable,
                                    "unknown consumer: this server was restarted or dropped this "
                                    "consumer after missed heartbeats; connect again (or say "
                                    "HELLO first)"});
    }
    return;
  }
  std::visit(
      [&](auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, proto::Next>) {
          // Release, answer, and only then wake the producer, so that its
          // work does not delay the reply.
          if (!msg.releases.empty()) scheduler->Release(identity, msg.releases, false);
          scheduler->Next(identity, msg.request_id);
          FlushOutbox();
          scheduler->WakeProducer();
        } else if constexpr (std::is_same_v<T, proto::Release>) {
          scheduler->Release(identity, msg.lease_ids);
        } else if constexpr (std::is_same_v<T, proto::Heartbeat>) {
          scheduler->Touch(identity);
        } else if constexpr (std::is_same_v<T, proto::Bye>) {
          scheduler->Bye(identity, msg.kept_leases);
        } else if constexpr (std::is_same_v<T, proto::Resume>) {
          // Note [Resume]: an answer either way; a refusal leaves the
          // consumer where it was.
          if (Status s = scheduler->Resume(identity, msg); !s.ok()) {
            BC_LOG_WARN_LIMITED("refused a consumer's resume: {}", s.message());
            SendTo(identity, proto::Error{proto::kResumeRequestId, s.code(), s.message()});
          } else {
            SendTo(identity, proto::Resumed{msg.next_seq});
          }
          FlushOutbox();
          scheduler->WakeProducer();
        } else {
          SendTo(identity, proto::Error{0, StatusCode::kInvalidArgument,
                                        std::string("a consumer may not send ") +
                                            std::string(proto::MessageName(proto::Message(msg)))});
        }
      },
      m);
}

void ControlLoop::ReceiveAll() {
  for (int i = 0; i < kMaxReceivesPerTurn; ++i) {
    std::optional<RouterMessage> m = TakeRouterMessage(*router_);
    if (!m) break;
    // Note [Handshake limits]: this connection finished its handshake.
    if (curve_) {
      if (const int fd = m->source_fd(); fd >= 0) curve_->Heard(fd);
    }
    const std::string id = m->peer();
    if (m->extra) {
      SendTo(id, proto::Error{0, StatusCode::kInvalidArgument,
                              "malformed message: more than one frame"});
      continue;
    }
    HandleMessage(id, m->bytes());
  }
}

void ControlLoop::RunTimers() {
  const Clock::time_point now = Clock::now();
  if (now >= next_heartbeat_) {
    for (const std::string& id : options_.scheduler->Identities()) SendTo(id, proto::Heartbeat{});
    next_heartbeat_ = now + options_.heartbeat_period;
  }
  if (now >= next_tick_) {
    for (const std::string& id : guard_.TakeExpired(now)) {
      Drop(id, "it said nothing for " + std::to_string(options_.peer_limits.probation.count()) +
                   " ms after its HELLO while others waited to join");
    }
    guard_.Prune(now);
    options_.scheduler->Tick();
    FlushOutbox();
    next_tick_ = now + kTickPeriod;
  }
}

void ControlLoop::Run() {
  Status s = CatchAll("the server's control thread", [this] { Serve(); });
  if (!s.ok()) {
    BC_LOG_ERROR("{}", s.message());
    options_.finish(s);
  }
  // Tell every consumer, so that nobody waits for a heartbeat timeout, and
  // why when the server stopped on an error.
  Status why;
  {
    MutexLock l(&stop_mu_);
    why = stop_reason_;
  }
  proto::Error notice{0, StatusCode::kUnavailable, "server '" + options_.server_name + "' stopped"};
  if (!why.ok()) {
    // Unavailable (the server is gone) with the reason; lost data keeps its
    // code, so that a job can tell a broken dataset from a stopped server.
    if (why.code() == StatusCode::kDataLoss) notice.code = StatusCode::kDataLoss;
    notice.message += ": " + why.message();
  }
  CatchAll("the server's control thread", [&] {
    for (const std::string& id : options_.scheduler->Identities()) SendTo(id, notice);
  }).IgnoreError();
}

void ControlLoop::Serve() {
  next_heartbeat_ = next_tick_ = Clock::now();
  std::vector<zmq::pollitem_t> items = {{router_->handle(), 0, ZMQ_POLLIN, 0},
                                        {nullptr, wake_.fd(), ZMQ_POLLIN, 0}};
  if (curve_) {
    items.push_back({curve_->zap_handle(), 0, ZMQ_POLLIN, 0});
    items.push_back({curve_->monitor_handle(), 0, ZMQ_POLLIN, 0});
  }
  while (!stopping_.load()) {
    try {
      zmq::poll(items.data(), items.size(), kPollTimeout);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      options_.finish(InternalError(std::string("zmq_poll failed: ") + e.what()));
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) wake_.Drain();
    if (curve_) curve_->HandleRequests();
    ReceiveAll();
    AdmitWaiting();
    FlushOutbox();
    RunTimers();
    if (options_.scheduler->Finished()) {
      BC_LOG_INFO("the stream ended and every consumer left: server '{}' is done",
                  options_.server_name);
      options_.finish(Status::Ok());
      break;
    }
  }
}

}  // namespace batchcast
