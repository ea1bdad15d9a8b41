// End-to-end tests of a server under a bad moment, with real processes:
//  - a flood of keyless tcp:// connections against a server with a low
//    open-file limit loses no file, and costs bounded time and CPU (Note
//    [Handshake limits], Note [Read retries]);
//  - files that all fail after the scan are an error every consumer sees,
//    never an empty epoch reported as success;
//  - bursts of consumer processes that join at once all get in (Note
//    [Admission]), a full server refuses newcomers instead of displacing;
//  - floods of repeated HELLOs and of STATS from many connections keep
//    neither a new consumer out nor a reading one slow.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <zmq.hpp>

#include "../core/runtime_dir_fixture.h"
#include "../image/test_jpegs.h"
#include "../sources/tar_writer.h"
#include "batchcast/client/consumer.h"
#include "core/src/protocol.h"
#include "core/src/reclaim.h"
#include "core/src/runtime_dir.h"
#include "harness.h"

namespace batchcast {
namespace {

using namespace std::chrono_literals;
using testing::NowMs;
using testing::Process;
using testing::ReadJson;
using testing::ReadText;
using testing::TempDir;
using testing::UniqueName;
using testing::WaitForServer;

// A folder of `n` small JPEGs in two classes.
std::string MakeDataset(int n) {
  const std::string dir = TempDir() + "/data";
  for (int c = 0; c < 2; ++c) std::filesystem::create_directories(dir + "/c" + std::to_string(c));
  for (int i = 0; i < n; ++i) {
    const auto jpeg = image::testing::EncodeJpeg(image::testing::TexturedRgb(24, 20, i + 1), 90);
    std::ofstream(dir + "/c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".jpg",
                  std::ios::binary)
        .write(reinterpret_cast<const char*>(jpeg.data()),
               static_cast<std::streamsize>(jpeg.size()));
  }
  return dir;
}

// The same images as MakeDataset(n), as 4 tar shards (WebDataset layout);
// the pattern that names them.
std::string MakeShards(int n) {
  const std::string dir = TempDir();
  for (int s = 0; s < 4; ++s) {
    testing::TarMembers members;
    for (int i = s; i < n; i += 4) {
      const std::string key = "k" + std::to_string(i);
      members.emplace_back(
          key + ".jpg", image::testing::EncodeJpeg(image::testing::TexturedRgb(24, 20, i + 1), 90));
      members.emplace_back(key + ".cls", testing::Text(std::to_string(i % 2)));
    }
    testing::WriteTar(dir + "/s-" + std::to_string(s) + ".tar", members);
  }
  return dir + "/s-{0..3}.tar";
}

// User plus system CPU seconds of process `pid` so far.
double CpuSeconds(pid_t pid) {
  const std::string text = ReadText("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; fields >> f; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(f);
    if (i == 15) break;
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int OpenDescriptors(pid_t pid) {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

// The endpoint a server process says it serves on (its log), once it does.
std::string ServedEndpoint(const std::string& log) {
  for (int i = 0; i < 500; ++i) {
    std::smatch m;
    const std::string text = ReadText(log);
    if (std::regex_search(text, m, std::regex("serving '[^']*' on (tcp://[0-9.]+:\\d+)"))) {
      return m[1];
    }
    std::this_thread::sleep_for(20ms);
  }
  return "";
}

// Each test runs its servers and consumers in a runtime directory of its own
// (XDG_RUNTIME_DIR, inherited by the processes it starts).
class Pressure : public testing::RuntimeDirTest {};

// A consumer that reads whole epochs and records each one's sample count.
struct EpochReader {
  std::vector<uint64_t> epochs;
  Status error;
  void Read(Consumer& c, size_t want) {
    uint64_t samples = 0;
    while (epochs.size() < want) {
      auto b = c.Next();
      if (!b.ok()) {
        error = b.status();
        return;
      }
      if (b->end_of_epoch()) {
        epochs.push_back(std::exchange(samples, 0));
        continue;
      }
      samples += b->indices().size();
    }
  }
};

// ---- A flood of connections against a low open-file limit ----

class FloodTest : public Pressure, public ::testing::WithParamInterface<bool> {};

// Over a folder of files and over tar shards (param: true).
TEST_P(FloodTest, AConnectionFloodAgainstALowFileLimitLosesNoFile) {
  const std::string data = GetParam() ? MakeShards(200) : MakeDataset(200);
  const std::string dir = TempDir();
  const std::string name = UniqueName("fdflood");
  const std::string log = dir + "/server.log";
  // soft = hard = 256: the server cannot raise it.
  Process server({"/usr/bin/prlimit", "--nofile=256:256", BC_SERVER_BIN, "serve", data, "--name",
                  name, "--endpoint", "tcp://127.0.0.1:0", "--size", "16", "--batch-size", "16",
                  "--workers", "2", "--status-interval", "0"},
                 log);
  const std::string endpoint = ServedEndpoint(log);
  ASSERT_FALSE(endpoint.empty()) << ReadText(log);
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));

  ConsumerOptions o;
  o.endpoint = endpoint;
  o.batch_size = 10;
  o.drop_last = false;
  o.timeout = 30s;
  auto consumer = Consumer::Connect(o);
  ASSERT_TRUE(consumer.ok()) << consumer.status().ToString();

  // This process opens the flood's descriptors: its own limit up.
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);

  std::atomic<bool> stop{false};
  int most = 0;
  std::thread attacker([&] {
    std::deque<int> open;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (!stop) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) break;
      (void)connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));  // EINPROGRESS
      open.push_back(fd);
      while (open.size() > 1100) {
        close(open.front());
        open.pop_front();
      }
    }
    for (int fd : open) close(fd);
  });
  const double cpu0 = CpuSeconds(server.pid());
  const double t0 = NowMs();
  EpochReader reader;
  std::thread reading([&] { reader.Read(**consumer, 6); });
  while (NowMs() - t0 < 4000) {
    most = std::max(most, OpenDescriptors(server.pid()));
    std::this_thread::sleep_for(50ms);
  }
  stop = true;
  attacker.join();
  const double attack_s = (NowMs() - t0) / 1000;
  const double cpu = CpuSeconds(server.pid()) - cpu0;
  reading.join();
  ASSERT_TRUE(reader.error.ok()) << reader.error.ToString() << "\n" << ReadText(log);
  for (size_t e = 0; e < reader.epochs.size(); ++e) {
    EXPECT_EQ(reader.epochs[e], 200u) << "epoch " << e << "\n" << ReadText(log);
  }
  auto stats = QueryStats(endpoint, 5s);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  const nlohmann::json st = nlohmann::json::parse(*stats);
  const nlohmann::json& counters = st["source_counters"];
  EXPECT_EQ(counters.value("files_dropped_at_decode", -1), 0) << st.dump();
  EXPECT_EQ(counters.value("files_unreadable", -1), 0) << st.dump();
  EXPECT_GT(st.value("handshakes_cut", 0), 0) << "the flood was not cut";
  // The flood may take every descriptor for a moment (the kernel accepts
  // faster than anyone can cut); reads then wait and retry. What it holds
  // ends with it, within the handshake timeout.
  std::this_thread::sleep_for(3s);
  EXPECT_LT(OpenDescriptors(server.pid()), 64) << "at most " << most << " during the attack";
  EXPECT_LT(cpu / attack_s, 1.5) << cpu << " CPU s in " << attack_s << " s of attack";
}

