// End-to-end tests of tcp:// security (Note [Transport
// security], core/src/curve_key.h): in-process servers and consumers (and the
// batchcast-server binary), each test in a runtime directory of its own.
//  - A tcp:// server is CURVE-protected by default; a consumer (and `stat`) of
//    the same user on the same machine finds the key without configuration.
//  - "Another node" (no user key there) connects with a copy of the key file:
//    key_file, $BATCHCAST_KEY_FILE, --key-file; without one it is told at once.
//  - A client holding another key is refused at once (PermissionDenied), well
//    before its connect timeout; so after `key --new` until the server restarts.
//  - Peers without the key (plain ZeroMQ, or CURVE with their own key pair)
//    get no answer at all, and cannot keep a consumer from its batches.
//  - Binding beyond loopback needs allow_remote; ipc:// endpoints are as before.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <zmq.hpp>

#include "batchcast/client/consumer.h"
#include "batchcast/server/server.h"
#include "core/src/curve_key.h"
#include "core/src/protocol.h"
#include "core/src/zmq_curve_ops.h"
#include "harness.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using namespace testing;  // the end-to-end harness (harness.h)

const CurveOps kOps = ZmqCurveOps();

// A synthetic server on tcp://127.0.0.1 (a free port), in this process.
std::unique_ptr<Server> StartTcp(const std::string& key_file = "") {
  ServerOptions o;
  o.name = UniqueName("curve");
  o.endpoint = "tcp://127.0.0.1:0";
  o.key_file = key_file;
  o.batch_size = 8;
  o.source.synthetic = 64;
  o.source.size = 4;
  auto s = Server::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

Result<std::unique_ptr<Consumer>> ConnectTo(const std::string& endpoint,
                                            const std::string& key_file = "") {
  ConsumerOptions o;
  o.endpoint = endpoint;
  o.batch_size = 8;
  o.timeout = 20s;
  o.connect_timeout = 20s;
  o.key_file = key_file;
  return Consumer::Connect(o);
}

// Reads one whole epoch (64 samples); their count.
int ReadEpoch(Consumer& c) {
  int samples = 0;
  while (true) {
    auto b = c.Next();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok() || b->end_of_epoch()) return samples;
    samples += static_cast<int>(b->size());
  }
}

// `batchcast-server ARGS...`: its exit code, stdout and stderr.
struct Ran {
  int rc;
  std::string out, err;
};
Ran RunServerBinary(const std::string& args) {
  const std::string dir = TempDir();
  Process p({"/bin/sh", "-c",
             std::string(BC_SERVER_BIN) + " " + args + " > " + dir + "/out 2> " + dir + "/err"});
  const int rc = p.Wait(20s);
  return {rc, ReadText(dir + "/out"), ReadText(dir + "/err")};
}

// Each test gets its own runtime directory (so its own user key).
class Curve : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kOps.available) << "this libzmq has no CURVE (libsodium)";
    if (const char* old = std::getenv("XDG_RUNTIME_DIR")) old_ = old;
    if (const char* env = std::getenv(kKeyFileVariable)) old_key_ = env;
    unsetenv(kKeyFileVariable);
    MoveToNewMachine();
  }
  void TearDown() override {
    Restore("XDG_RUNTIME_DIR", old_);
    Restore(kKeyFileVariable, old_key_);
  }
  // A fresh runtime directory: as a process on another machine sees it
  // (no user key there).
  void MoveToNewMachine() { setenv("XDG_RUNTIME_DIR", TempDir().c_str(), 1); }
  static void Restore(const char* var, const std::optional<std::string>& value) {
    if (value) {
      setenv(var, value->c_str(), 1);
    } else {
      unsetenv(var);
    }
  }
  std::optional<std::string> old_, old_key_;
};

// The default: the server makes the user's key (0600, in the 0700 runtime
// directory) and a consumer and `stat` of the same user find it.
TEST_F(Curve, SameUserSameMachineNeedsNoConfiguration) {
  auto server = StartTcp();
  ASSERT_TRUE(server);
  auto path = UserKeyPath();
  ASSERT_TRUE(path.ok());
  struct stat st {};
  ASSERT_EQ(stat(path->c_str(), &st), 0) << *path;
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto c = ConnectTo(server->endpoint());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ReadEpoch(**c), 64);
  auto stats = QueryStats(server->endpoint(), 3s);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(*stats)["refused_connections"], 0);
  const Ran st_cli = RunServerBinary("stat " + server->endpoint());
  EXPECT_EQ(st_cli.rc, 0) << st_cli.err;
  EXPECT_NE(st_cli.out.find("on " + server->endpoint()), std::string::npos) << st_cli.out;
  // `batchcast-server key` names the key the server uses.
  const Ran key = RunServerBinary("key");
  EXPECT_EQ(key.rc, 0) << key.err;
  EXPECT_EQ(key.out, *path + "\n");
}

