#include "server/malformed_request.h"

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>
#include <string>

namespace pagoda {
namespace {

using grpc::experimental::InterceptionHookPoints;

// One per call. gRPC's server hands POST_RECV_MESSAGE a null message when the request did not
// parse; the status the callback API then sends (UNIMPLEMENTED, no details) is rewritten.
class MalformedRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestInterceptor(std::string method) : method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      malformed_ = true;
    }
    if (malformed_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          "request: not a valid protobuf encoding of " + method_ +
              "'s request message (malformed bytes, a wrong message type, or a string field "
              "that is not UTF-8)"));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool malformed_ = false;
};

class MalformedRequestInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // Streams of requests see a null message at their end (the client's half-close), so only
    // the calls with one request message are watched.
    using Type = grpc::experimental::ServerRpcInfo::Type;
    if (info->type() != Type::UNARY && info->type() != Type::SERVER_STREAMING) return nullptr;
    return new MalformedRequestInterceptor(info->method() != nullptr ? info->method() : "?");
  }
};

// libprotobuf's handler is a plain function, so its throttle state is process-wide.
struct ProtobufLogThrottle {
  std::mutex mu;
  std::chrono::steady_clock::time_point last_logged{};
  long dropped = 0;
};

ProtobufLogThrottle& Throttle() {
  static ProtobufLogThrottle throttle;
  return throttle;
}

void HandleProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                       const std::string& message) {
  if (level < google::protobuf::LOGLEVEL_ERROR) {
    spdlog::debug("libprotobuf {}:{}: {}", filename, line, message);
    return;
  }
  ProtobufLogThrottle& t = Throttle();
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.last_logged != std::chrono::steady_clock::time_point{} &&
      now - t.last_logged < std::chrono::seconds(10)) {
    ++t.dropped;
    return;
  }
  spdlog::warn("libprotobuf: {}{}", message,
               t.dropped > 0 ? " (" + std::to_string(t.dropped) + " more such lines dropped)"
                             : std::string());
  t.last_logged = now;
  t.dropped = 0;
}

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeMalformedRequestInterceptorFactory() {
  return std::make_unique<MalformedRequestInterceptorFactory>();
}

void RouteProtobufLogsToSpdlog() { google::protobuf::SetLogHandler(&HandleProtobufLog); }

}  // namespace pagoda