INSTANTIATE_TEST_SUITE_P(Data, FloodTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "shards" : "files";
                         });

// Over tcp:// a consumer of a server killed with -9 fails as soon as the
// connection closes, well within the heartbeat timeout.
TEST_F(Pressure, ATcpConsumerOfAKilledServerFailsAtOnce) {
  const std::string log = TempDir() + "/server.log";
  Process server(
      {BC_SERVER_BIN, "serve", "--synthetic", "100000", "--size", "4", "--name",
       UniqueName("tcpkill"), "--endpoint", "tcp://127.0.0.1:0", "--status-interval", "0"},
      log);
  const std::string endpoint = ServedEndpoint(log);
  ASSERT_FALSE(endpoint.empty()) << ReadText(log);
  ConsumerOptions o;
  o.endpoint = endpoint;
  o.batch_size = 8;
  auto c = Consumer::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->Next().ok());
  server.Kill(SIGKILL);
  const double t0 = NowMs();
  Result<Batch> r = (*c)->Next();
  while (r.ok()) r = (*c)->Next();  // what was prefetched
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_LT(NowMs() - t0, 1000) << r.status().ToString();
  server.Wait();
  ReclaimDeadServers();  // what the killed server left
}

// ---- Every file failing after the scan ----

TEST_F(Pressure, FilesThatAllFailAfterTheScanAreAnErrorEveryConsumerSees) {
  const std::string data = MakeDataset(8);
  const std::string name = UniqueName("allfail");
  const std::string log = TempDir() + "/server.log";
  auto server = testing::StartServerProcess(
      BC_SERVER_BIN, name, {data, "--size", "16", "--batch-size", "4", "--min-consumers", "2"},
      log);
  auto a = testing::ConnectConsumer(name, 4, JoinPolicy::kImmediate);
  ASSERT_TRUE(a);
  std::filesystem::remove_all(data);  // the storage lost them after the scan
  auto b = testing::ConnectConsumer(name, 4, JoinPolicy::kImmediate);
  ASSERT_TRUE(b);
  for (Consumer* c : {a.get(), b.get()}) {
    Result<Batch> r = c->Next();
    while (r.ok()) r = c->Next();
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    EXPECT_NE(r.status().message().find("produced no sample"), std::string::npos)
        << r.status().ToString();
  }
  EXPECT_EQ(server->Wait(10s), 1) << ReadText(log);
  EXPECT_NE(ReadText(log).find("produced no sample"), std::string::npos) << ReadText(log);
}

