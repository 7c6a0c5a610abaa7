// OpenAiApi: the OpenAI-compatible HTTP API on the HTTP listener (server.http_address):
//   GET  /v1/models, /v1/models/{id}   the served model;
//   POST /v1/completions               prompt -> text (server/openai_protocol.h for fields);
//   POST /v1/chat/completions          messages rendered with the chat template -> message;
//   POST /tokenize, /detokenize        vLLM's shapes ({"prompt"|"messages"} -> {"tokens",
//                                      "count", "max_model_len"}; {"tokens"} -> {"prompt"}).
// Every route checks `authorization: Bearer <token>` (Admit: 401) and answers errors in
// OpenAI's shape (server/openai_protocol.h). Requests go through the shared translation layer
// (server/api_request.h) to Engine::Submit. "stream": true answers Server-Sent Events
// (server/openai_response.h). Answers are written as the engine's outputs come (chunked
// transfer encoding, also without "stream"), so a client that disconnects -- a failed write,
// or a closed connection noticed within 100 ms -- has its request aborted in the engine at once
// (logged with status 499); so has one that stops reading for server.http_timeout_seconds.
// Without "stream", a backend failure mid-request is an error body after the 200 status.
// Each finished generation logs one line (server/request_log.h).
#pragma once

#include "server/serving_context.h"

namespace httplib {
class Server;
}

namespace pagoda {

class OpenAiApi {
 public:
  explicit OpenAiApi(ServingContext& ctx) : ctx_(ctx) {}
  // Adds the routes; `server` must not outlive this object.
  void Register(httplib::Server& server);

 private:
  ServingContext& ctx_;
};

}  // namespace pagoda
