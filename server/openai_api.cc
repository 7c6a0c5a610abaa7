#include "server/openai_api.h"

#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"
#include "server/openai_response.h"
#include "server/request_log.h"

namespace pagoda {
namespace {

using nlohmann::json;

void SendError(httplib::Response& res, const Status& st) {
  res.status = HttpStatusOf(st);
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
          {"max_model_len", ctx.model->config.context_length}};
}

// One generation: what the handler set up and the content provider streams.
struct Generation {
  Generation(ServingContext& c, OpenAiRequest r, std::string engine_id, std::string path)
      : ctx(c),
        request(std::move(r)),
        id((request.endpoint == OpenAiEndpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") +
           engine_id),
        engine_id(std::move(engine_id)),
        method("POST " + std::move(path)),
        answer(request, id, ctx.model_name, UnixNow(), *ctx.model->tokenizer) {}

  void Log(const RequestOutput& last, int status) const {
    LogRequest({"http", method, id, status, request.stream}, last);
  }

  ServingContext& ctx;
  OpenAiRequest request;
  std::string id;
  std::string engine_id;
  std::string method;
  OpenAiAnswer answer;
  std::shared_ptr<RequestStream> stream;
  bool done = false;
};

// Admits, parses, builds and submits.
Result<std::shared_ptr<Generation>> Submit(ServingContext& ctx, OpenAiEndpoint endpoint,
                                           const httplib::Request& req) {
  PAGODA_RETURN_IF_ERROR(AdmitHttp(ctx, req));
  PAGODA_ASSIGN_OR_RETURN(OpenAiRequest parsed, ParseOpenAiRequest(endpoint, req.body));
  PAGODA_RETURN_IF_ERROR(CheckModel(ctx, parsed.model));
  PAGODA_ASSIGN_OR_RETURN(Request built, BuildRequest(ctx, parsed.api));
  auto g = std::make_shared<Generation>(ctx, std::move(parsed), built.request_id, req.path);
  PAGODA_ASSIGN_OR_RETURN(g->stream, ctx.engine->Submit(std::move(built)));
  return g;
}

// Writes the SSE events of the next output (waiting up to 100 ms for one); false when the
// client is gone.
bool PumpEvents(Generation& g, httplib::DataSink& sink) {
  RequestOutput o;
  if (!g.stream->Pop(&o, EngineClock::now() + std::chrono::milliseconds(100))) {
    return sink.is_writable();
  }
  std::string events = g.answer.StreamEvents(o);
  if (o.request_finished) {
    events += g.answer.StreamEnd(o.usage);
    g.done = true;
    g.Log(o, 200);
  }
  if (!sink.write(events.data(), events.size())) return false;
  if (g.done) sink.done();
  return true;
}

void Stream(std::shared_ptr<Generation> g, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [g](size_t, httplib::DataSink& sink) { return PumpEvents(*g, sink); },
      [g](bool) {
        if (!g->done) g->ctx.engine->Abort(g->engine_id);  // the client is gone
      });
}

void Gather(Generation& g, httplib::Response& res) {
  RequestOutput o;
  std::string error;
  do {
    g.stream->Pop(&o);
    g.answer.Add(o);
    if (o.finish_reason == FinishReason::kError) error = o.error;
  } while (!o.request_finished);
  if (!error.empty()) {
    SendError(res, Internal("generation failed: " + error));
  } else {
    res.status = 200;
    res.set_content(g.answer.Body(o.usage), "application/json");
  }
  g.Log(o, res.status);
}

void Generate(ServingContext& ctx, OpenAiEndpoint endpoint, const httplib::Request& req,
              httplib::Response& res) {
  Result<std::shared_ptr<Generation>> g = Submit(ctx, endpoint, req);
  if (!g.ok()) return SendError(res, g.status());
  if ((*g)->request.stream) {
    Stream(std::move(g).value(), res);
  } else {
    Gather(**g, res);
  }
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
  parsed.api.max_tokens = 1;  // only the prompt is wanted
  PAGODA_ASSIGN_OR_RETURN(Request built, BuildRequest(ctx, parsed.api));
  return std::move(built.prompt_token_ids);
}

void Tokenize(ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  Result<std::vector<int32_t>> ids = PromptTokens(ctx, req);
  if (!ids.ok()) return SendError(res, ids.status());
  SendJson(res, {{"tokens", *ids},
                 {"count", ids->size()},
                 {"max_model_len", ctx.model->config.context_length}});
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
