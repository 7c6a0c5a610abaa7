#include "server/openai_protocol.h"

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "server/openai_constraint.h"

namespace pagoda {
namespace {

using nlohmann::json;

Status NotSupported(const std::string& field) {
  return InvalidArgument(field + ": not supported yet");
}

// Reads an optional field of type T; INVALID_ARGUMENT naming it when the type is wrong.
template <typename T>
Status Get(const json& j, const char* key, std::optional<T>* out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  bool ok = false;
  if constexpr (std::is_same_v<T, bool>) {
    ok = it->is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    ok = it->is_number_integer() &&
         (it->is_number_unsigned() ? std::in_range<T>(it->get<uint64_t>())
                                   : std::in_range<T>(it->get<int64_t>()));
  } else if constexpr (std::is_floating_point_v<T>) {
    ok = it->is_number();
  } else {
    ok = it->is_string();
  }
  if (!ok) return InvalidArgument(std::string(key) + ": wrong type or out of range");
  *out = it->get<T>();
  return Status::Ok();
}

template <typename T>
Status GetInto(const json& j, const char* key, T* out) {
  std::optional<T> v;
  PAGODA_RETURN_IF_ERROR(Get(j, key, &v));
  if (v) *out = *v;
  return Status::Ok();
}

Result<std::vector<int32_t>> TokenIds(const json& j, const std::string& field) {
  std::vector<int32_t> ids;
  for (const json& id : j) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return InvalidArgument(field + ": expected token ids (integers >= 0)");
    }
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

// One prompt: "text" or [ids...].
Status ParseOnePrompt(const json& p, const std::string& field, OpenAiPrompt* out) {
  if (p.is_string()) {
    out->input = ApiInput::kPrompt;
    out->prompt = p.get<std::string>();
    return Status::Ok();
  }
  if (!p.is_array()) return InvalidArgument(field + ": expected a string or token ids");
  out->input = ApiInput::kPromptTokenIds;
  PAGODA_ASSIGN_OR_RETURN(out->prompt_token_ids, TokenIds(p, field));
  return Status::Ok();
}

// prompt: "text", [ids...], or an array of those: ["text", ...], [[ids...], ...].
Status ParsePrompt(const json& j, OpenAiRequest* r) {
  const auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return InvalidArgument("prompt: required");
  std::vector<const json*> prompts = {&*it};
  if (it->is_array() && !it->empty() && (it->front().is_string() || it->front().is_array())) {
    prompts.clear();
    for (const json& p : *it) prompts.push_back(&p);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string field = prompts.size() == 1 ? "prompt" : "prompt[" + std::to_string(i) + "]";
    OpenAiPrompt p;
    PAGODA_RETURN_IF_ERROR(ParseOnePrompt(*prompts[i], field, &p));
    if (i > 0) {
      r->more_prompts.push_back(std::move(p));
      continue;
    }
    r->api.input = p.input;
    r->api.prompt = std::move(p.prompt);
    r->api.prompt_token_ids = std::move(p.prompt_token_ids);
  }
  return Status::Ok();
}

// content: "text" or [{"type": "text", "text": "..."}, ...] (joined with "\n", as vLLM does).
Result<std::string> MessageContent(const json& content, const std::string& field) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return InvalidArgument(field + ": expected a string or parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.find("type") == part.end() || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return NotSupported(field + ": parts other than {\"type\": \"text\"}");
    }
    if (&part != &content.front()) text += '\n';
    text += part["text"].get<std::string>();
  }
  return text;
}

Status ParseMessages(const json& j, ApiRequest* api) {
  const auto it = j.find("messages");
  if (it == j.end() || !it->is_array()) return InvalidArgument("messages: required (an array)");
  api->input = ApiInput::kMessages;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return InvalidArgument(field + ".role: required (a string)");
    }
    if (m.contains("tool_calls") || m["role"] == "function") {
      return NotSupported(field + ": tool calls");
    }
    PAGODA_ASSIGN_OR_RETURN(std::string content,
                            MessageContent(m.value("content", json()), field + ".content"));
    api->messages.push_back({m["role"].get<std::string>(), std::move(content)});
  }
  PAGODA_RETURN_IF_ERROR(GetInto(j, "add_generation_prompt", &api->add_generation_prompt));
  if (const auto kw = j.find("chat_template_kwargs"); kw != j.end() && !kw->is_null()) {
    if (!kw->is_object()) return InvalidArgument("chat_template_kwargs: expected an object");
    api->chat_template_kwargs = nlohmann::ordered_json::parse(kw->dump());
  }
  return Status::Ok();
}

