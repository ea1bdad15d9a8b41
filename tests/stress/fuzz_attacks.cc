#include "fuzz_attacks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iterator>
#include <span>
#include <thread>
#include <vector>

namespace batchcast::stress {
namespace {

using Ms = std::chrono::milliseconds;

zmq::socket_t Dealer(zmq::context_t& context, const FuzzTarget& target, FuzzTally& tally,
                     const std::string& routing_id = "") {
  zmq::socket_t s(context, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, 100000);
  if (!routing_id.empty()) s.set(zmq::sockopt::routing_id, routing_id);
  s.connect(target.endpoint);
  ++tally.connections;
  return s;
}

void Send(zmq::socket_t& s, const std::string& frame, FuzzTally& tally, bool more = false) {
  try {
    const auto flags =
        more ? zmq::send_flags::sndmore | zmq::send_flags::dontwait : zmq::send_flags::dontwait;
    if (s.send(zmq::buffer(frame), flags)) {
      ++tally.frames;
      tally.bytes += frame.size();
    }
  } catch (const zmq::error_t&) {
    // A full queue or a dropped connection: the attack goes on regardless.
  }
}

// Receives what the server sent within `ms`; the lease ids of BATCH replies
// go to *leases. Returns the number of NEXT answers (BATCH, END_OF_EPOCH,
// ERROR to a request).
int Drain(zmq::socket_t& s, FuzzTally& tally, int ms, std::vector<uint64_t>* leases = nullptr,
          bool* welcomed = nullptr) {
  int answers = 0;
  const auto until = std::chrono::steady_clock::now() + Ms(ms);
  do {
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, Ms(std::max(0, std::min(ms, 5))));
    zmq::message_t msg;
    while (s.recv(msg, zmq::recv_flags::dontwait)) {
      Result<proto::Message> m =
          proto::Decode({static_cast<const uint8_t*>(msg.data()), msg.size()});
      if (!m.ok()) continue;
      if (std::holds_alternative<proto::Welcome>(*m)) {
        ++tally.welcomes;
        if (welcomed != nullptr) *welcomed = true;
      } else if (auto* b = std::get_if<proto::Batch>(&*m)) {
        ++tally.batches;
        ++answers;
        if (leases != nullptr && b->lease_id != 0) leases->push_back(b->lease_id);
      } else if (auto* e = std::get_if<proto::Error>(&*m)) {
        ++tally.errors;
        if (e->request_id != 0) ++answers;
      } else if (std::holds_alternative<proto::EndOfEpoch>(*m)) {
        ++answers;
      }
    }
  } while (std::chrono::steady_clock::now() < until);
  return answers;
}

void Frames(zmq::context_t& ctx, const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  zmq::socket_t s = Dealer(ctx, t, tally);
  for (uint64_t n = fz.U(50, 500), i = 0; i < n; ++i) {
    Send(s, fz.Any(), tally);
    if (i % 50 == 49) Drain(s, tally, 0);
  }
  Drain(s, tally, 20);
}

void Flood(zmq::context_t& ctx, const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  zmq::socket_t s = Dealer(ctx, t, tally);
  const uint64_t kind = fz.U(0, 3);
  const uint64_t n = kind == 3 ? fz.U(100, 2000) : fz.U(1000, 20000);
  for (uint64_t i = 0; i < n; ++i) {
    // The same kind of message n times: NEXT (rising request ids), HEARTBEAT,
    // RELEASE of forged lease ids or STATS.
    const proto::Message m = kind == 0   ? proto::Message(proto::Next{i + 1, {}})
                             : kind == 1 ? proto::Message(proto::Heartbeat{})
                             : kind == 2 ? proto::Message(proto::Release{fz.LeaseIds()})
                                         : proto::Message(proto::Stats{});
    Send(s, proto::Encode(m), tally);
    if (i % 500 == 499) Drain(s, tally, 0);
  }
  Drain(s, tally, 50);
}

void Multipart(zmq::context_t& ctx, const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  zmq::socket_t s = Dealer(ctx, t, tally);
  for (uint64_t m = fz.U(1, 20); m > 0; --m) {
    const uint64_t parts = fz.U(2, 6);
    for (uint64_t p = 0; p < parts; ++p)
      Send(s, fz.OneIn(2) ? fz.Valid() : fz.Any(), tally, p + 1 < parts);
  }
  Drain(s, tally, 20);
}

void Oversized(zmq::context_t& ctx, const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  zmq::socket_t s = Dealer(ctx, t, tally);
  const size_t bytes = t.huge_bytes > 0 && fz.OneIn(10) ? t.huge_bytes : (1 << 20) + fz.U(1, 4096);
  std::string frame = proto::Encode(proto::Release{{1, 2, 3}});
  frame.resize(bytes, '\x01');
  Send(s, frame, tally);
  Drain(s, tally, 50);
}

// Some of `ids` (moved out of it).
std::vector<uint64_t> TakeSome(std::vector<uint64_t>& ids, FrameFuzzer& fz) {
  std::vector<uint64_t> out;
  for (size_t n = fz.U(0, ids.size()); n > 0; --n) {
    out.push_back(ids.back());
    ids.pop_back();
  }
  return out;
}

void Session(zmq::context_t& ctx, const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally,
             bool may_hold) {
  zmq::socket_t s = Dealer(ctx, t, tally);
  proto::Hello hello = fz.Hello();
  if (fz.OneIn(2)) {  // a HELLO the server accepts
    hello.batch_size = static_cast<uint32_t>(fz.U(1, 32));
    hello.prefetch = static_cast<uint16_t>(fz.U(1, 4));
    hello.device = "";
  }
  Send(s, proto::Encode(hello), tally);
  bool joined = false;
  std::vector<uint64_t> mine;
  Drain(s, tally, 300, &mine, &joined);
  uint64_t request = 1;
  int in_flight = 0;
  for (uint64_t steps = fz.U(5, 100); steps > 0; --steps) {
    switch (fz.U(0, 9)) {
      case 0:
      case 1:
      case 2:
      case 3: {
        std::vector<uint64_t> releases = fz.OneIn(2) ? TakeSome(mine, fz) : fz.LeaseIds();
        Send(s, proto::Encode(proto::Next{request++, std::move(releases)}), tally);
        ++in_flight;
        break;
      }
      case 4:
        Send(s, proto::Encode(proto::Release{fz.LeaseIds()}), tally);
        break;
      case 5:
        Send(s, proto::Encode(proto::Release{TakeSome(mine, fz)}), tally);
        break;
      case 6:
        Send(s, proto::Encode(proto::Heartbeat{}), tally);
        break;
      case 7:
        Send(s, proto::Encode(proto::Bye{fz.LeaseIds()}), tally);
        break;
      case 8:
        Send(s, fz.Any(), tally);
        break;
      default:
        Send(s, proto::Encode(proto::Stats{}), tally);
        break;
    }
    in_flight -= Drain(s, tally, 2, &mine);
  }
  if (!joined) return;
  const uint64_t end = fz.U(0, may_hold ? 2 : 0);
  if (end == 2) {  // keep the batches, say nothing more: dropped at heartbeat_timeout
    std::this_thread::sleep_for(Ms(fz.U(100, 1500)));
    return;
  }
  for (int i = 0; i < 20 && in_flight > 0; ++i) in_flight -= Drain(s, tally, 10, &mine);
  Send(s, proto::Encode(proto::Release{mine}), tally);
  if (end == 0) Send(s, proto::Encode(proto::Bye{}), tally);
  Drain(s, tally, 20);
}

void Churn(zmq::context_t& ctx, const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  std::vector<zmq::socket_t> sockets;
  for (uint64_t n = fz.U(10, static_cast<uint64_t>(std::max(10, t.max_connections))); n > 0; --n) {
    sockets.push_back(Dealer(ctx, t, tally));
    if (fz.OneIn(4)) continue;  // connect and say nothing
    proto::Hello hello;
    hello.name = fz.Name();
    hello.pid = static_cast<uint32_t>(getpid());
    hello.batch_size = static_cast<uint32_t>(fz.U(1, 64));
    Send(sockets.back(), fz.OneIn(3) ? fz.Any() : proto::Encode(hello), tally);
  }
  std::this_thread::sleep_for(Ms(fz.U(50, 300)));
  for (zmq::socket_t& s : sockets) Drain(s, tally, 0);
}

// The 64-byte ZMTP 3.0 greeting of a NULL-mechanism peer.
std::string ZmtpGreeting() {
  std::string g(64, '\0');
  g[0] = '\xff';
  g[9] = '\x7f';
  g[10] = 3;
  std::memcpy(&g[12], "NULL", 4);
  return g;
}

// A stream socket connected to the server's endpoint, or -1.
int ConnectStream(const FuzzTarget& t) {
  int fd = -1;
  if (t.endpoint.starts_with("ipc://")) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = t.endpoint.substr(6);
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      fd = -1;
    }
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port =
        htons(static_cast<uint16_t>(std::stoi(t.endpoint.substr(t.endpoint.rfind(':') + 1))));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      fd = -1;
    }
  }
  return fd;
}