// On another machine there is no user key: a consumer says so at once, and
// connects with a copy of the key file from the option or the environment.
TEST_F(Curve, AnotherMachineUsesACopyOfTheKeyFile) {
  auto server = StartTcp();
  ASSERT_TRUE(server);
  const std::string copy = TempDir() + "/server.key";
  std::filesystem::copy_file(*UserKeyPath(), copy);
  MoveToNewMachine();

  const double t0 = NowMs();
  auto none = ConnectTo(server->endpoint());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound) << none.status().ToString();
  EXPECT_NE(none.status().message().find("pass its key file"), std::string::npos)
      << none.status().message();
  EXPECT_EQ(QueryStats(server->endpoint(), 3s).status().code(), StatusCode::kNotFound);
  EXPECT_LT(NowMs() - t0, 1000);

  auto c = ConnectTo(server->endpoint(), copy);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ReadEpoch(**c), 64);
  EXPECT_TRUE(QueryStats(server->endpoint(), 3s, copy).ok());
  const Ran st_cli = RunServerBinary("stat " + server->endpoint() + " --key-file " + copy);
  EXPECT_EQ(st_cli.rc, 0) << st_cli.err;

  setenv(kKeyFileVariable, copy.c_str(), 1);
  auto by_env = ConnectTo(server->endpoint());
  ASSERT_TRUE(by_env.ok()) << by_env.status().ToString();
  EXPECT_EQ(ReadEpoch(**by_env), 64);

  // A missing file named by the option: NotFound naming it.
  auto missing = ConnectTo(server->endpoint(), copy + ".nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(copy + ".nope"), std::string::npos);
}

// A consumer holding another key is refused during the handshake and told so
// at once, not after its 20 s connect timeout; the server counts it.
TEST_F(Curve, AnotherKeyIsRefusedAtOnce) {
  auto server = StartTcp();
  ASSERT_TRUE(server);
  const std::string other = TempDir() + "/other.key";
  ASSERT_TRUE(WriteNewKeyFile(other, kOps).ok());
  const double t0 = NowMs();
  auto c = ConnectTo(server->endpoint(), other);
  ASSERT_FALSE(c.ok());
  EXPECT_LT(NowMs() - t0, 3000);
  EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied) << c.status().ToString();
  EXPECT_NE(c.status().message().find(other), std::string::npos) << c.status().message();
  EXPECT_EQ(QueryStats(server->endpoint(), 3s, other).status().code(),
            StatusCode::kPermissionDenied);
  const Ran st_cli = RunServerBinary("stat " + server->endpoint() + " --key-file " + other);
  EXPECT_EQ(st_cli.rc, 1);
  EXPECT_NE(st_cli.err.find("PermissionDenied"), std::string::npos) << st_cli.err;
}

// `key --new` replaces the user's key; a running server keeps the old one and
// refuses consumers holding the new one (saying why) until it restarts.
TEST_F(Curve, ANewKeyTakesEffectWhenTheServerRestarts) {
  auto server = StartTcp();
  ASSERT_TRUE(server);
  const std::string old_public = ReadKeyFile(*UserKeyPath(), kOps)->public_key;
  const Ran renew = RunServerBinary("key --new");
  ASSERT_EQ(renew.rc, 0) << renew.err;
  EXPECT_NE(ReadKeyFile(*UserKeyPath(), kOps)->public_key, old_public);
  auto refused = ConnectTo(server->endpoint());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("restart"), std::string::npos)
      << refused.status().message();
  server.reset();
  server = StartTcp();
  ASSERT_TRUE(server);
  auto c = ConnectTo(server->endpoint());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
}

