#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "model/make_model.h"
#include "runtime/runtime.h"
#include "server/api_request.h"
#include "server/generation_service.h"
#include "server/http_endpoint.h"
#include "server/log_setup.h"
#include "server/malformed_request.h"
#include "server/openai_api.h"
#include "server/tls_files.h"

namespace pagoda {
namespace {

// Writes the demo model on first run when the configured path is the default one.
Status EnsureModel(const PagodaConfig& cfg, std::string* path) {
  *path = ResolvedModelPath(cfg);
  if (!cfg.model.path.empty() || std::filesystem::exists(*path)) return Status::Ok();
  spdlog::info("no model configured: writing the demo model to {}", *path);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(*path).parent_path(), ec);
  MakeModelOptions o;
  o.preset = "tiny";
  o.output = *path;
  return MakeModel(o, [](int64_t done, int64_t total) {
    if (done == total) spdlog::info("demo model: {} tensors written", total);
  });
}

// The bearer token: server.auth's, else the PAGODA_API_KEY environment variable, else none.
Result<std::string> ReadToken(const AuthConfig& a) {
  if (!a.bearer_token.empty()) return a.bearer_token;
  if (a.bearer_token_file.empty()) {
    const char* env = std::getenv("PAGODA_API_KEY");
    return std::string(env != nullptr ? env : "");
  }
  std::ifstream in(a.bearer_token_file);
  if (!in)
    return InvalidArgument("server.auth.bearer_token_file: cannot read " + a.bearer_token_file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.empty()) return InvalidArgument("server.auth.bearer_token_file: empty token");
  return t;
}

Result<std::shared_ptr<grpc::ServerCredentials>> Credentials(const TlsConfig& tls) {
  if (tls.cert_file.empty()) return grpc::InsecureServerCredentials();
  PAGODA_ASSIGN_OR_RETURN(TlsKeyPair files, ReadTlsKeyPair(tls.cert_file, tls.key_file));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.cert_chain = std::move(files.cert_chain_pem);
  pair.private_key = std::move(files.private_key_pem);
  grpc::SslServerCredentialsOptions opts;
  opts.pem_key_cert_pairs.push_back(pair);
  return grpc::SslServerCredentials(opts);
}

// Waits for SIGTERM/SIGINT (blocked in every thread; see RunServer), calling `tick` about
// every 100 ms meanwhile.
int WaitForSignal(const std::function<void()>& tick) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  const timespec period{0, 100 * 1000 * 1000};
  while (true) {
    const int sig = sigtimedwait(&set, nullptr, &period);
    if (sig > 0) return sig;
    tick();  // timed out (EAGAIN) or interrupted (EINTR)
  }
}

// Start-up failures go to stderr as "error: MESSAGE" (the message verbatim: the Neuron
// backend's are multi-line and exact); returns the exit code.
// The weights are read straight from the model file's mapping: a SIGBUS while serving means
// that file was truncated or replaced on disk. Say so, then die of the signal as before
// (SA_RESETHAND: the faulting read runs again under the default action). Async-signal-safe.
void ReportSigbus(int) {
  static constexpr char kMessage[] =
      "fatal: SIGBUS reading the memory-mapped model file: it was truncated or replaced on disk "
      "while being served; restart the server with an intact model\n";
  if (::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1) < 0) return;
}

void InstallSigbusReport() {
  struct sigaction sa {};
  sa.sa_handler = ReportSigbus;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  ::sigaction(SIGBUS, &sa, nullptr);
}

int StartupFailed(const Status& st, int exit_code) {
  std::fprintf(stderr, "error: %s\n", st.message().c_str());
  return exit_code;
}