// ---- Bursts of consumers ----

// `n` consumer processes started at once against a server of `extra`
// options all get in and read their batches.
void BurstJoins(int n, const std::vector<std::string>& extra) {
  const std::string name = UniqueName("burst");
  std::vector<std::string> args = {"--synthetic", "100000", "--size", "4", "--batch-size", "16"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto server = testing::StartServerProcess(BC_SERVER_BIN, name, args);
  const std::string dir = TempDir();
  std::vector<std::unique_ptr<Process>> consumers;
  for (int i = 0; i < n; ++i) {
    consumers.push_back(testing::StartConsumerProcess(BC_CONSUMER_BIN, name,
                                                      dir + "/c" + std::to_string(i) + ".json",
                                                      {"--batch-size", "8", "--batches", "20"}));
  }
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    const int rc = consumers[i]->Wait(60s);
    const nlohmann::json r = ReadJson(dir + "/c" + std::to_string(i) + ".json");
    if (rc != 0) {
      ++failed;
      ADD_FAILURE() << "consumer " << i << " exited " << rc << ": " << r.dump();
    }
  }
  EXPECT_EQ(failed, 0);
}

TEST_F(Pressure, SixteenConsumersJoiningAFullServerTogetherAllGetIn) {
  BurstJoins(16, {"--max-consumers", "16"});
}

TEST_F(Pressure, SixtyFourConsumersJoiningTogetherAllGetIn) { BurstJoins(64, {}); }

// A full server refuses a newcomer; it does not displace a consumer.
TEST_F(Pressure, AFullServerRefusesANewcomerAndKeepsItsConsumers) {
  const std::string name = UniqueName("full");
  auto server = testing::StartServerProcess(
      BC_SERVER_BIN, name, {"--synthetic", "100000", "--size", "4", "--max-consumers", "2"});
  auto a = testing::ConnectConsumer(name, 8, JoinPolicy::kImmediate);
  auto b = testing::ConnectConsumer(name, 8, JoinPolicy::kImmediate);
  ASSERT_TRUE(a && b);
  ConsumerOptions o;
  o.endpoint = name;
  o.batch_size = 8;
  auto c = Consumer::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted) << c.status().ToString();
  EXPECT_NE(c.status().message().find("limit 2"), std::string::npos) << c.status().ToString();
  EXPECT_TRUE(a->Next().ok());
  EXPECT_TRUE(b->Next().ok());
}

// ---- Floods ----

// A raw peer on the server's socket.
class Peer {
 public:
  Peer(zmq::context_t& ctx, const std::string& endpoint) : socket_(ctx, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvhwm, 10);
    socket_.connect(endpoint);
  }
  void Send(const std::string& frame) {
    (void)socket_.send(zmq::buffer(frame), zmq::send_flags::dontwait);
  }
  void Drain() {
    zmq::message_t m;
    while (socket_.recv(m, zmq::recv_flags::dontwait)) {
    }
  }

 private:
  zmq::socket_t socket_;
};

std::string Endpoint(const std::string& name) {
  auto e = ResolveEndpoint(name);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : "";
}