// Fields of other features, answered 400 until they exist.
Status RejectUnsupported(const json& j) {
  for (const char* key : {"tools", "functions", "function_call", "suffix"}) {
    if (j.contains(key) && !j[key].is_null()) return NotSupported(key);
  }
  if (j.contains("tool_choice") && !j["tool_choice"].is_null() && j["tool_choice"] != "none") {
    return NotSupported("tool_choice");
  }
  return Status::Ok();
}

Status ParseStop(const json& j, ApiRequest* api) {
  const auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (it->is_string()) {
    api->stop.push_back(it->get<std::string>());
    return Status::Ok();
  }
  if (!it->is_array()) return InvalidArgument("stop: expected a string or an array of strings");
  for (const json& s : *it) {
    if (!s.is_string()) return InvalidArgument("stop: expected a string or an array of strings");
    api->stop.push_back(s.get<std::string>());
  }
  return Status::Ok();
}

// logit_bias: {"<token id>": bias, ...} (OpenAI's shape: JSON keys are strings). Ranges, the
// vocabulary and the entry limit are the engine's checks (ValidateSamplingParams).
Status ParseLogitBias(const json& j, SamplingParams* s) {
  const auto it = j.find("logit_bias");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return InvalidArgument("logit_bias: expected an object of token id: bias");
  for (const auto& [key, value] : it->items()) {
    const std::string field = "logit_bias." + key;
    int32_t id = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || key.empty()) {
      return InvalidArgument(field + ": expected a token id (an integer) as the key");
    }
    if (!value.is_number()) return InvalidArgument(field + ": expected a number (the bias)");
    s->logit_bias.emplace_back(id, value.get<float>());
  }
  return Status::Ok();
}

Status ParseSampling(const json& j, OpenAiEndpoint endpoint, SamplingParams* s,
                     SamplingGiven* given) {
  const auto has = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  given->temperature = has("temperature");
  given->top_p = has("top_p");
  given->top_k = has("top_k");
  given->repetition_penalty = has("repetition_penalty");
  PAGODA_RETURN_IF_ERROR(GetInto(j, "temperature", &s->temperature));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "top_p", &s->top_p));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "top_k", &s->top_k));
  if (s->top_k == -1) s->top_k = 0;  // vLLM's "no top-k"
  PAGODA_RETURN_IF_ERROR(GetInto(j, "min_p", &s->min_p));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "repetition_penalty", &s->repetition_penalty));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "presence_penalty", &s->presence_penalty));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "frequency_penalty", &s->frequency_penalty));
  PAGODA_RETURN_IF_ERROR(Get(j, "seed", &s->seed));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "n", &s->n));
  std::optional<int32_t> best_of;
  PAGODA_RETURN_IF_ERROR(Get(j, "best_of", &best_of));
  if (best_of && *best_of != s->n) return NotSupported("best_of");
  PAGODA_RETURN_IF_ERROR(ParseLogitBias(j, s));
  if (endpoint == OpenAiEndpoint::kCompletions) {  // logprobs: the number of top logprobs
    std::optional<int32_t> logprobs;
    PAGODA_RETURN_IF_ERROR(Get(j, "logprobs", &logprobs));
    s->logprobs = logprobs.has_value();
    s->top_logprobs = logprobs.value_or(0);
  } else {  // logprobs: bool, top_logprobs: the number
    PAGODA_RETURN_IF_ERROR(GetInto(j, "logprobs", &s->logprobs));
    PAGODA_RETURN_IF_ERROR(GetInto(j, "top_logprobs", &s->top_logprobs));
    if (s->top_logprobs > 0 && !s->logprobs) {
      return InvalidArgument("top_logprobs: needs \"logprobs\": true");
    }
  }
  return Status::Ok();
}

