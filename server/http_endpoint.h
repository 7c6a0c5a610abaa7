// HttpEndpoint: the plain-HTTP side door for operators: GET /metrics (Prometheus text),
// GET /health (200 "ok" while the process and its backend are healthy, 503 "unhealthy" after a
// fatal backend error) and GET /ready (200 while serving: healthy and not draining; else 503).
// Runs cpp-httplib on its own thread; Stop() joins it. The callbacks run on that thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace httplib {
class Server;
}

namespace pagoda {

class HttpEndpoint {
 public:
  using TextFn = std::function<std::string()>;
  using ReadyFn = std::function<bool()>;
  HttpEndpoint(TextFn metrics, ReadyFn ready, ReadyFn healthy);
  ~HttpEndpoint();

  // Binds "host:port" (port 0 picks a free one) and starts serving. Errors: INVALID_ARGUMENT
  // for a malformed address, UNAVAILABLE when it cannot bind.
  Status Start(const std::string& address);
  int port() const { return port_; }
  void Stop();

 private:
  TextFn metrics_;
  ReadyFn ready_;
  ReadyFn healthy_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// Splits "host:port"; INVALID_ARGUMENT naming `field` if malformed.
Status SplitHostPort(const std::string& address, const std::string& field, std::string* host,
                     int* port);

}  // namespace pagoda
