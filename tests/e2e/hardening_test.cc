// End-to-end tests of what no input may do to a server: real
// server processes, hostile peers over the real socket, kill -9.
//  - A consumer name or a dataset folder that is not UTF-8 (or holds a
//    newline) never ends the server; names are escaped in logs and stats.
//  - Bad options and odd trees exit with a message (1 or 2), never abort or
//    hang; SIGTERM still stops a server whose list named a FIFO.
//  - After kill -9, a consumer of the dead server is told at once, and the
//    next server (of any name) reclaims the dead one's ring and socket.
//  - Silent HELLOs cannot keep consumers out; STATS floods are bounded;
//    connection churn does not grow the server's memory.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <zmq.hpp>

#include "../core/runtime_dir_fixture.h"
#include "../image/test_jpegs.h"
#include "batchcast/client/consumer.h"
#include "batchcast/server/server.h"
#include "batchcast/sources/synthetic_source.h"
#include "core/src/protocol.h"
#include "core/src/runtime_dir.h"
#include "harness.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using namespace testing;  // the end-to-end harness (harness.h)

const std::string kForged = "[00:00:00.000] [batchcast] [error] forged";

// `batchcast-server serve ARGS...` with stderr to `log`.
std::unique_ptr<Process> Serve(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {BC_SERVER_BIN, "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<Process>(argv, log);
}

// `serve --name NAME EXTRA...` over synthetic data, with defaults for what
// EXTRA leaves out (--synthetic 1000000 --size 4 --batch-size 16
// --status-interval 0); waits until it answers when it serves by name.
std::unique_ptr<Process> ServeSynthetic(const std::string& name,
                                        const std::vector<std::string>& extra = {},
                                        const std::string& log = TempDir() + "/server.log") {
  std::vector<std::string> args = {"--name", name};
  for (const auto& [flag, value] : {std::pair<std::string, std::string>{"--synthetic", "1000000"},
                                    {"--size", "4"},
                                    {"--batch-size", "16"},
                                    {"--status-interval", "0"}}) {
    if (std::find(extra.begin(), extra.end(), flag) == extra.end()) {
      args.insert(args.end(), {flag, value});
    }
  }
  args.insert(args.end(), extra.begin(), extra.end());
  auto p = Serve(args, log);
  if (std::find(extra.begin(), extra.end(), "--endpoint") == extra.end()) WaitForServer(name);
  return p;
}

// Waits until a server answers at `endpoint`.
void WaitForEndpoint(const std::string& endpoint) {
  for (int i = 0; i < 500 && !QueryStats(endpoint, 200ms).ok(); ++i) {
    std::this_thread::sleep_for(20ms);
  }
}

// A raw peer: a DEALER on the server's socket that says what a test wants.
class Peer {
 public:
  Peer(zmq::context_t& ctx, const std::string& endpoint) : socket_(ctx, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.connect(endpoint);
  }
  void Send(const proto::Message& m) {
    socket_.send(zmq::buffer(proto::Encode(m)), zmq::send_flags::dontwait);
  }
  // The next message within `timeout`, or nullopt.
  std::optional<proto::Message> Receive(std::chrono::milliseconds timeout) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) <= 0) return std::nullopt;
    zmq::message_t msg;
    if (!socket_.recv(msg, zmq::recv_flags::dontwait)) return std::nullopt;
    auto m = proto::Decode({static_cast<const uint8_t*>(msg.data()), msg.size()});
    if (!m.ok()) return std::nullopt;
    return std::move(*m);
  }
  // The next message that is not a HEARTBEAT.
  std::optional<proto::Message> ReceiveReply(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto m = Receive(std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now()));
      if (m && !std::holds_alternative<proto::Heartbeat>(*m)) return m;
    }
    return std::nullopt;
  }

 private:
  zmq::socket_t socket_;
};

proto::Hello HelloNamed(const std::string& name, uint32_t batch = 16) {
  return proto::Hello{name, static_cast<uint32_t>(getpid()), batch, true, JoinPolicy::kImmediate, 2,
                      ""};
}

std::string Endpoint(const std::string& name) {
  auto e = ResolveEndpoint(name);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : "";
}