// What a peer without the key gets: nothing. Plain ZeroMQ peers and CURVE
// peers with their own key pair (knowing the server's public key) send
// HELLO, STATS and NEXT floods; no message reaches them, and a consumer
// holding the key reads its epochs meanwhile.
TEST_F(Curve, PeersWithoutTheKeyGetNothingAndStallNobody) {
  auto server = StartTcp();
  ASSERT_TRUE(server);
  const std::string server_public = ReadKeyFile(*UserKeyPath(), kOps)->public_key;
  zmq::context_t ctx(1);
  std::vector<zmq::socket_t> peers;
  for (int i = 0; i < 20; ++i) {
    zmq::socket_t& s = peers.emplace_back(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    if (i % 2 == 1) {  // CURVE with a key pair of its own
      char pub[41], sec[41];
      ASSERT_EQ(zmq_curve_keypair(pub, sec), 0);
      s.set(zmq::sockopt::curve_serverkey, server_public);
      s.set(zmq::sockopt::curve_publickey, std::string(pub));
      s.set(zmq::sockopt::curve_secretkey, std::string(sec));
    }
    s.connect(server->endpoint());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> answers{0};
  std::thread attacker([&] {
    const proto::Hello hello{
        "intruder", static_cast<uint32_t>(getpid()), 8, true, JoinPolicy::kImmediate, 2, ""};
    const std::string frames[] = {proto::Encode(hello), proto::Encode(proto::Stats{}),
                                  proto::Encode(proto::Next{1})};
    while (!stop) {
      for (auto& s : peers) {
        for (const auto& f : frames) (void)s.send(zmq::buffer(f), zmq::send_flags::dontwait);
        zmq::message_t m;
        while (s.recv(m, zmq::recv_flags::dontwait)) ++answers;
      }
      std::this_thread::sleep_for(5ms);
    }
  });
  auto c = ConnectTo(server->endpoint());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const double t0 = NowMs();
  for (int epoch = 0; epoch < 3; ++epoch) EXPECT_EQ(ReadEpoch(**c), 64);
  const double elapsed = NowMs() - t0;
  std::this_thread::sleep_for(500ms);
  stop = true;
  attacker.join();
  EXPECT_EQ(answers, 0);
  EXPECT_LT(elapsed, 5000);
  auto st = nlohmann::json::parse(*QueryStats(server->endpoint(), 3s));
  EXPECT_EQ(st["consumers"].size(), 1u) << st.dump();  // the intruders never joined
  EXPECT_GE(st["refused_connections"].get<int>(), 10) << st.dump();
}

// A key file others may read, or one that is not a key file, is refused with
// what to do; so is key_file with an ipc:// endpoint.
TEST_F(Curve, BadKeyFilesAreRefusedWithAReason) {
  const std::string dir = TempDir();
  const std::string shared = dir + "/shared.key";
  ASSERT_TRUE(WriteNewKeyFile(shared, kOps).ok());
  ASSERT_EQ(chmod(shared.c_str(), 0644), 0);
  ServerOptions o;
  o.name = UniqueName("badkey");
  o.endpoint = "tcp://127.0.0.1:0";
  o.source.synthetic = 10;
  o.key_file = shared;
  auto s = Server::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kPermissionDenied) << s.status().ToString();
  EXPECT_NE(s.status().message().find("chmod 600"), std::string::npos) << s.status().message();
  EXPECT_EQ(ConnectTo("tcp://127.0.0.1:9", shared).status().code(), StatusCode::kPermissionDenied);

  const std::string garbage = dir + "/garbage.key";
  std::ofstream(garbage) << "not a key\n";
  ASSERT_EQ(chmod(garbage.c_str(), 0600), 0);
  o.key_file = garbage;
  s = Server::Start(o);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().ToString();

  o.endpoint = "";
  o.key_file = dir + "/any.key";
  s = Server::Start(o);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("key_file (--key-file) is for tcp://"), std::string::npos)
      << s.status().message();
  ConsumerOptions co;
  co.endpoint = "some-server";
  co.key_file = dir + "/any.key";
  EXPECT_EQ(Consumer::Connect(co).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(QueryStats("some-server", 1s, co.key_file).status().code(),
            StatusCode::kInvalidArgument);
}

// Binding beyond loopback needs allow_remote (--allow-remote), and the
// refusal says why; with it the server starts (still CURVE).
TEST_F(Curve, BindingBeyondLoopbackNeedsAllowRemote) {
  for (const char* endpoint : {"tcp://*:0", "tcp://0.0.0.0:0", "tcp://eth0:0"}) {
    const Ran r = RunServerBinary(std::string("serve --synthetic 10 --endpoint ") + endpoint);
    EXPECT_EQ(r.rc, 2) << endpoint;
    EXPECT_NE(r.err.find("accepts connections from other machines; pass allow_remote "
                         "(--allow-remote)"),
              std::string::npos)
        << r.err;
  }
  ServerOptions o;
  o.name = UniqueName("remote");
  o.endpoint = "tcp://0.0.0.0:0";
  o.source.synthetic = 64;
  o.source.size = 4;
  o.batch_size = 8;
  auto refused = Server::Start(o);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  o.allow_remote = true;
  auto s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::string port = (*s)->endpoint().substr((*s)->endpoint().rfind(':'));
  auto c = ConnectTo("tcp://127.0.0.1" + port);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ReadEpoch(**c), 64);
  // A raw peer gets nothing there either.
  zmq::context_t ctx(1);
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect("tcp://127.0.0.1" + port);
  (void)raw.send(zmq::buffer(proto::Encode(proto::Stats{})), zmq::send_flags::dontwait);
  zmq::pollitem_t item{raw.handle(), 0, ZMQ_POLLIN, 0};
  EXPECT_EQ(zmq::poll(&item, 1, 1000ms), 0);
}

// ipc:// (a server name) needs no key and makes none.
TEST_F(Curve, IpcEndpointsAreUnchanged) {
  ServerOptions o;
  o.name = UniqueName("ipc");
  o.source.synthetic = 64;
  o.source.size = 4;
  o.batch_size = 8;
  auto s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto c = ConnectTo(o.name);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ReadEpoch(**c), 64);
  struct stat st {};
  EXPECT_NE(stat(UserKeyPath()->c_str(), &st), 0);
}

}  // namespace
}  // namespace batchcast