void Raw(const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  const int fd = ConnectStream(t);
  if (fd < 0) return;
  ++tally.connections;
  std::string bytes = fz.OneIn(2) ? ZmtpGreeting() + fz.Random(2048) : fz.Random(4096);
  if (fz.OneIn(4)) {  // greeting, then a frame header declaring 2^62 bytes
    bytes = ZmtpGreeting() + std::string("\x02\x40\x00\x00\x00\x00\x00\x00\x00", 9);
  }
  const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  if (n > 0) tally.bytes += static_cast<uint64_t>(n);
  std::this_thread::sleep_for(Ms(fz.U(0, 20)));
  close(fd);
}

void Identity(zmq::context_t& ctx, const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  std::string id = fz.Random(32);
  if (id.empty() || id[0] == '\0') id = "\x01" + id;  // ids starting with 0 are the ROUTER's
  try {
    zmq::socket_t s = Dealer(ctx, t, tally, id);
    for (uint64_t n = fz.U(1, 20); n > 0; --n) {
      const proto::Message m =
          fz.OneIn(2) ? proto::Message(proto::Release{fz.LeaseIds()}) : fz.ValidMessage();
      Send(s, proto::Encode(m), tally);
    }
    Drain(s, tally, 20);
  } catch (const zmq::error_t&) {
    // libzmq refused the routing id: nothing was sent.
  }
}

