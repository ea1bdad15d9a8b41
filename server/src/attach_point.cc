#include "attach_point.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "core/src/endpoint.h"
#include "core/src/logging.h"
#include "core/src/runtime_dir.h"
#include "router_message.h"

namespace batchcast {
namespace {

constexpr std::chrono::milliseconds kPollStep{100};

// The pid of the process at the other end of the Unix socket `fd`, or 0.
uint32_t PeerPid(int fd) {
  if (fd < 0) return 0;
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid > 0 ? static_cast<uint32_t>(cred.pid) : 0;
}

}  // namespace

AttachPoint::AttachPoint(AttachPointOptions options) : options_(std::move(options)), context_(1) {}

AttachPoint::~AttachPoint() {
  if (holder_ && socket_) Send(*holder_, proto::Error{0, StatusCode::kCancelled, "server stopped"});
  if (socket_) {
    socket_.reset();
    unlink(IpcPath(options_.endpoint).c_str());  // the socket file
  }
}

Result<std::unique_ptr<AttachPoint>> AttachPoint::Bind(AttachPointOptions options) {
  std::unique_ptr<AttachPoint> p(new AttachPoint(std::move(options)));
  try {
    zmq::socket_t& s = p->socket_.emplace(p->context_, zmq::socket_type::router);
    s.set(zmq::sockopt::router_mandatory, 1);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::maxmsgsize, int64_t{64} << 20);
    s.bind(p->options_.endpoint);
  } catch (const zmq::error_t& e) {
    return UnavailableError("cannot bind the attach socket " + p->options_.endpoint + ": " +
                            e.what());
  }
  // As the control socket: this user's processes only (docs/security.md).
  chmod(IpcPath(p->options_.endpoint).c_str(), 0600);
  return p;
}

