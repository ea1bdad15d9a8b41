// MetricsEndpoint: the server's Prometheus endpoint (--metrics-port,
// docs/metrics.md): an HTTP server, civetweb (Debian's libcivetweb), that
// answers GET /metrics with the exposition text of the stats
// (metrics_render.h).
//
// Note [Metrics endpoint]
// - It runs on threads of its own (civetweb's: one accepts, `workers`
//   answer; all named bc-metrics), never on the producer's or the control
//   loop's. A scrape reads the stats as STATS does, holding each
//   Scheduler's lock only while its part is copied out, and the stats are
//   read at most `renders_per_second` times a second for all scrapers
//   together: a scrape in between gets the last rendering.
// - What scrapers may cost is bounded (MetricsLimits): `workers`
//   connections are served at once and at most `queued` more wait,
//   accepted (then as many in the kernel's backlog; beyond, connections
//   are refused); a connection that sends no request holds a worker for
//   at most `timeout`, one that stops reading its answer (larger than the
//   sockets' buffers, which the metrics rarely are) for `timeout` without
//   progress (civetweb looks every 2 s); there is no keep-alive. So
//   scrapers that connect and never read, however many, cost the producer
//   and the consumers nothing, and other scrapers a wait of a few seconds
//   per `workers` of them.
// - It listens on 127.0.0.1 unless told otherwise (the server's options
//   refuse an address beyond loopback without allow_remote): there is no
//   authentication, and the stats name the consumers and the dataset.
//
// Thread-safety: Serve and Stop may be called from any thread; url() and
// port() are fixed once Start returned. `render` is called on the
// endpoint's threads, one call at a time, from Serve on (a scrape before
// gets 503: whatever render reads may be set up between Start and Serve).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "batchcast/core/status.h"
#include "core/src/mutex.h"

struct mg_context;
struct mg_connection;

namespace batchcast {

// Note [Metrics endpoint]'s bounds.
struct MetricsLimits {
  int workers = 2;                          // connections served at once
  int queued = 8;                           // accepted connections waiting for a worker
  std::chrono::milliseconds timeout{3000};  // to receive a request, to send an answer
  int renders_per_second = 10;
};

class MetricsEndpoint {
 public:
  // Listens on `host` (an IPv4 address) and `port` (0: a free port the
  // system picks); Unavailable (naming the address) when it cannot listen
  // there.
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const std::string& host, uint32_t port,
                                                        MetricsLimits limits = {});
  // From now on /metrics answers `render()`'s text (an error: 500).
  void Serve(std::function<Result<std::string>()> render) BC_EXCLUDES(render_mu_);
  ~MetricsEndpoint();  // Stop()
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Closes the socket and joins the threads (a request being answered
  // finishes first). Idempotent.
  void Stop() BC_EXCLUDES(stop_mu_);
  // "http://HOST:PORT/metrics", with the port listened on.
  const std::string& url() const { return url_; }
  int port() const { return port_; }

 private:
  explicit MetricsEndpoint(MetricsLimits limits) : limits_(limits) {}
  static int HandleRequest(mg_connection* conn, void* self);
  // The last rendering, or a new one when it is older than
  // 1 / renders_per_second s.
  Result<std::string> Rendering() BC_EXCLUDES(render_mu_);

  const MetricsLimits limits_;
  std::string url_;
  int port_ = 0;
  std::string wake_host_;  // where Stop connects to wake civetweb's accepting thread
  Mutex stop_mu_;
  mg_context* context_ BC_GUARDED_BY(stop_mu_) = nullptr;
  Mutex render_mu_;
  std::function<Result<std::string>()> render_ BC_GUARDED_BY(render_mu_);  // Serve's
  std::string last_ BC_GUARDED_BY(render_mu_);
  std::chrono::steady_clock::time_point last_at_ BC_GUARDED_BY(render_mu_);
  bool rendered_ BC_GUARDED_BY(render_mu_) = false;
};

}  // namespace batchcast
