// The metrics endpoint (server/src/metrics_endpoint.h) over real sockets:
// GET /metrics answers the rendering with Prometheus' content type (503
// before Serve), other paths and methods are refused, renders are limited
// to ten a second, a
// port in use is an error naming it, and connections that never send or
// never read do not keep others out for long. And the option that starts
// it: metrics_port's forms, and its refusal to listen beyond loopback
// without allow_remote.
#include "server/src/metrics_endpoint.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "batchcast/server/option_table.h"

namespace batchcast {
namespace {

// A TCP connection to 127.0.0.1:port (-1 on failure); `receive_buffer` > 0
// makes its receive buffer that small.
int Connect(int port, int receive_buffer = 0) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (receive_buffer > 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The whole answer to `request` (until the server closes).
std::string Ask(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)!write(fd, request.data(), request.size());
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

std::string Get(int port, const std::string& path, const std::string& method = "GET") {
  return Ask(port, method + " " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
}

std::unique_ptr<MetricsEndpoint> StartOrDie(std::function<Result<std::string>()> render,
                                            MetricsLimits limits = {}) {
  auto e = MetricsEndpoint::Start("127.0.0.1", 0, limits);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return nullptr;
  (*e)->Serve(std::move(render));
  return std::move(*e);
}

TEST(MetricsEndpoint, ServesTheRenderingAtMetrics) {
  std::atomic<int> renders{0};
  auto e = StartOrDie([&]() -> Result<std::string> {
    ++renders;
    return std::string("batchcast_x 1\n");
  });
  ASSERT_NE(e, nullptr);
  ASSERT_GT(e->port(), 0);
  EXPECT_EQ(e->url(), "http://127.0.0.1:" + std::to_string(e->port()) + "/metrics");
  const std::string reply = Get(e->port(), "/metrics");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200")) << reply;
  EXPECT_NE(reply.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << reply;
  EXPECT_TRUE(reply.ends_with("\r\n\r\nbatchcast_x 1\n")) << reply;
  EXPECT_TRUE(Get(e->port(), "/metrics", "HEAD").ends_with("\r\n\r\n"));
  EXPECT_TRUE(Get(e->port(), "/other").starts_with("HTTP/1.1 404"));
  EXPECT_TRUE(Get(e->port(), "/metrics", "POST").starts_with("HTTP/1.1 405"));
  EXPECT_TRUE(Get(e->port(), "/").starts_with("HTTP/1.1 200"));
  // Ten renders a second at most, whatever the scrapers ask.
  renders = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 30; ++i) Get(e->port(), "/metrics");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LE(renders.load(), 1 + static_cast<int>(s * MetricsLimits{}.renders_per_second) + 1);
  e->Stop();
  e->Stop();  // idempotent
  EXPECT_EQ(Connect(e->port()), -1);
}

TEST(MetricsEndpoint, BeforeServeItAnswers503) {
  auto e = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(Get((*e)->port(), "/metrics").starts_with("HTTP/1.1 503"));
  (*e)->Serve([]() -> Result<std::string> { return std::string("x 1\n"); });
  EXPECT_TRUE(Get((*e)->port(), "/metrics").starts_with("HTTP/1.1 200"));
}

TEST(MetricsEndpoint, ARenderErrorIsA500) {
  auto e = StartOrDie([]() -> Result<std::string> { return InternalError("no stats"); });
  ASSERT_NE(e, nullptr);
  const std::string reply = Get(e->port(), "/metrics");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 500")) << reply;
  EXPECT_NE(reply.find("no stats"), std::string::npos) << reply;
}

TEST(MetricsEndpoint, APortInUseIsAnErrorNamingIt) {
  auto first = StartOrDie([]() -> Result<std::string> { return std::string(); });
  ASSERT_NE(first, nullptr);
  auto second = MetricsEndpoint::Start("127.0.0.1", static_cast<uint32_t>(first->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(first->port())),
            std::string::npos)
      << second.status().message();
}

TEST(MetricsEndpoint, SilentConnectionsHoldAWorkerOnlyUntilTheTimeout) {
  MetricsLimits limits;
  limits.timeout = std::chrono::milliseconds(300);
  auto e = StartOrDie([]() -> Result<std::string> { return std::string(16 << 20, 'x'); }, limits);
  ASSERT_NE(e, nullptr);
  // As many connections as workers that never send, and as many that ask
  // and never read (an answer larger than the sockets' buffers).
  std::vector<int> idle;
  for (int i = 0; i < limits.workers; ++i) idle.push_back(Connect(e->port()));
  for (int i = 0; i < limits.workers; ++i) {
    const int fd = Connect(e->port(), /*receive_buffer=*/4096);
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    (void)!write(fd, request.data(), request.size());
    idle.push_back(fd);
  }
  // A scraper that reads gets its answer once the silent ones timed out.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string reply = Get(e->port(), "/metrics");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200")) << reply.substr(0, 100);
  // The silent ones hold the workers a timeout at most; those that do not
  // read, a timeout without progress, which civetweb checks every 2 s.
  const double timeout_s = std::chrono::duration<double>(limits.timeout).count();
  EXPECT_LT(s, timeout_s + (2 + timeout_s) + 1.5);
  for (int fd : idle) close(fd);
}

TEST(MetricsPortOption, TakesAPortAnyOrAnAddress) {
  ServerOptions o;
  const ServerOption* opt = FindServerOption("metrics_port");
  ASSERT_NE(opt, nullptr);
  EXPECT_TRUE(opt->takes_text);
  EXPECT_EQ(opt->get(o), "0");
  ASSERT_TRUE(SetServerOption(o, "metrics_port", "9400").ok());
  EXPECT_EQ(o.metrics_port, 9400u);
  EXPECT_EQ(o.metrics_host, "");
  EXPECT_EQ(opt->get(o), "9400");
  ASSERT_TRUE(SetServerOption(o, "--metrics-port", "any").ok());
  EXPECT_EQ(o.metrics_port, ServerOptions::kAnyMetricsPort);
  EXPECT_EQ(opt->get(o), "any");
  ASSERT_TRUE(SetServerOption(o, "metrics_port", "*:9400").ok());
  EXPECT_EQ(o.metrics_host, "0.0.0.0");
  EXPECT_EQ(opt->get(o), "0.0.0.0:9400");
  ASSERT_TRUE(SetServerOption(o, "metrics_port", "localhost:any").ok());
  EXPECT_EQ(o.metrics_host, "127.0.0.1");
  ASSERT_TRUE(SetServerOption(o, "metrics_port", "0").ok());
  EXPECT_EQ(o.metrics_port, 0u);
  EXPECT_EQ(o.metrics_host, "");
  for (const char* bad : {"65536", "-1", "x", "host.example:9400", "1.2.3.4:0", "1.2.3.4:", ""}) {
    const Status s = SetServerOption(o, "metrics_port", bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("metrics_port (--metrics-port)"), std::string::npos) << s.message();
  }
}

TEST(MetricsPortOption, BeyondLoopbackNeedsAllowRemote) {
  ServerOptions o;
  ASSERT_TRUE(SetServerOption(o, "metrics_port", "0.0.0.0:9400").ok());
  const Status s = o.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("0.0.0.0:9400"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--allow-remote"), std::string::npos) << s.message();
  o.allow_remote = true;
  EXPECT_TRUE(o.Validate().ok());
  ServerOptions local;
  ASSERT_TRUE(SetServerOption(local, "metrics_port", "127.0.0.2:9400").ok());
  EXPECT_TRUE(local.Validate().ok());
  ASSERT_TRUE(SetServerOption(local, "metrics_port", "9400").ok());
  EXPECT_TRUE(local.Validate().ok());
}

}  // namespace
}  // namespace batchcast