std::string RingFile(const std::string& name) { return "/dev/shm/" + HostRingShmName(name); }

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

std::unique_ptr<Consumer> Connect(const std::string& endpoint, uint32_t batch = 16) {
  ConsumerOptions o;
  o.endpoint = endpoint;
  o.batch_size = batch;
  o.timeout = 20s;
  auto c = Consumer::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// `batchcast-server stat NAME`: its exit code and stdout.
std::pair<int, std::string> StatCommand(const std::string& name) {
  const std::string out = TempDir() + "/stat.out";
  Process p({"/bin/sh", "-c", std::string(BC_SERVER_BIN) + " stat '" + name + "' > " + out});
  const int rc = p.Wait(10s);
  return {rc, ReadText(out)};
}

// Each test runs its servers and consumers in a runtime directory of its own
// (XDG_RUNTIME_DIR, inherited by the processes it starts), so that what other
// tests run at the same time start, kill or reclaim never meets its own.
class Hardening : public testing::RuntimeDirTest {};

// ---- No input ends the server ----

TEST_F(Hardening, ANameThatIsNotUtf8OrForgesALineIsHarmless) {
  const std::string name = UniqueName("names");
  const std::string log = TempDir() + "/server.log";
  auto server = ServeSynthetic(name, {"--status-interval", "0.05"}, log);
  zmq::context_t ctx;
  Peer evil(ctx, Endpoint(name));
  evil.Send(HelloNamed("\xff\xfe evil\n" + kForged + "\x1b[2J"));
  auto welcome = evil.ReceiveReply(5s);
  ASSERT_TRUE(welcome && std::holds_alternative<proto::Welcome>(*welcome));
  evil.Send(proto::Heartbeat{});
  // STATS from that peer: valid JSON (the parser checks UTF-8), the name escaped.
  evil.Send(proto::Stats{});
  auto reply = evil.ReceiveReply(5s);
  ASSERT_TRUE(reply && std::holds_alternative<proto::StatsReply>(*reply));
  const nlohmann::json st = nlohmann::json::parse(std::get<proto::StatsReply>(*reply).json);
  ASSERT_EQ(st["consumers"].size(), 1u) << st.dump();
  const std::string shown = st["consumers"][0]["name"];
  EXPECT_EQ(shown, "\\xff\\xfe evil\\n" + kForged + "\\x1b[2J");
  // The status line and `stat` run over it; the server serves on.
  std::this_thread::sleep_for(300ms);
  auto [rc, out] = StatCommand(name);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\\xff\\xfe evil\\n[00:00"), std::string::npos) << out;
  auto good = Connect(name);
  ASSERT_TRUE(good);
  EXPECT_TRUE(good->Next().ok());
  good.reset();
  server->Kill(SIGTERM);
  EXPECT_EQ(server->Wait(10s), 0);
  const std::string text = ReadText(log);
  EXPECT_NE(text.find("samples/s"), std::string::npos) << "no status line:\n" << text;
  EXPECT_EQ(text.find("\n" + kForged), std::string::npos) << "a forged log line:\n" << text;
  EXPECT_NE(text.find("evil\\n" + kForged), std::string::npos) << text;
}

TEST_F(Hardening, ADatasetFolderThatIsNotUtf8IsServed) {
  const std::string root = TempDir() + "/data\xff\xfe";
  ASSERT_EQ(mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((root + "/cl\xe9").c_str(), 0700), 0);
  for (int i = 0; i < 8; ++i) {
    const auto jpeg = image::testing::EncodeJpeg(image::testing::TexturedRgb(24, 20, i + 1), 90);
    std::ofstream(root + "/cl\xe9/" + std::to_string(i) + ".jpg", std::ios::binary)
        .write(reinterpret_cast<const char*>(jpeg.data()),
               static_cast<std::streamsize>(jpeg.size()));
  }
  const std::string name = UniqueName("nonutf8");
  const std::string log = TempDir() + "/server.log";
  auto server = Serve({root, "--size", "8", "--batch-size", "4", "--workers", "1", "--name", name,
                       "--status-interval", "0.05"},
                      log);
  const nlohmann::json st = WaitForServer(name);
  ASSERT_TRUE(st.contains("source")) << ReadText(log);
  EXPECT_NE(st["source"].get<std::string>().find("data\xef\xbf\xbd\xef\xbf\xbd"), std::string::npos)
      << st["source"];  // each invalid byte shown as U+FFFD
  auto c = Connect(name, 4);
  ASSERT_TRUE(c);
  int samples = 0;
  testing::ForEachBatchOfEpoch(c.get(),
                               [&](const Batch& b) { samples += static_cast<int>(b.size()); });
  EXPECT_EQ(samples, 8);
  std::this_thread::sleep_for(200ms);  // status lines
  EXPECT_EQ(StatCommand(name).first, 0);
  c.reset();
  server->Kill(SIGTERM);
  EXPECT_EQ(server->Wait(10s), 0) << ReadText(log);
}

// Synthetic samples; some throw on a worker thread, or every FillBatch throws
// on the producer thread, or description() or counters() throws.
class ThrowingSource : public SyntheticSource {
 public:
  enum class Where { kWorker, kProducer, kDescription, kCounters };
  explicit ThrowingSource(Where where) : SyntheticSource(100000, 4, 3), where_(where) {}
  Result<SampleFill> FillSample(int worker, uint32_t epoch, int64_t index,
                                std::span<uint8_t* const> out) override {
    if (where_ == Where::kWorker && index % 7 == 3) throw std::runtime_error("boom in a worker");
    return SyntheticSource::FillSample(worker, epoch, index, out);
  }
  Result<uint32_t> FillBatch(const SlotView& slot, const ReadAhead& next) override {
    if (where_ == Where::kProducer) throw std::runtime_error("boom in FillBatch");
    return SyntheticSource::FillBatch(slot, next);
  }
  std::string description() const override {
    if (where_ == Where::kDescription) throw std::logic_error("boom in description");
    return SyntheticSource::description();
  }
  std::vector<std::pair<std::string, int64_t>> counters() const override {
    if (where_ == Where::kCounters) throw std::logic_error("boom in counters");
    return {};
  }

 private:
  const Where where_;
};

// An exception in a source, on the producer thread or a worker, stops the
// server with an Internal error (consumers are told it, with the reason),
// never the process; one
// at start fails Start; one in what the stats read is reported in the stats.
TEST_F(Hardening, AnExceptionInASourceStopsTheServerNotTheProcess) {
  for (auto where : {ThrowingSource::Where::kWorker, ThrowingSource::Where::kProducer}) {
    ServerOptions o;
    o.name = UniqueName("throws");
    o.batch_size = 16;
    auto server = Server::Start(o, std::make_unique<ThrowingSource>(where));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    auto c = Connect((*server)->endpoint());
    ASSERT_TRUE(c);
    Status got;
    for (int i = 0; i < 100 && got.ok(); ++i) got = c->Next().status();
    // The consumer is told the server stopped, and why.
    EXPECT_EQ(got.code(), StatusCode::kUnavailable) << got.ToString();
    EXPECT_NE(got.message().find("stopped: unexpected exception"), std::string::npos)
        << got.ToString();
    EXPECT_NE(got.message().find("boom"), std::string::npos) << got.ToString();
    ASSERT_TRUE((*server)->WaitFor(10s));
    const Status s = (*server)->status();
    EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
    EXPECT_NE(
        s.message().find(where == ThrowingSource::Where::kWorker
                             ? "unexpected exception in a worker thread: boom in a worker"
                             : "unexpected exception in the producer thread: boom in FillBatch"),
        std::string::npos)
        << s.message();
  }
  ServerOptions o;
  o.name = UniqueName("throws");
  auto refused =
      Server::Start(o, std::make_unique<ThrowingSource>(ThrowingSource::Where::kDescription));
  EXPECT_EQ(refused.status().code(), StatusCode::kInternal);
  EXPECT_NE(refused.status().message().find("Server::Start: boom in description"),
            std::string::npos)
      << refused.status().message();
  auto server =
      Server::Start(o, std::make_unique<ThrowingSource>(ThrowingSource::Where::kCounters));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto st = nlohmann::json::parse(*QueryStats(o.name, 2s));
  EXPECT_NE(st.value("error", "").find("boom in counters"), std::string::npos) << st.dump();
  EXPECT_EQ(StatCommand(o.name).first, 1) << "stat says the server could not make its stats";
}

// ---- Bad options and odd trees: a message and exit 1/2 ----

TEST_F(Hardening, BadOptionsAndOddTreesExitWithAMessage) {
  const std::string dir = TempDir();
  ASSERT_EQ(mkdir((dir + "/loops").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir + "/loops/c").c_str(), 0700), 0);
  ASSERT_EQ(symlink("..", (dir + "/loops/c/up").c_str()), 0);
  ASSERT_EQ(symlink("self", (dir + "/loops/c/self").c_str()), 0);
  ASSERT_EQ(mkfifo((dir + "/list.tsv").c_str(), 0600), 0);
  const std::string huge = UniqueName("huge");
  struct Case {
    std::vector<std::string> args;
    int rc;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--synthetic", "-5"}, 2, "synthetic"},
      {{"--synthetic", "10", "--epochs", "-1"}, 2, "epochs (--epochs)"},
      {{"--synthetic", "10", "--device", "cuda:99999999999"}, 2, "device"},
      {{"--synthetic", "10", "--device", "cuda:4294967297"}, 2, "device"},
      {{"--synthetic", "10", "--endpoint", "tcp://127.0.0.1:99999"}, 2, "1..65535"},
      {{"--synthetic", "10", "--endpoint", "inproc://x"}, 2, "inproc://"},
      {{"--synthetic", "10", "--status-interval", "-1"}, 2, "--status-interval"},
      {{"--synthetic", "10", "--status-interval", "nan"}, 2, "--status-interval"},
      {{"--synthetic", "10", "--status-interval", "1e300"}, 2, "--status-interval"},
      {{"--synthetic", "10", "--min-consumers", "3", "--max-consumers", "2"},
       2,
       "min_consumers (--min-consumers) is 3 but max_consumers (--max-consumers) is 2"},
      {{"--synthetic", "18446744073709551615"}, 1, "is too large"},
      {{"--synthetic", "10", "--size", "1024", "--batch-size", "4096", "--window", "64", "--name",
        huge},
       1,
       "/dev/shm has"},
      {{dir + "/loops"}, 1, "holds no image files"},
      {{dir + "/list.tsv"}, 1, "it is a FIFO"},
      {{dir + "/missing"}, 1, "does not exist"},
  };
  for (const Case& c : cases) {
    const std::string log = dir + "/err.log";
    std::vector<std::string> args = c.args;
    if (std::find(args.begin(), args.end(), "--name") == args.end()) {
      args.insert(args.end(), {"--name", UniqueName("bad")});
    }
    auto p = Serve(args, log);
    const int rc = p->Wait(20s);
    const std::string err = ReadText(log);
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    EXPECT_EQ(rc, c.rc) << joined << "\n" << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << joined << "\n" << err;
    EXPECT_EQ(err.find("terminate"), std::string::npos) << err;
    EXPECT_EQ(err.find("serving"), std::string::npos) << "said it serves, then failed: " << err;
  }
  EXPECT_FALSE(Exists(RingFile(huge))) << "a refused ring is left in /dev/shm";
}

TEST_F(Hardening, AFifoInTheListIsSkippedAndSigtermStillStops) {
  const std::string dir = TempDir();
  std::string list;
  for (int i = 0; i < 6; ++i) {
    const auto jpeg = image::testing::EncodeJpeg(image::testing::TexturedRgb(16, 16, i + 1), 90);
    std::ofstream(dir + "/" + std::to_string(i) + ".jpg", std::ios::binary)
        .write(reinterpret_cast<const char*>(jpeg.data()),
               static_cast<std::streamsize>(jpeg.size()));
    list += std::to_string(i) + ".jpg\t0\n";
  }
  ASSERT_EQ(mkfifo((dir + "/pipe.jpg").c_str(), 0600), 0);
  list += "pipe.jpg\t1\n";
  std::ofstream(dir + "/list.tsv") << list;
  const std::string name = UniqueName("fifo");
  const std::string log = dir + "/server.log";
  auto server = Serve({dir + "/list.tsv", "--size", "8", "--batch-size", "2", "--name", name,
                       "--status-interval", "0"},
                      log);
  const nlohmann::json st = WaitForServer(name, 20s);
  EXPECT_EQ(st["epoch_len"], 6) << ReadText(log);
  EXPECT_NE(ReadText(log).find("it is a FIFO"), std::string::npos);
  server->Kill(SIGTERM);
  EXPECT_EQ(server->Wait(10s), 0);
}

TEST_F(Hardening, TcpPortZeroReportsThePortItGot) {
  const std::string name = UniqueName("tcp0");
  const std::string log = TempDir() + "/server.log";
  auto server = ServeSynthetic(name, {"--endpoint", "tcp://127.0.0.1:0"}, log);
  std::string endpoint;
  for (int i = 0; i < 500 && endpoint.empty(); ++i) {
    const std::string text = ReadText(log);
    const std::string prefix = " on tcp://127.0.0.1:";
    const size_t at = text.find(prefix);
    if (at != std::string::npos) {
      const size_t digits = at + prefix.size();
      const size_t end = text.find_first_not_of("0123456789", digits);
      endpoint = text.substr(at + 4, end - at - 4);
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_FALSE(endpoint.empty()) << ReadText(log);
  EXPECT_NE(endpoint, "tcp://127.0.0.1:0");
  auto c = Connect(endpoint, 8);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->Next().ok());
  auto st = nlohmann::json::parse(*c->Stats());
  EXPECT_EQ(st["endpoint"], endpoint);
}

TEST_F(Hardening, AClientPathThatCannotBeExaminedIsAStatus) {
  const std::string dir = TempDir();
  ASSERT_EQ(symlink("loop", (dir + "/loop").c_str()), 0);
  ConsumerOptions o;
  o.endpoint = "ipc://" + dir + "/loop/x.sock";
  auto c = Consumer::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().ToString();
  EXPECT_NE(c.status().message().find("cannot reach"), std::string::npos) << c.status().message();
  EXPECT_EQ(QueryStats(o.endpoint, 1s).status().code(), StatusCode::kUnavailable);
  // Another user's runtime directory (0700): as root, ask as nobody.
  if (getuid() != 0) return;
  Result<std::string> runtime = RuntimeDir();
  ASSERT_TRUE(runtime.ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    ConsumerOptions theirs;
    theirs.endpoint = "ipc://" + *runtime + "/someone.sock";
    auto r = Consumer::Connect(theirs);
    _exit(r.ok()
              ? 101
              : static_cast<int>(r.status().code()) +
                    (r.status().message().find("Permission denied") != std::string::npos ? 10 : 0));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the client died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 10 + static_cast<int>(StatusCode::kUnavailable));
}

// ---- kill -9: consumers told at once, litter reclaimed ----

TEST_F(Hardening, AKilledServerIsReportedAtOnceAndItsFilesReclaimed) {
  const std::string dead = UniqueName("dead");
  const std::string dir = TempDir();
  auto server = ServeSynthetic(dead, {}, dir + "/dead.log");
  {
    auto c = Connect(dead);
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->Next().ok());
  }
  const std::string socket = Endpoint(dead).substr(6);
  const Result<std::string> lock = LockPath(dead);
  ASSERT_TRUE(lock.ok());
  server->Kill(SIGKILL);
  server->Wait();
  ASSERT_TRUE(Exists(RingFile(dead)));
  ASSERT_TRUE(Exists(socket));

  // (a) A consumer of the dead name learns at once.
  const double t0 = NowMs();
  ConsumerOptions o;
  o.endpoint = dead;
  auto c = Consumer::Connect(o);
  EXPECT_LT(NowMs() - t0, 1000);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("'" + dead + "' is not running"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find(std::to_string(server->pid())), std::string::npos)
      << c.status().message();
  auto st = QueryStats(dead, 3s);
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(NowMs() - t0, 1500);

  // Over an explicit ipc:// path too.
  const std::string path = "ipc://" + dir + "/explicit.sock";
  const std::string other = UniqueName("explicit");
  auto server2 = ServeSynthetic(other, {"--endpoint", path}, dir + "/explicit.log");
  WaitForEndpoint(path);
  server2->Kill(SIGKILL);
  server2->Wait();
  const double t1 = NowMs();
  o.endpoint = path;
  auto c2 = Consumer::Connect(o);
  EXPECT_LT(NowMs() - t1, 1000);
  EXPECT_EQ(c2.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c2.status().message().find("no server is listening"), std::string::npos)
      << c2.status().message();

  // (b) The next server, of another name, reclaims the dead one's files and
  // leaves a live one's alone.
  const std::string live = UniqueName("live");
  auto live_server = ServeSynthetic(live, {}, dir + "/live.log");
  auto live_consumer = Connect(live, 8);  // so that its ring is in use
  ASSERT_TRUE(live_consumer);
  const std::string next = UniqueName("next");
  auto next_server = ServeSynthetic(next, {}, dir + "/next.log");
  EXPECT_FALSE(Exists(RingFile(dead)));
  EXPECT_FALSE(Exists(socket));
  EXPECT_FALSE(Exists(*lock));
  EXPECT_TRUE(Exists(RingFile(live)));
  EXPECT_TRUE(live_consumer->Next().ok()) << "the live server was disturbed";
  // The first server started after the kill did it.
  EXPECT_NE(ReadText(dir + "/explicit.log").find("reclaimed what server '" + dead + "'"),
            std::string::npos)
      << ReadText(dir + "/explicit.log");
  // A restart of the explicit endpoint works (its socket file is replaced).
  auto again = ServeSynthetic(other, {"--endpoint", path}, dir + "/again.log");
  WaitForEndpoint(path);
  // A live server's socket is never taken over by another server.
  auto intruder = Serve({"--synthetic", "10", "--name", UniqueName("intruder"), "--endpoint", path},
                        dir + "/intruder.log");
  EXPECT_EQ(intruder->Wait(10s), 1);
  EXPECT_NE(ReadText(dir + "/intruder.log").find("another server is listening there"),
            std::string::npos)
      << ReadText(dir + "/intruder.log");
  auto c3 = Connect(path, 8);
  ASSERT_TRUE(c3);
  EXPECT_TRUE(c3->Next().ok());
}

// ---- Cheap ways to starve others ----

// Note [Admission]: HELLOs that are never followed by anything fill the
// server at most for their probation; a real consumer waits its turn (here
// behind 40 silent ones, 16 at a time) and gets in; they pin nothing meanwhile.
TEST_F(Hardening, SilentHellosDoNotKeepConsumersOut) {
  const std::string name = UniqueName("silent");
  auto server = ServeSynthetic(name, {"--max-consumers", "16"});
  auto early = Connect(name);
  ASSERT_TRUE(early);
  zmq::context_t ctx;
  std::vector<std::unique_ptr<Peer>> silent;
  for (int i = 0; i < 40; ++i) {
    silent.push_back(std::make_unique<Peer>(ctx, Endpoint(name)));
    silent.back()->Send(HelloNamed("silent-" + std::to_string(i)));
  }
  std::this_thread::sleep_for(300ms);
  auto st = testing::Stats(name);
  EXPECT_LE(st["consumers"].size(), 16u) << "at most max_consumers";
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(early->Next().ok()) << "the silent ones pin nothing";
  const double t0 = NowMs();
  auto good = Connect(name);
  ASSERT_TRUE(good);
  EXPECT_LT(NowMs() - t0, 8000) << "two probations (heartbeat timeouts) and a little";
  EXPECT_TRUE(good->Next().ok());
  // The silent ones are gone once nobody waits behind them any more and
  // their probation ended; a consumer that waits is never dropped.
  std::this_thread::sleep_for(1500ms);
  st = testing::Stats(name);
  EXPECT_LE(st["consumers"].size(), 18u) << st.dump();
  EXPECT_TRUE(good->Next().ok());
  EXPECT_TRUE(early->Next().ok());
}

TEST_F(Hardening, AStatsFloodIsBoundedAndConsumersGoOn) {
  const std::string name = UniqueName("statsflood");
  auto server = ServeSynthetic(name);
  auto good = Connect(name);
  ASSERT_TRUE(good);
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<double> times;
  std::thread reader([&] {
    while (!stop) {
      auto b = good->Next();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      std::lock_guard lock(mu);
      times.push_back(NowMs());
    }
  });
  zmq::context_t ctx;
  Peer flood(ctx, Endpoint(name));
  int replies = 0, refusals = 0;
  auto take = [&](std::chrono::milliseconds wait) {
    while (auto m = flood.Receive(wait)) {
      if (std::holds_alternative<proto::StatsReply>(*m)) ++replies;
      if (auto* e = std::get_if<proto::Error>(&*m)) {
        EXPECT_EQ(e->request_id, proto::kStatsRequestId);
        EXPECT_EQ(e->code, StatusCode::kResourceExhausted);
        ++refusals;
      }
    }
  };
  const double start = NowMs();
  while (NowMs() - start < 1000) {  // as fast as the socket takes them, for a second
    for (int i = 0; i < 200; ++i) flood.Send(proto::Stats{});
    take(0ms);
    std::this_thread::sleep_for(1ms);
  }
  take(300ms);
  stop = true;
  reader.join();
  EXPECT_GE(replies, 50);
  EXPECT_LE(replies, 300) << "one peer got more than its share of STATS";
  EXPECT_GE(refusals, 1);
  EXPECT_LE(refusals, 3);
  std::lock_guard lock(mu);
  ASSERT_GT(times.size(), 10u);
  double max_gap = 0;
  for (size_t i = 1; i < times.size(); ++i) max_gap = std::max(max_gap, times[i] - times[i - 1]);
  EXPECT_LT(max_gap, 500) << "the consumer was starved";
}

// RssAnon of `pid` (KiB): the heap, without the shared ring.
long AnonKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stol(line.substr(8));
  }
  return -1;
}

