#include "metrics_endpoint.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/src/logging.h"
#include "core/src/thread_name.h"

namespace batchcast {
namespace {

// civetweb's process-wide initialization, once (never undone: other
// endpoints may start later).
void InitCivetweb() {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
}

void* NameThread(const mg_context*, int) {
  SetThreadName("bc-metrics");
  return nullptr;
}

int LogMessage(const mg_connection*, const char* message) {
  BC_LOG_DEBUG("metrics endpoint: {}", message == nullptr ? "" : message);
  return 1;  // handled: nothing on stderr
}

void Reply(mg_connection* conn, int status, std::string_view reason, std::string_view type,
           std::string_view body, bool head) {
  mg_printf(conn,
            "HTTP/1.1 %d %.*s\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            status, static_cast<int>(reason.size()), reason.data(), static_cast<int>(type.size()),
            type.data(), body.size());
  if (!head) mg_write(conn, body.data(), body.size());
}

// Opens and closes a TCP connection to host:port (best effort).
void Connect(const std::string& host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1) {
    (void)connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  }
  close(fd);
}

constexpr std::string_view kPlain = "text/plain; charset=utf-8";
// The Prometheus text exposition format (metrics_text.h).
constexpr std::string_view kExposition = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

MetricsEndpoint::~MetricsEndpoint() { Stop(); }

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& host,
                                                                uint32_t port,
                                                                MetricsLimits limits) {
  InitCivetweb();
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint(limits));
  const std::string address = host + ":" + std::to_string(port);
  const std::string workers = std::to_string(limits.workers);
  const std::string queued = std::to_string(limits.queued);
  const std::string timeout = std::to_string(limits.timeout.count());
  // clang-format off
  const char* options[] = {
      "listening_ports", address.c_str(),
      "num_threads", workers.c_str(),
      "connection_queue", queued.c_str(),
      "listen_backlog", queued.c_str(),
      "request_timeout_ms", timeout.c_str(),  // to receive a request, to send an answer
      "enable_keep_alive", "no",
      "max_request_size", "16384",
      nullptr};
  // clang-format on
  mg_callbacks callbacks{};
  callbacks.log_message = LogMessage;
  callbacks.init_thread = NameThread;
  mg_init_data init{&callbacks, endpoint.get(), options};
  char error_text[256] = {};
  unsigned error_code = 0;
  mg_error_data error{&error_code, error_text, sizeof(error_text)};
  mg_context* context = mg_start2(&init, &error);
  if (context == nullptr) {
    return UnavailableError("the metrics endpoint cannot listen on " + address + ": " +
                            (error_text[0] != '\0' ? std::string(error_text) : "failed"));
  }
  mg_set_request_handler(context, "/", HandleRequest, endpoint.get());
  mg_server_port ports[4] = {};
  const int n = mg_get_server_ports(context, 4, ports);
  endpoint->port_ = n > 0 ? ports[0].port : static_cast<int>(port);
  endpoint->url_ = "http://" + host + ":" + std::to_string(endpoint->port_) + "/metrics";
  endpoint->wake_host_ = host == "0.0.0.0" ? "127.0.0.1" : host;
  MutexLock l(&endpoint->stop_mu_);
  endpoint->context_ = context;
  return endpoint;
}

void MetricsEndpoint::Stop() {
  MutexLock l(&stop_mu_);
  if (context_ == nullptr) return;
  // civetweb's accepting thread looks at its stop flag between polls of
  // up to 2 s; a connection wakes it, so mg_stop returns at once instead.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      Connect(wake_host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  mg_stop(context_);
  stopped = true;
  waker.join();
  context_ = nullptr;
}

void MetricsEndpoint::Serve(std::function<Result<std::string>()> render) {
  MutexLock l(&render_mu_);
  render_ = std::move(render);
}

Result<std::string> MetricsEndpoint::Rendering() {
  MutexLock l(&render_mu_);
  if (!render_) return UnavailableError("starting");
  const auto now = std::chrono::steady_clock::now();
  if (rendered_ && now - last_at_ < std::chrono::milliseconds(1000) / limits_.renders_per_second) {
    return last_;
  }
  BATCHCAST_ASSIGN_OR_RETURN(last_, render_());
  last_at_ = now;
  rendered_ = true;
  return last_;
}

int MetricsEndpoint::HandleRequest(mg_connection* conn, void* self) {
  const mg_request_info* request = mg_get_request_info(conn);
  const std::string_view method = request->request_method ? request->request_method : "";
  const std::string_view path = request->local_uri ? request->local_uri : "";
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    Reply(conn, 405, "Method Not Allowed", kPlain, "GET /metrics\n", false);
    return 405;
  }
  if (path == "/") {
    Reply(conn, 200, "OK", kPlain, "batchcast server: Prometheus metrics at /metrics\n", head);
    return 200;
  }
  if (path != "/metrics") {
    Reply(conn, 404, "Not Found", kPlain, "not found; the metrics are at /metrics\n", head);
    return 404;
  }
  Result<std::string> text = static_cast<MetricsEndpoint*>(self)->Rendering();
  if (!text.ok() && text.status().code() == StatusCode::kUnavailable) {
    Reply(conn, 503, "Service Unavailable", kPlain, "starting\n", head);
    return 503;
  }
  if (!text.ok()) {
    Reply(conn, 500, "Internal Server Error", kPlain, text.status().ToString() + "\n", head);
    return 500;
  }
  Reply(conn, 200, "OK", kExposition, *text, head);
  return 200;
}

}  // namespace batchcast