void AttachPoint::Send(const std::string& identity, const proto::Message& message) {
  send_buffer_.clear();
  proto::EncodeTo(message, send_buffer_);
  try {
    if (socket_->send(zmq::buffer(identity),
                      zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      (void)socket_->send(zmq::buffer(send_buffer_), zmq::send_flags::dontwait);
    }
  } catch (const zmq::error_t&) {
    // The peer is gone (EHOSTUNREACH): nothing to tell it.
  }
}

std::optional<AttachPoint::Received> AttachPoint::Receive(std::chrono::milliseconds wait) {
  while (true) {
    std::optional<RouterMessage> taken = TakeRouterMessage(*socket_);
    if (!taken) {
      if (wait.count() <= 0) return std::nullopt;
      zmq::pollitem_t item{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, wait);
      wait = std::chrono::milliseconds(0);
      continue;
    }
    if (taken->extra) continue;
    Received r;
    r.identity = taken->peer();
    Result<proto::Message> m = proto::Decode(taken->bytes());
    if (!m.ok()) {
      Send(r.identity, proto::Error{0, m.status().code(), m.status().message()});
      continue;
    }
    r.message = std::move(*m);
    r.peer_pid = PeerPid(taken->source_fd());
    return r;
  }
}

// A zombie (ended, not reaped) counts as gone (ProcessAlive).
bool AttachPoint::HolderAlive() const {
  return holder_pid_ == 0 || ProcessAlive(static_cast<int>(holder_pid_));
}

void AttachPoint::Detach(const std::string& why, bool warn) {
  if (!holder_) return;
  const std::string line = options_.ring_name + ": its attached producer (pid " +
                           std::to_string(holder_pid_) + ") " + why +
                           "; the server decodes the ring again";
  if (warn) {
    BC_LOG_WARN("{}", line);
  } else {
    BC_LOG_INFO("{}", line);
  }
  holder_.reset();
  holder_pid_ = 0;
  holder_ready_ = false;
  stats_pid_ = 0;
  ++stats_detached_;
}

void AttachPoint::Handle(const Received& r) {
  const bool from_holder = holder_ && r.identity == *holder_;
  if (const auto* a = std::get_if<proto::Attach>(&r.message)) {
    if (!options_.refusal.empty()) {
      Send(r.identity, proto::Error{0, StatusCode::kInvalidArgument, options_.refusal});
      return;
    }
    if (a->ring != options_.ring) {
      Send(r.identity,
           proto::Error{0, StatusCode::kInvalidArgument,
                        "this is the attach socket of ring " + std::to_string(options_.ring) +
                            ", not of ring " + std::to_string(a->ring)});
      return;
    }
    if (holder_ && !from_holder) {
      if (HolderAlive()) {
        Send(r.identity,
             proto::Error{0, StatusCode::kResourceExhausted,
                          options_.ring_name + " already has an attached producer (pid " +
                              std::to_string(holder_pid_) + ")"});
        return;
      }
      Detach("is gone", /*warn=*/true);
    }
    holder_ = r.identity;
    holder_pid_ = r.peer_pid != 0 ? r.peer_pid : a->pid;
    holder_ready_ = false;
    proto::Attached answer = options_.attached;
    if (options_.listing) answer.listing = options_.listing();
    Send(r.identity, answer);
    return;
  }
  if (!from_holder) {
    if (!std::holds_alternative<proto::Error>(r.message)) {
      Send(r.identity,
           proto::Error{0, StatusCode::kInvalidArgument, "not attached to " + options_.ring_name});
    }
    return;
  }
  if (std::holds_alternative<proto::Ready>(r.message)) {
    holder_ready_ = true;
    stats_pid_ = holder_pid_;
    BC_LOG_INFO("{}: decoded by the attached producer of pid {} from now on", options_.ring_name,
                holder_pid_);
  } else if (std::holds_alternative<proto::Bye>(r.message)) {
    Send(r.identity, proto::Bye{});  // the ring is free once the holder hears this
    Detach("left", /*warn=*/false);
  } else if (const auto* e = std::get_if<proto::Error>(&r.message)) {
    Detach("failed: " + e->message, /*warn=*/true);
  } else if (!std::holds_alternative<proto::Done>(r.message)) {  // a late DONE: ignored
    Send(r.identity, proto::Error{0, StatusCode::kInvalidArgument,
                                  std::string("an attached producer may not send ") +
                                      std::string(proto::MessageName(r.message))});
  }
}

void AttachPoint::Poll() {
  while (std::optional<Received> r = Receive(std::chrono::milliseconds(0))) Handle(*r);
  if (holder_ && !HolderAlive()) Detach("is gone", /*warn=*/true);
}

Result<std::optional<uint32_t>> AttachPoint::Delegate(const SlotGrant& grant, uint32_t epoch,
                                                      const ReadAhead& next,
                                                      std::vector<int64_t>& dropped) {
  if (cancelled_) return CancelledError("server stopped");
  if (!holder_ready_) return std::optional<uint32_t>();
  proto::Work work;
  work.slot = grant.slot;
  work.first_seq = grant.first_seq;
  work.epoch = epoch;
  work.indices.assign(grant.indices, grant.indices + grant.count);
  work.next.assign(next.indices.begin(), next.indices.end());
  work.next_epoch = next.epoch;
  work.next_guess = next.guess;
  Send(*holder_, work);
  const auto sent = Clock::now();
  auto next_warning = sent + options_.work_timeout;
  // The holder's process is looked at every kPollStep while it works, not
  // for every batch: a DONE within the first step needs no look.
  auto next_look = sent + kPollStep;
  while (true) {
    if (cancelled_) return CancelledError("server stopped");
    std::optional<Received> r = Receive(kPollStep);
    if (const auto now = Clock::now(); !r || now >= next_look) {
      next_look = now + kPollStep;
      if (!HolderAlive()) {
        Detach("is gone", /*warn=*/true);
        return std::optional<uint32_t>();
      }
      // A live holder may still write the slot, so it is waited for (the
      // server must not write the slot under it); the log names it.
      if (now >= next_warning) {
        BC_LOG_WARN(
            "{}: its attached producer (pid {}) has not answered a batch for {} s; ending "
            "that process gives the ring back to the server",
            options_.ring_name, holder_pid_,
            std::chrono::duration_cast<std::chrono::seconds>(now - sent).count());
        next_warning += options_.work_timeout;
      }
    }
    if (!r) continue;
    const auto* done = std::get_if<proto::Done>(&r->message);
    if (done == nullptr || !holder_ || r->identity != *holder_ ||
        done->first_seq != grant.first_seq || done->slot != grant.slot) {
      Handle(*r);
      if (!holder_ready_) return std::optional<uint32_t>();  // detached meanwhile
      continue;
    }
    // The samples written are the slot's, in its order (FillBatch compacts);
    // those passed over were dropped.
    const std::span<const int64_t> asked(work.indices);
    dropped.clear();
    size_t at = 0;
    for (int64_t index : done->indices) {
      while (at < asked.size() && asked[at] != index) dropped.push_back(asked[at++]);
      if (at == asked.size()) {
        Send(*holder_, proto::Error{0, StatusCode::kInvalidArgument,
                                    "detached: DONE names samples the slot does not hold"});
        Detach("answered with samples the slot does not hold", /*warn=*/true);
        return std::optional<uint32_t>();
      }
      ++at;
    }
    dropped.insert(dropped.end(), asked.begin() + static_cast<std::ptrdiff_t>(at), asked.end());
    std::copy(done->indices.begin(), done->indices.end(), grant.indices);
    ++stats_batches_;
    return std::optional<uint32_t>(static_cast<uint32_t>(done->indices.size()));
  }
}

}  // namespace batchcast