// Connection churn with peers that send and never read (STATS and malformed
// frames by the hundred thousand, then gone) and consumers that come and go: the
// server's heap levels off (the replies it would have queued for such peers
// grew it by megabytes per round before). benchmarks/churn_rss measures
// longer runs.
TEST_F(Hardening, ChurnAndPeersThatNeverReadDoNotGrowServerMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator (quarantine, shadow) makes RSS meaningless here";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
  GTEST_SKIP() << "a sanitizer's allocator (quarantine, shadow) makes RSS meaningless here";
#endif
#endif
  const std::string name = UniqueName("churn");
  auto server = ServeSynthetic(name, {"--log-level", "error"});
  zmq::context_t ctx;
  const std::string stats = proto::Encode(proto::Stats{});
  auto round = [&] {
    for (const std::string& frame : {stats, std::string("BC garbage")}) {
      zmq::socket_t s(ctx, zmq::socket_type::dealer);
      s.set(zmq::sockopt::linger, 0);
      s.set(zmq::sockopt::sndhwm, 0);
      s.connect(Endpoint(name));
      for (int k = 0; k < 100000; ++k) s.send(zmq::buffer(frame), zmq::send_flags::none);
      std::this_thread::sleep_for(300ms);
    }
    for (int k = 0; k < 20; ++k) {
      auto c = Connect(name);
      ASSERT_TRUE(c);
      ASSERT_TRUE(c->Next().ok());
    }
  };
  ASSERT_NO_FATAL_FAILURE(round());
  const long warm = AnonKiB(server->pid());
  for (int i = 0; i < 4; ++i) ASSERT_NO_FATAL_FAILURE(round());
  const long after = AnonKiB(server->pid());
  ASSERT_GT(warm, 0);
  EXPECT_LT(after - warm, 4 * 1024)
      << "the heap grew from " << warm << " KiB to " << after << " KiB";
  auto c = Connect(name);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->Next().ok());
}

}  // namespace
}  // namespace batchcast
