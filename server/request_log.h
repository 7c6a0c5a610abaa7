// The one log line per finished generation request, on every API (gRPC Generate / Complete
// and the HTTP API):
//   request api=http POST /v1/chat/completions id=chatcmpl-req-7 status=200 stream=true
//   prompt_tokens=12 completion_tokens=40 cached_tokens=0 finish=stop queue_ms=0.1
//   ttft_ms=35.2 e2e_ms=410.7
// at info level (with logging.format json it is the "msg" of one JSON object).
#pragma once

#include <string_view>

#include "scheduler/request.h"

namespace pagoda {

struct RequestLogLine {
  std::string_view api;     // "http" or "grpc"
  std::string_view method;  // "POST /v1/completions", "Generate", "Complete"
  std::string_view id;
  int status = 200;  // HTTP status; gRPC: 200 OK, 500 a backend failure
  bool stream = false;
};

// Logs `line` with the usage and latencies of the request's last output `last`.
void LogRequest(const RequestLogLine& line, const RequestOutput& last);

}  // namespace pagoda