// What `c` reads over `ms`: samples a second, and the longest wait for a
// batch.
struct Reading {
  double rate = 0;
  double max_gap_ms = 0;
};
Reading Read(Consumer& c, double ms) {
  const double t0 = NowMs();
  double last = t0;
  Reading r;
  uint64_t samples = 0;
  while (NowMs() - t0 < ms) {
    auto b = c.Next();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return r;
    const double now = NowMs();
    r.max_gap_ms = std::max(r.max_gap_ms, now - last);
    last = now;
    samples += b->indices().size();
  }
  r.rate = samples * 1000.0 / (NowMs() - t0);
  return r;
}

// A synthetic server process read at full speed by one consumer, its reading
// measured alone at the start; then a flood: `peers` raw connections each
// sending `frame` every `period` (and draining the answers), on a thread of
// its own until the object goes.
class FloodedServer {
 public:
  explicit FloodedServer(const std::string& base) : name_(UniqueName(base)) {
    server_ = testing::StartServerProcess(
        BC_SERVER_BIN, name_,
        {"--synthetic", "1000000", "--size", "4", "--batch-size", "64", "--log-level", "error"});
    reader_ = testing::ConnectConsumer(name_, 64, JoinPolicy::kImmediate);
    EXPECT_TRUE(reader_);
    if (reader_) before_ = Read(*reader_, 1000);
  }
  ~FloodedServer() { StopFlood(); }

  const std::string& name() const { return name_; }
  bool reading() const { return reader_ != nullptr; }

  void StartFlood(int peers, std::string frame, std::chrono::milliseconds period) {
    for (int i = 0; i < peers; ++i) peers_.push_back(std::make_unique<Peer>(ctx_, Endpoint(name_)));
    flood_ = std::thread([this, frame = std::move(frame), period] {
      while (!stop_) {
        for (auto& p : peers_) {
          p->Send(frame);
          p->Drain();
        }
        std::this_thread::sleep_for(period);
      }
    });
  }

  // Over two seconds of the flood the reader never waits a second for a
  // batch and keeps a quarter of its rate alone; then the flood stops.
  void ExpectTheReaderKeepsUp() {
    const Reading during = Read(*reader_, 2000);
    StopFlood();
    EXPECT_LT(during.max_gap_ms, 1000) << "the reader stalled";
    EXPECT_GT(during.rate, before_.rate * 0.25)
        << "before " << before_.rate << " samples/s, during " << during.rate;
  }

 private:
  void StopFlood() {
    stop_ = true;
    if (flood_.joinable()) flood_.join();
  }

  const std::string name_;
  std::unique_ptr<testing::Process> server_;
  std::unique_ptr<Consumer> reader_;
  Reading before_;
  zmq::context_t ctx_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::atomic<bool> stop_{false};
  std::thread flood_;
};

TEST_F(Pressure, RepeatedHellosFromManyPeersKeepNeitherANewConsumerOutNorAReaderSlow) {
  FloodedServer s("helloflood");
  ASSERT_TRUE(s.reading());
  proto::Hello hello;
  hello.name = "flood";
  hello.batch_size = 16;
  hello.prefetch = 2;
  s.StartFlood(200, proto::Encode(hello), 20ms);
  std::this_thread::sleep_for(500ms);
  const double t0 = NowMs();
  auto newcomer = testing::ConnectConsumer(s.name(), 16, JoinPolicy::kImmediate);
  const double join_ms = NowMs() - t0;
  ASSERT_TRUE(newcomer);
  EXPECT_TRUE(newcomer->Next().ok());
  newcomer.reset();  // a consumer that stops reading would pace the reader (lag policy block)
  s.ExpectTheReaderKeepsUp();
  EXPECT_LT(join_ms, 3000) << "a flood of repeated HELLOs kept a new consumer out";
}

TEST_F(Pressure, StatsFromAThousandConnectionsDoNotSlowAReader) {
  FloodedServer s("statsmany");
  ASSERT_TRUE(s.reading());
  // Each connection asks 20 times a second, within its own budget (100):
  // 20,000 a second in all, which only the budget for all of them bounds.
  s.StartFlood(1000, proto::Encode(proto::Stats{}), 50ms);
  std::this_thread::sleep_for(300ms);
  s.ExpectTheReaderKeepsUp();
}

}  // namespace
}  // namespace batchcast