void Drain(ServingContext& ctx, Engine& engine, grpc::Server& server, int grace_seconds) {
  server.GetHealthCheckService()->SetServingStatus(false);
  ctx.draining = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds);
  while (engine.HasWork() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (engine.HasWork()) {
    spdlog::warn("grace period over: aborting the remaining requests");
    engine.AbortAll();
    while (engine.HasWork()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

// The options of one HTTP listener: TLS from server.tls, /metrics behind `token` when
// server.auth.protect_metrics.
HttpOptions HttpOptionsFor(const ServerConfig& cfg, const std::string& token,
                           const std::string& address, const std::string& key) {
  HttpOptions o;
  o.address = address;
  o.key = key;
  o.max_connections = cfg.http_max_connections;
  o.timeout_seconds = cfg.http_timeout_seconds;
  o.max_body_bytes = static_cast<size_t>(cfg.max_message_bytes);
  o.tls_cert_file = cfg.tls.cert_file;
  o.tls_key_file = cfg.tls.key_file;
  if (cfg.auth.protect_metrics) o.metrics_token = token;
  return o;
}

// An API (gRPC or HTTP) beyond loopback needs a token, or server.allow_unauthenticated.
Status CheckExposure(const ServerConfig& cfg, const std::string& token, StartupError* error) {
  if (!token.empty() || cfg.allow_unauthenticated) return Status::Ok();
  const std::pair<const char*, const std::string*> apis[] = {
      {"server.listen_address", &cfg.listen_address}, {"server.http_address", &cfg.http_address}};
  for (const auto& [key, address] : apis) {
    if (address->empty() || IsLoopbackAddress(*address)) continue;
    *error = StartupError::kBadConfig;
    return InvalidArgument(std::string(key) + ": '" + *address +
                           "' is reachable beyond this host but no token is set (set "
                           "server.auth.bearer_token, bearer_token_file or PAGODA_API_KEY; or "
                           "server.allow_unauthenticated: true to serve it without one)");
  }
  return Status::Ok();
}

struct Serving {
  std::unique_ptr<Model> model;
  Runtime runtime;
  std::unique_ptr<Metrics> metrics;
  ServingContext ctx;
};

// Loads the model and builds the runtime; on failure `*error` says what failed.
Status Prepare(const PagodaConfig& cfg, Serving& s, StartupError* error) {
  *error = StartupError::kFailed;
  // The token and what needs it first: a wrong setting fails before the model loads.
  PAGODA_ASSIGN_OR_RETURN(s.ctx.bearer_token, ReadToken(cfg.server.auth));
  PAGODA_RETURN_IF_ERROR(CheckExposure(cfg.server, s.ctx.bearer_token, error));
  if (cfg.server.auth.protect_metrics && s.ctx.bearer_token.empty()) {
    *error = StartupError::kBadConfig;
    return InvalidArgument(
        "server.auth.protect_metrics: needs a token (server.auth.bearer_token, "
        "bearer_token_file or the PAGODA_API_KEY environment variable)");
  }
  std::string path;
  PAGODA_RETURN_IF_ERROR(EnsureModel(cfg, &path));
  PAGODA_ASSIGN_OR_RETURN(
      s.model, LoadModel(path, [](const std::string& stage) { spdlog::info("model: {}", stage); }));
  PAGODA_ASSIGN_OR_RETURN(s.runtime, BuildRuntime(*s.model, cfg.runtime, error));
  *error = StartupError::kFailed;
  s.ctx.model_name = cfg.model.name.empty() ? s.model->config.name : cfg.model.name;
  s.metrics = std::make_unique<Metrics>(s.ctx.model_name, cfg.server.metrics_names);
  s.ctx.model = s.model.get();
  s.ctx.engine = s.runtime.engine.get();
  s.ctx.metrics = s.metrics.get();
  const BackendCapabilities& caps = s.runtime.backend->capabilities();
  s.ctx.backend_name = caps.name;
  s.ctx.block_size = caps.block_size;
  s.ctx.num_blocks = caps.num_blocks;
  s.ctx.max_tokens_limit = cfg.server.max_tokens_limit;
  s.ctx.max_model_len = s.runtime.engine->max_model_len();
  s.ctx.max_prompt_bytes = MaxPromptBytes(*s.model->tokenizer, s.ctx.max_model_len);
  *error = StartupError::kBadConfig;  // a missing template file or a template syntax error
  PAGODA_RETURN_IF_ERROR(LoadChatTemplate(cfg.model.chat_template, &s.ctx));
  if (!s.ctx.chat_template.ok()) spdlog::warn("{}", s.ctx.chat_template.status().message());
  *error = StartupError::kFailed;
  return Status::Ok();
}

// Builds and starts the gRPC server (Generation, health, reflection); sets *port. UNAVAILABLE
// when it cannot listen.
Result<std::unique_ptr<grpc::Server>> StartGrpc(const ServerConfig& cfg,
                                                std::shared_ptr<grpc::ServerCredentials> creds,
                                                GenerationService& service, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(cfg.listen_address, creds, port);
  // A second server on the same port fails to start instead of sharing it (gRPC sets
  // SO_REUSEPORT by default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(MakeMalformedRequestInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  RouteProtobufLogsToSpdlog();
  builder.SetMaxReceiveMessageSize(cfg.max_message_bytes);
  builder.SetMaxSendMessageSize(cfg.max_message_bytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || *port == 0) {
    return Status(StatusCode::kUnavailable,
                  "server.listen_address: cannot listen on " + cfg.listen_address);
  }
  return server;
}

// Flips the gRPC health to NOT_SERVING, once, when the backend turns unhealthy (the HTTP
// endpoint asks the backend directly). Called from the signal-wait loop.
void WatchBackendHealth(const Serving& s, grpc::Server& server, bool* reported) {
  if (*reported || s.runtime.backend->healthy()) return;
  *reported = true;
  spdlog::error("backend {} is unhealthy after a fatal error: health is now NOT_SERVING",
                s.ctx.backend_name);
  server.GetHealthCheckService()->SetServingStatus(false);
}

}  // namespace

int RunServer(const PagodaConfig& cfg) {
  SetupLogging(cfg.logging);
  // Signals are taken by WaitForSignal only: block them before any thread starts.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  InstallSigbusReport();
  std::unique_ptr<tbb::global_control> threads;
  if (cfg.runtime.cpu.threads > 0) {
    threads = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                    cfg.runtime.cpu.threads);
  }
  Serving s;
  auto creds = Credentials(cfg.server.tls);  // before the model loads: a bad file fails fast
  if (!creds.ok()) return StartupFailed(creds.status(), kExitStartupFailed);
  StartupError error = StartupError::kFailed;
  if (Status st = Prepare(cfg, s, &error); !st.ok()) {
    return StartupFailed(st, StartupExitCode(error));
  }
  Metrics* metrics = s.metrics.get();
  s.runtime.engine->SetFinishObserver([metrics](const RequestOutput& o) {
    metrics->OnRequestFinished(o.times, o.finish_reason, o.usage);
  });
  s.runtime.engine->Start();
  const Backend& backend = *s.runtime.backend;
  const auto metrics_text = [&] { return s.metrics->Render(s.runtime.engine->stats()); };
  const auto ready = [&] { return !s.ctx.draining.load(); };
  const auto healthy = [&] { return backend.healthy(); };
  HttpEndpoint metrics_http(metrics_text, ready, healthy), api_http(metrics_text, ready, healthy);
  if (!cfg.server.metrics_address.empty()) {
    if (Status st = metrics_http.Start(HttpOptionsFor(
            cfg.server, s.ctx.bearer_token, cfg.server.metrics_address, "server.metrics_address"));
        !st.ok()) {
      return StartupFailed(st, kExitStartupFailed);
    }
    spdlog::info("metrics on {}://{}/metrics (port {})", metrics_http.tls() ? "https" : "http",
                 cfg.server.metrics_address, metrics_http.port());
  }
  OpenAiApi openai(s.ctx);
  if (!cfg.server.http_address.empty()) {
    if (Status st = api_http.Start(HttpOptionsFor(cfg.server, s.ctx.bearer_token,
                                                  cfg.server.http_address, "server.http_address"),
                                   [&openai](httplib::Server& server) { openai.Register(server); });
        !st.ok()) {
      return StartupFailed(st, kExitStartupFailed);
    }
    spdlog::info("HTTP API on {}://{}/v1 (port {})", api_http.tls() ? "https" : "http",
                 cfg.server.http_address, api_http.port());
  }
  GenerationService service(s.ctx);
  int port = 0;
  auto server = StartGrpc(cfg.server, *creds, service, &port);
  if (!server.ok()) return StartupFailed(server.status(), kExitStartupFailed);
  spdlog::info(
      "serving {} on {} (port {}), backend {}, kernels {}, packed weights {} MiB, "
      "batch-invariant {}",
      s.ctx.model_name, cfg.server.listen_address, port, s.ctx.backend_name,
      backend.capabilities().kernels, backend.capabilities().packed_weight_bytes >> 20,
      backend.capabilities().batch_invariant ? "on" : "off");
  bool unhealthy_reported = false;
  const int sig = WaitForSignal([&] { WatchBackendHealth(s, **server, &unhealthy_reported); });
  spdlog::info("signal {}: draining (grace {} s)", sig, cfg.server.shutdown_grace_seconds);
  Drain(s.ctx, *s.runtime.engine, **server, cfg.server.shutdown_grace_seconds);
  (*server)->Wait();
  api_http.Stop();
  metrics_http.Stop();
  s.runtime.engine->Stop();
  spdlog::info("shut down cleanly");
  return kExitOk;
}

}  // namespace pagoda
