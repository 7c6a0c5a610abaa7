// HttpEndpoint: one cpp-httplib listener, plaintext or TLS (https, when `tls_cert_file` is set).
// Every listener answers GET /metrics (Prometheus text; behind the bearer token when
// `metrics_token` is set), GET /health (200 "ok" while the process and its backend are healthy,
// 503 "unhealthy" after a fatal backend error) and GET /ready (200 while serving: healthy and not
// draining; else 503), these two without auth; `routes` adds the API (server/openai_api.h) on the
// HTTP API listener.
// Bounds: at most `max_connections` connections are served at once (each on its own worker
// thread); beyond them, up to kOverflowWorkers more are read on overflow threads and answered
// 503 -- except /health and /ready, served there, so that connections holding every worker
// (slow or half-sent requests) do not fail the probes. A request body is at most
// `max_body_bytes` (413 beyond), and a connection that sends nothing or accepts no bytes for
// `timeout_seconds` is closed. Runs on its own threads; Stop() joins them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace httplib {
class Server;
}

namespace pagoda {

struct HttpOptions {
  std::string address;  // host:port (port 0 picks a free one)
  std::string key;      // the config key of `address`, named in errors
  int32_t max_connections = 64;
  int32_t timeout_seconds = 60;
  size_t max_body_bytes = 16 * 1024 * 1024;
  std::string tls_cert_file;  // PEM; set with tls_key_file for https, "" for plaintext
  std::string tls_key_file;
  std::string metrics_token;  // non-empty: /metrics needs "authorization: Bearer <it>"
};

class HttpEndpoint {
 public:
  using TextFn = std::function<std::string()>;
  using ReadyFn = std::function<bool()>;
  using RoutesFn = std::function<void(httplib::Server&)>;
  HttpEndpoint(TextFn metrics, ReadyFn ready, ReadyFn healthy);
  ~HttpEndpoint();

  // Binds options.address and starts serving, with `routes` (may be null) added. Errors:
  // INVALID_ARGUMENT for a malformed address or an unusable TLS certificate / key,
  // UNAVAILABLE when it cannot bind.
  Status Start(const HttpOptions& options, const RoutesFn& routes = nullptr);
  int port() const { return port_; }
  bool tls() const { return tls_; }
  void Stop();

 private:
  TextFn metrics_;
  ReadyFn ready_;
  ReadyFn healthy_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;
};

// Splits "host:port"; INVALID_ARGUMENT naming `field` if malformed.
Status SplitHostPort(const std::string& address, const std::string& field, std::string* host,
                     int* port);

// True when `address` (host:port, [v6]:port or unix:PATH) is reachable from this host only:
// 127.0.0.0/8, ::1, localhost or a unix socket. Anything else (0.0.0.0, ::, other names) is not.
bool IsLoopbackAddress(const std::string& address);

}  // namespace pagoda