Status ParseStopping(const json& j, OpenAiEndpoint endpoint, ApiRequest* api) {
  PAGODA_RETURN_IF_ERROR(Get(j, "max_tokens", &api->max_tokens));
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    std::optional<int32_t> max_completion_tokens;
    PAGODA_RETURN_IF_ERROR(Get(j, "max_completion_tokens", &max_completion_tokens));
    if (max_completion_tokens) api->max_tokens = max_completion_tokens;
  }
  PAGODA_RETURN_IF_ERROR(ParseStop(j, api));
  if (const auto ids = j.find("stop_token_ids"); ids != j.end() && !ids->is_null()) {
    if (!ids->is_array()) return InvalidArgument("stop_token_ids: expected an array");
    PAGODA_ASSIGN_OR_RETURN(api->stop_token_ids, TokenIds(*ids, "stop_token_ids"));
  }
  PAGODA_RETURN_IF_ERROR(GetInto(j, "ignore_eos", &api->ignore_eos));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "speculative", &api->speculative));
  PAGODA_RETURN_IF_ERROR(
      GetInto(j, "include_stop_str_in_output", &api->include_stop_str_in_output));
  return Status::Ok();
}

Status ParseStreamOptions(const json& j, OpenAiRequest* r) {
  PAGODA_RETURN_IF_ERROR(GetInto(j, "stream", &r->stream));
  const auto it = j.find("stream_options");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!r->stream) return InvalidArgument("stream_options: only with \"stream\": true");
  if (!it->is_object()) return InvalidArgument("stream_options: expected an object");
  return GetInto(*it, "include_usage", &r->include_usage);
}

// ParseOpenAiRequest without the safety net.
Result<OpenAiRequest> Parse(OpenAiEndpoint endpoint, std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("body: expected a JSON object");
  }
  OpenAiRequest r;
  r.endpoint = endpoint;
  PAGODA_RETURN_IF_ERROR(RejectUnsupported(j));
  std::optional<std::string> model;
  PAGODA_RETURN_IF_ERROR(Get(j, "model", &model));
  r.model = model.value_or("");
  ApiRequest& api = r.api;
  PAGODA_RETURN_IF_ERROR(endpoint == OpenAiEndpoint::kCompletions ? ParsePrompt(j, &r)
                                                                  : ParseMessages(j, &api));
  PAGODA_RETURN_IF_ERROR(ParseSampling(j, endpoint, &api.sampling, &api.sampling_given));
  PAGODA_RETURN_IF_ERROR(ParseStopping(j, endpoint, &api));
  PAGODA_RETURN_IF_ERROR(ParseStreamOptions(j, &r));
  PAGODA_RETURN_IF_ERROR(ParseOpenAiConstraint(j, &api.constraint));
  PAGODA_RETURN_IF_ERROR(Get(j, "add_special_tokens", &api.add_special_tokens));
  PAGODA_RETURN_IF_ERROR(Get(j, "parse_special", &api.parse_special));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "priority", &api.priority));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "request_id", &api.request_id));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "return_tokens_as_token_ids", &r.tokens_as_ids));
  PAGODA_RETURN_IF_ERROR(GetInto(j, "echo", &r.echo));
  if (r.echo && endpoint == OpenAiEndpoint::kChatCompletions) return NotSupported("echo");
  if (r.echo && api.sampling.logprobs) return NotSupported("echo: with logprobs");
  return r;
}

}  // namespace

std::vector<ApiRequest> PromptRequests(const OpenAiRequest& request) {
  std::vector<ApiRequest> out = {request.api};
  for (size_t i = 0; i < request.more_prompts.size(); ++i) {
    const OpenAiPrompt& p = request.more_prompts[i];
    ApiRequest& a = out.emplace_back(request.api);
    a.input = p.input;
    a.prompt = p.prompt;
    a.prompt_token_ids = p.prompt_token_ids;
    if (!a.request_id.empty()) a.request_id += "-" + std::to_string(i + 1);
  }
  return out;
}

Result<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body) {
  try {  // the parser checks types before reading; a JSON exception here is a missed check
    return Parse(endpoint, body);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("body: ") + e.what());
  }
}

int HttpStatusOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kFailedPrecondition:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnimplemented:
      return 501;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

std::string OpenAiErrorBody(const Status& status) {
  return OpenAiErrorBody(HttpStatusOf(status), status.message());
}

std::string OpenAiErrorBody(int http, const std::string& m) {
  const char* type = http == 401   ? "authentication_error"
                     : http == 404 ? "not_found_error"
                     : http == 429 ? "rate_limit_error"
                     : http < 500  ? "invalid_request_error"
                                   : "server_error";
  // The field the message starts with ("max_tokens: ..."), when it names one.
  const size_t colon = m.find(": ");
  json param = nullptr;
  if (http == 400 && colon != std::string::npos && m.find(' ') >= colon) {
    param = m.substr(0, colon);
  }
  json body = {{"error", {{"message", m}, {"type", type}, {"param", param}, {"code", http}}}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace pagoda
