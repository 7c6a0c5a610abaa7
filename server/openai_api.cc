#include "server/openai_api.h"

#include <httplib.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "server/http_connection.h"
#include "server/openai_protocol.h"
#include "server/openai_response.h"
#include "server/request_log.h"

namespace pagoda {
namespace {

using nlohmann::json;

// How long a client told 429 (the waiting queue is full) should wait before it retries.
constexpr const char* kRetryAfterSeconds = "1";

void SendError(httplib::Response& res, const Status& st) {
  res.status = HttpStatusOf(st);
  if (res.status == 429) res.set_header("Retry-After", kRetryAfterSeconds);
  res.set_content(OpenAiErrorBody(st), "application/json");
}

void SendJson(httplib::Response& res, const json& body) {
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Admit on the request's Authorization header.
Status AdmitHttp(const ServingContext& ctx, const httplib::Request& req) {
  if (!req.has_header("Authorization")) return Admit(ctx, std::nullopt);
  const std::string value = req.get_header_value("Authorization");
  return Admit(ctx, std::string_view(value));
}

// NOT_FOUND unless `model` is empty or the served model's name.
Status CheckModel(const ServingContext& ctx, const std::string& model) {
  if (model.empty() || model == ctx.model_name) return Status::Ok();
  return NotFound("model: '" + model + "' does not exist (this server serves '" + ctx.model_name +
                  "')");
}

json ModelCard(const ServingContext& ctx) {
  return {{"id", ctx.model_name},
          {"object", "model"},
          {"created", UnixNow()},
          {"owned_by", "pagoda"},
          {"max_model_len", ctx.engine->max_model_len()}};
}

// One generation: what the handler set up and the content provider streams.
struct Generation {
  Generation(ServingContext& c, OpenAiRequest r, std::vector<std::string> ids, std::string path)
      : ctx(c),
        request(std::move(r)),
        id((request.endpoint == OpenAiEndpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") +
           ids.front()),
        engine_ids(std::move(ids)),
        method("POST " + std::move(path)),
        answer(request, id, ctx.model_name, UnixNow(), *ctx.model->tokenizer) {}

  void Log(const RequestOutput& last, int status) const {
    LogRequest({"http", method, id, status, request.stream}, last);
  }

  // Aborts the request of a client that is gone and logs it with status 499 (nginx's "client
  // closed request") once the engine has finished it (within a step).
  void AbortAndLog() {
    for (const std::string& engine_id : engine_ids) ctx.engine->Abort(engine_id);
    const auto deadline = EngineClock::now() + std::chrono::seconds(5);
    RequestOutput o;
    while (stream->Pop(&o, deadline)) {
      if (o.request_finished) return Log(o, 499);
    }
  }

  ServingContext& ctx;
  OpenAiRequest request;
  std::string id;
  std::vector<std::string> engine_ids;  // one per prompt
  std::string method;
  OpenAiAnswer answer;
  std::vector<std::shared_ptr<RequestStream>> prompt_streams;  // one per prompt
  std::shared_ptr<RequestStream> stream;  // the one prompt's, or MergeStreams of them
  bool done = false;
  std::string error;  // a backend failure (kError), not streaming
};

void AddUsage(const Usage& from, Usage* to) {
  to->prompt_tokens += from.prompt_tokens;
  to->completion_tokens += from.completion_tokens;
  to->cached_prompt_tokens += from.cached_prompt_tokens;
}

// Several prompts' streams as one: choice indexes offset by prompt (prompt i's sample j is
// choice i * n + j), and one last output (request_finished, with the summed usage) once every
// prompt has finished. Fed by the streams' listeners, on the engine thread.
std::shared_ptr<RequestStream> MergeStreams(
    const std::vector<std::shared_ptr<RequestStream>>& streams, int32_t n) {
  struct State {
    std::mutex mu;
    std::shared_ptr<RequestStream> merged = std::make_shared<RequestStream>();
    size_t unfinished = 0;
    Usage usage;
  };
  auto state = std::make_shared<State>();
  state->unfinished = streams.size();
  for (size_t i = 0; i < streams.size(); ++i) {
    const int32_t offset = static_cast<int32_t>(i) * n;
    streams[i]->SetListener([state, from = streams[i].get(), offset] {
      std::lock_guard<std::mutex> lock(state->mu);
      RequestOutput o;
      while (from->Pop(&o, EngineClock::now())) {  // what is queued, without waiting
        o.index += offset;
        if (o.request_finished) {
          AddUsage(o.usage, &state->usage);
          o.request_finished = --state->unfinished == 0;
          o.usage = state->usage;
        }
        state->merged->Push(std::move(o));
      }
    });
  }
  return state->merged;
}

// With several prompts, an INVALID_ARGUMENT about prompt `i` names it: "prompt[i]: ...".
Status NamePrompt(const OpenAiRequest& parsed, size_t i, const Status& st) {
  if (parsed.more_prompts.empty() || st.code() != StatusCode::kInvalidArgument) return st;
  return InvalidArgument("prompt[" + std::to_string(i) + "]: " + st.message());
}

// Builds (every prompt's request first, so that a bad one submits none) and submits; a submit
// that fails aborts the ones before it.
Status SubmitPrompts(ServingContext& ctx, const OpenAiRequest& parsed, Generation* g,
                     std::vector<Request> built) {
  for (Request& r : built) {
    Result<std::shared_ptr<RequestStream>> stream = ctx.engine->Submit(std::move(r));
    if (!stream.ok()) {
      for (size_t i = 0; i < g->prompt_streams.size(); ++i) ctx.engine->Abort(g->engine_ids[i]);
      return NamePrompt(parsed, g->prompt_streams.size(), stream.status());
    }
    g->prompt_streams.push_back(*std::move(stream));
  }
  g->stream = g->prompt_streams.size() == 1
                  ? g->prompt_streams.front()
                  : MergeStreams(g->prompt_streams, parsed.api.sampling.n);
  return Status::Ok();
}

// Admits, parses, builds and submits.
Result<std::shared_ptr<Generation>> Submit(ServingContext& ctx, OpenAiEndpoint endpoint,
                                           const httplib::Request& req) {
  PAGODA_RETURN_IF_ERROR(AdmitHttp(ctx, req));
  PAGODA_ASSIGN_OR_RETURN(OpenAiRequest parsed, ParseOpenAiRequest(endpoint, req.body));
  PAGODA_RETURN_IF_ERROR(CheckModel(ctx, parsed.model));
  std::vector<Request> built;
  std::vector<std::string> ids;
  for (const ApiRequest& api : PromptRequests(parsed)) {
    Result<Request> r = BuildRequest(ctx, api);
    if (!r.ok()) return NamePrompt(parsed, built.size(), r.status());
    ids.push_back(r->request_id);
    built.push_back(*std::move(r));
  }
  auto g = std::make_shared<Generation>(ctx, parsed, std::move(ids), req.path);
  PAGODA_RETURN_IF_ERROR(SubmitPrompts(ctx, parsed, g.get(), std::move(built)));
  return g;
}

// How long a content provider waits for engine outputs before it checks the client again.
constexpr auto kClientCheckPeriod = std::chrono::milliseconds(100);

// Streaming: writes the SSE events of the outputs that come within kClientCheckPeriod; false
// when the client is gone (a failed write, or a closed connection while waiting).
bool PumpEvents(Generation& g, httplib::DataSink& sink) {
  const auto until = EngineClock::now() + kClientCheckPeriod;
  RequestOutput o;
  while (!g.done && g.stream->Pop(&o, until)) {
    std::string events = g.answer.StreamEvents(o);
    if (o.request_finished) {
      events += g.answer.StreamEnd(o.usage);
      g.done = true;
      g.Log(o, 200);
    }
    if (!sink.write(events.data(), events.size())) return false;
  }
  if (g.done) sink.done();
  return g.done || sink.is_writable();
}

// Streaming: answers from the engine's outputs as they come (chunked transfer), so that a client
// that disconnects is noticed within kClientCheckPeriod and its request aborted.
void RespondStreaming(std::shared_ptr<Generation> g, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [g](size_t, httplib::DataSink& sink) { return PumpEvents(*g, sink); },
      [g](bool) {
        if (!g->done) g->AbortAndLog();  // the client is gone
      });
}

// Not streaming: waits in the handler for the whole answer, so that its status line can say
// how it went (500 when the backend failed the request's step), checking every
// kClientCheckPeriod meanwhile whether the client hung up (then the request is aborted).
void RespondWhole(Generation& g, const httplib::Request& req, httplib::Response& res) {
  // Found at the first check, so answers done within kClientCheckPeriod never look it up.
  std::optional<HttpConnection> connection;
  RequestOutput o;
  for (auto next_check = EngineClock::now() + kClientCheckPeriod;;) {
    if (EngineClock::now() >= next_check) {
      if (!connection) connection = HttpConnection::Of(req);
      if (connection->PeerClosed()) {
        g.AbortAndLog();
        res.status = 499;  // never reaches the client
        return;
      }
      next_check = EngineClock::now() + kClientCheckPeriod;
    }
    if (!g.stream->Pop(&o, next_check)) continue;
    g.answer.Add(o);
    if (o.finish_reason == FinishReason::kError) g.error = o.error;
    if (o.request_finished) break;
  }
  g.done = true;
  if (!g.error.empty()) {
    g.Log(o, 500);
    return SendError(res, Internal("generation failed: " + g.error));
  }
  g.Log(o, 200);
  res.set_content(g.answer.Body(o.usage), "application/json");
}

void Generate(ServingContext& ctx, OpenAiEndpoint endpoint, const httplib::Request& req,
              httplib::Response& res) {
  Result<std::shared_ptr<Generation>> g = Submit(ctx, endpoint, req);
  if (!g.ok()) return SendError(res, g.status());
  if ((*g)->request.stream) return RespondStreaming(std::move(g).value(), res);
  RespondWhole(**g, req, res);
}

// The prompt tokens of a completions ("prompt") or chat ("messages") body.
Result<std::vector<int32_t>> PromptTokens(ServingContext& ctx, const httplib::Request& req) {
  PAGODA_RETURN_IF_ERROR(AdmitHttp(ctx, req));
  const json j = json::parse(req.body, nullptr, false);
  const bool chat = j.is_object() && j.contains("messages");
  PAGODA_ASSIGN_OR_RETURN(
      OpenAiRequest parsed,
      ParseOpenAiRequest(chat ? OpenAiEndpoint::kChatCompletions : OpenAiEndpoint::kCompletions,
                         req.body));
  if (!parsed.more_prompts.empty()) {
    return InvalidArgument("prompt: expected one prompt (a string or token ids)");
  }
  parsed.api.max_tokens = 1;  // only the prompt is wanted
  PAGODA_ASSIGN_OR_RETURN(Request built, BuildRequest(ctx, parsed.api));
  return std::move(built.prompt_token_ids);
}

void Tokenize(ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  Result<std::vector<int32_t>> ids = PromptTokens(ctx, req);
  if (!ids.ok()) return SendError(res, ids.status());
  SendJson(
      res,
      {{"tokens", *ids}, {"count", ids->size()}, {"max_model_len", ctx.engine->max_model_len()}});
}

void Detokenize(ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (Status st = AdmitHttp(ctx, req); !st.ok()) return SendError(res, st);
  const json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) {
    return SendError(res, InvalidArgument("tokens: required (an array of token ids)"));
  }
  const Tokenizer& tok = *ctx.model->tokenizer;
  std::vector<int32_t> ids;
  for (const json& id : j["tokens"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok.vocab_size()) {
      return SendError(res,
                       InvalidArgument("tokens: " + id.dump() + " is outside the vocabulary [0, " +
                                       std::to_string(tok.vocab_size()) + ")"));
    }
    ids.push_back(id.get<int32_t>());
  }
  SendJson(res, {{"prompt", tok.Decode(ids)}});
}

}  // namespace

void OpenAiApi::Register(httplib::Server& server) {
  ServingContext& ctx = ctx_;
  // Errors without a body (cpp-httplib's own: unknown route, body too large, ...) get one.
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 404   ? "no route " + req.method + " " + req.path
                                : res.status == 413 ? "body: larger than server.max_message_bytes"
                                                    : "HTTP " + std::to_string(res.status);
    res.set_content(OpenAiErrorBody(res.status, message), "application/json");
  });
  server.Get("/v1/models", [&ctx](const httplib::Request& req, httplib::Response& res) {
    if (Status st = AdmitHttp(ctx, req); !st.ok()) return SendError(res, st);
    SendJson(res, {{"object", "list"}, {"data", json::array({ModelCard(ctx)})}});
  });
  server.Get(R"(/v1/models/(.+))", [&ctx](const httplib::Request& req, httplib::Response& res) {
    Status st = AdmitHttp(ctx, req);
    if (st.ok()) st = CheckModel(ctx, req.matches[1]);
    if (!st.ok()) return SendError(res, st);
    SendJson(res, ModelCard(ctx));
  });
  server.Post("/v1/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
    Generate(ctx, OpenAiEndpoint::kCompletions, req, res);
  });
  server.Post("/v1/chat/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
    Generate(ctx, OpenAiEndpoint::kChatCompletions, req, res);
  });
  server.Post("/tokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    Tokenize(ctx, req, res);
  });
  server.Post("/detokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    Detokenize(ctx, req, res);
  });
}

}  // namespace pagoda