void Hellos(zmq::context_t& ctx, const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  std::vector<zmq::socket_t> sockets;
  for (uint64_t n = fz.U(50, 150); n > 0; --n) sockets.push_back(Dealer(ctx, t, tally));
  proto::Hello hello;
  hello.name = "repeater";
  hello.pid = static_cast<uint32_t>(getpid());
  hello.batch_size = static_cast<uint32_t>(fz.U(1, 64));
  const std::string frame = proto::Encode(hello);
  for (uint64_t rounds = fz.U(3, 30); rounds > 0; --rounds) {
    for (zmq::socket_t& s : sockets) {
      Send(s, frame, tally);
      Drain(s, tally, 0);
    }
    std::this_thread::sleep_for(Ms(fz.U(5, 50)));
  }
}

void StatsFromMany(zmq::context_t& ctx, const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  std::vector<zmq::socket_t> sockets;
  for (uint64_t n = fz.U(100, 300); n > 0; --n) sockets.push_back(Dealer(ctx, t, tally));
  const std::string frame = proto::Encode(proto::Stats{});
  for (uint64_t rounds = fz.U(1, 5); rounds > 0; --rounds) {
    for (zmq::socket_t& s : sockets) {
      Send(s, frame, tally);
      Drain(s, tally, 0);
    }
  }
  std::this_thread::sleep_for(Ms(fz.U(10, 100)));
  for (zmq::socket_t& s : sockets) Drain(s, tally, 0);
}

void Hold(const FuzzTarget& t, FrameFuzzer& fz, FuzzTally& tally) {
  std::vector<int> fds;
  for (uint64_t n = fz.U(10, static_cast<uint64_t>(std::max(10, t.max_connections))); n > 0; --n) {
    const int fd = ConnectStream(t);
    if (fd < 0) break;
    ++tally.connections;
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(Ms(fz.U(100, 1500)));
  for (int fd : fds) close(fd);
}

// Every attack as RunAttack calls it.
using AttackFn = void (*)(zmq::context_t& context, const FuzzTarget& target, FrameFuzzer& fuzzer,
                          FuzzTally& tally, bool may_hold);

// An attack over ZeroMQ connections of the context, that never holds.
template <void (*Run)(zmq::context_t&, const FuzzTarget&, FrameFuzzer&, FuzzTally&)>
void OverZmq(zmq::context_t& context, const FuzzTarget& target, FrameFuzzer& fuzzer,
             FuzzTally& tally, bool /*may_hold*/) {
  Run(context, target, fuzzer, tally);
}

// An attack over raw stream sockets of its own.
template <void (*Run)(const FuzzTarget&, FrameFuzzer&, FuzzTally&)>
void OverStreams(zmq::context_t& /*context*/, const FuzzTarget& target, FrameFuzzer& fuzzer,
                 FuzzTally& tally, bool /*may_hold*/) {
  Run(target, fuzzer, tally);
}

// Each attack's name and code, in Attack's order.
struct AttackEntry {
  const char* name;
  AttackFn run;
};
constexpr AttackEntry kAttacks[] = {{"frames", OverZmq<Frames>},
                                    {"flood", OverZmq<Flood>},
                                    {"multipart", OverZmq<Multipart>},
                                    {"oversized", OverZmq<Oversized>},
                                    {"session", Session},
                                    {"churn", OverZmq<Churn>},
                                    {"raw", OverStreams<Raw>},
                                    {"identity", OverZmq<Identity>},
                                    {"hellos", OverZmq<Hellos>},
                                    {"stats", OverZmq<StatsFromMany>},
                                    {"hold", OverStreams<Hold>}};
static_assert(std::size(kAttacks) == static_cast<size_t>(Attack::kCount));

}  // namespace

const char* AttackName(Attack attack) { return kAttacks[static_cast<size_t>(attack)].name; }

void RunAttack(Attack attack, zmq::context_t& context, const FuzzTarget& target,
               FrameFuzzer& fuzzer, FuzzTally& tally, bool may_hold) {
  ++tally.attacks[static_cast<size_t>(attack)];
  kAttacks[static_cast<size_t>(attack)].run(context, target, fuzzer, tally, may_hold);
}

}  // namespace batchcast::stress
