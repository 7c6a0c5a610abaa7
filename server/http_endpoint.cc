#include "server/http_endpoint.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <chrono>

#include "server/bounded_task_queue.h"
#include "server/openai_protocol.h"
#include "server/serving_context.h"

namespace pagoda {

Status SplitHostPort(const std::string& address, const std::string& field, std::string* host,
                     int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgument(field + ": '" + address + "' (expected host:port)");
  }
  *host = address.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  const char* first = address.data() + colon + 1;
  const char* last = address.data() + address.size();
  const auto [end, ec] = std::from_chars(first, last, *port);
  if (ec != std::errc() || end != last || *port < 0 || *port > 65535) {
    return InvalidArgument(field + ": '" + address + "' has no valid port");
  }
  return Status::Ok();
}

bool IsLoopbackAddress(const std::string& address) {
  if (address.starts_with("unix:")) return true;
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, "", &host, &port).ok()) return false;
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

HttpEndpoint::HttpEndpoint(TextFn metrics, ReadyFn ready, ReadyFn healthy)
    : metrics_(std::move(metrics)), ready_(std::move(ready)), healthy_(std::move(healthy)) {}

HttpEndpoint::~HttpEndpoint() { Stop(); }

namespace {

// Overflow threads: connections beyond max_connections read (and answered 503, or served when
// a probe) at once.
constexpr int kOverflowWorkers = 8;

// httplib::Server or SSLServer with access to its listening socket: the library listens with a
// backlog of 5 connections, too few for a burst of clients (connections beyond it wait for TCP's
// 1 s SYN retransmission, or fail); Start() raises it to SOMAXCONN.
template <class Base>
class Listener final : public Base {
 public:
  using Base::Base;
  void RaiseBacklog() { ::listen(this->svr_sock_, SOMAXCONN); }
};

bool IsProbe(const httplib::Request& req) {
  return req.method == "GET" && (req.path == "/health" || req.path == "/ready");
}

// A Listener<Base>(args...); `raise_backlog` is set to its RaiseBacklog.
template <class Base, class... Args>
std::unique_ptr<Listener<Base>> MakeListener(std::function<void()>* raise_backlog, Args... args) {
  auto server = std::make_unique<Listener<Base>>(args...);
  *raise_backlog = [raw = server.get()] { raw->RaiseBacklog(); };
  return server;
}

// A plaintext server, or a TLS one with the options' certificate and key.
Result<std::unique_ptr<httplib::Server>> MakeServer(const HttpOptions& o,
                                                    std::function<void()>* raise_backlog) {
  if (o.tls_cert_file.empty()) {
    return std::unique_ptr<httplib::Server>(MakeListener<httplib::Server>(raise_backlog));
  }
  auto server = MakeListener<httplib::SSLServer>(raise_backlog, o.tls_cert_file.c_str(),
                                                 o.tls_key_file.c_str());
  if (!server->is_valid()) {
    return InvalidArgument("server.tls: cannot use cert_file '" + o.tls_cert_file +
                           "' with key_file '" + o.tls_key_file +
                           "' (unreadable, not PEM, or not a matching pair)");
  }
  return std::unique_ptr<httplib::Server>(std::move(server));
}

// Limits, the bounded task queue and the 503 answer of an overflow connection.
void ApplyBounds(const HttpOptions& o, httplib::Server& server) {
  server.set_read_timeout(o.timeout_seconds, 0);
  server.set_write_timeout(o.timeout_seconds, 0);
  server.set_payload_max_length(o.max_body_bytes);
  // SSE events are small writes: without TCP_NODELAY, Nagle's algorithm holds each one back
  // until the client's (delayed) ACK of the previous one comes.
  server.set_tcp_nodelay(true);
  // SO_REUSEADDR without cpp-httplib's default SO_REUSEPORT: a second server on the same port
  // fails to bind instead of silently sharing the port's connections with the first.
  server.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  auto queue = std::make_shared<std::atomic<BoundedTaskQueue*>>(nullptr);
  const int workers = o.max_connections;
  server.new_task_queue = [queue, workers] {
    // Owned and deleted by httplib::Server.
    auto* q = new BoundedTaskQueue(workers, kOverflowWorkers);
    queue->store(q);
    return q;
  };
  server.set_pre_routing_handler([queue](const httplib::Request& req, httplib::Response& res) {
    const BoundedTaskQueue* q = queue->load();
    if (q == nullptr || !q->IsOverflowThread()) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("Connection", "close");  // the connection's next request must not stay here
    if (IsProbe(req)) return httplib::Server::HandlerResponse::Unhandled;
    res.status = 503;
    res.set_content(R"({"error":{"message":"too many connections","type":"server_error",)"
                    R"("param":null,"code":503}})",
                    "application/json");
    return httplib::Server::HandlerResponse::Handled;
  });
}

}  // namespace

Status HttpEndpoint::Start(const HttpOptions& options, const RoutesFn& routes) {
  std::string host;
  int port = 0;
  PAGODA_RETURN_IF_ERROR(SplitHostPort(options.address, options.key, &host, &port));
  std::function<void()> raise_backlog;
  PAGODA_ASSIGN_OR_RETURN(server_, MakeServer(options, &raise_backlog));
  tls_ = !options.tls_cert_file.empty();
  ApplyBounds(options, *server_);
  server_->Get("/metrics", [this, token = options.metrics_token](const httplib::Request& req,
                                                                 httplib::Response& res) {
    const std::string auth = req.get_header_value("Authorization");
    const Status st = CheckBearer(
        req.has_header("Authorization") ? std::optional<std::string_view>(auth) : std::nullopt,
        token);
    if (!st.ok()) {
      res.status = HttpStatusOf(st);
      res.set_content(OpenAiErrorBody(st), "application/json");
      return;
    }
    res.set_content(metrics_(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool healthy = healthy_();
    res.status = healthy ? 200 : 503;
    res.set_content(healthy ? "ok\n" : "unhealthy\n", "text/plain");
  });
  server_->Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = ready_() && healthy_();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ready\n" : "not ready\n", "text/plain");
  });
  if (routes) routes(*server_);
  port_ =
      port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (port_ <= 0) {
    return Status(StatusCode::kUnavailable, options.key + ": cannot bind " + options.address);
  }
  raise_backlog();
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // cpp-httplib's stop() does nothing before the listen loop runs, which would then never end:
  // return only once it runs, so that a Stop() right after Start() (a later start-up failure)
  // ends it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server_->is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void HttpEndpoint::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace pagoda
