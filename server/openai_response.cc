#include "server/openai_response.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace pagoda {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Event(const json& j) { return "data: " + Dump(j) + "\n\n"; }

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

json Bytes(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(c);
  return out;
}

// A token as logprobs show it: its bytes, or "token_id:N".
struct TokenText {
  const Tokenizer& tokenizer;
  bool as_ids;
  std::string operator()(int32_t id) const {
    return as_ids ? "token_id:" + std::to_string(id) : tokenizer.TokenBytes(id);
  }
};

// Chat shape: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
json ChatLogprobs(const std::vector<TokenLogprob>& lps, const TokenText& tok) {
  json content = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string t = tok(lp.token_id);
    json top = json::array();
    for (const auto& [id, logprob] : lp.top) {
      const std::string s = tok(id);
      top.push_back({{"token", s}, {"logprob", logprob}, {"bytes", Bytes(s)}});
    }
    content.push_back(
        {{"token", t}, {"logprob", lp.logprob}, {"bytes", Bytes(t)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// Completions shape: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset};
// `offset` is where the first token's text starts in the choice's text (advanced here).
json CompletionLogprobs(const std::vector<TokenLogprob>& lps, const TokenText& tok,
                        size_t* offset) {
  json tokens = json::array(), logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  for (const TokenLogprob& lp : lps) {
    const std::string t = tok(lp.token_id);
    tokens.push_back(t);
    logprobs.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, logprob] : lp.top) top[tok(id)] = logprob;
    tops.push_back(top);
    offsets.push_back(*offset);
    *offset += tok.tokenizer.TokenBytes(lp.token_id).size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", logprobs},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json ReasonJson(const std::string& reason) { return reason.empty() ? json(nullptr) : json(reason); }

}  // namespace

OpenAiAnswer::OpenAiAnswer(const OpenAiRequest& request, std::string id, std::string model,
                           int64_t created, const Tokenizer& tokenizer)
    : chat_(request.endpoint == OpenAiEndpoint::kChatCompletions),
      logprobs_(request.api.sampling.logprobs),
      include_usage_(request.include_usage),
      tokens_as_ids_(request.tokens_as_ids),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      tokenizer_(tokenizer),
      n_(std::max(request.api.sampling.n, 1)) {
  if (!request.echo) return;
  for (const ApiRequest& p : PromptRequests(request)) {
    echo_.push_back(p.input == ApiInput::kPrompt ? p.prompt : tokenizer.Decode(p.prompt_token_ids));
  }
}

std::string OpenAiAnswer::EchoOnce(int32_t index, Choice& c) {
  if (echo_.empty() || c.started) return "";
  c.started = true;
  const size_t prompt = static_cast<size_t>(index / n_);
  return prompt < echo_.size() ? echo_[prompt] : "";
}

OpenAiAnswer::Choice& OpenAiAnswer::ChoiceAt(int32_t index) {
  if (choices_.size() <= static_cast<size_t>(index)) choices_.resize(index + 1);
  return choices_[index];
}

std::string OpenAiAnswer::StreamEvents(const RequestOutput& o) {
  if (o.finish_reason == FinishReason::kError) {
    return Event({{"error",
                   {{"message", "generation failed: " + o.error},
                    {"type", "server_error"},
                    {"param", nullptr},
                    {"code", 500}}}});
  }
  Choice& c = ChoiceAt(o.index);
  json chunk = {{"id", id_},
                {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", model_}};
  if (include_usage_) chunk["usage"] = nullptr;
  std::string events;
  const auto choice_event = [&](json choice) {
    chunk["choices"] = json::array({std::move(choice)});
    events += Event(chunk);
  };
  const json reason = ReasonJson(FinishReasonName(o.finish_reason));
  json logprobs = nullptr;
  const TokenText token_text{tokenizer_, tokens_as_ids_};
  if (logprobs_ && !o.logprobs.empty()) {
    logprobs = chat_ ? ChatLogprobs(o.logprobs, token_text)
                     : CompletionLogprobs(o.logprobs, token_text, &c.text_offset);
  }
  if (!chat_) {
    choice_event({{"index", o.index},
                  {"text", EchoOnce(o.index, c) + o.text},
                  {"logprobs", logprobs},
                  {"finish_reason", reason}});
    return events;
  }
  if (!c.started) {
    c.started = true;
    choice_event({{"index", o.index},
                  {"delta", {{"role", "assistant"}, {"content", ""}}},
                  {"logprobs", nullptr},
                  {"finish_reason", nullptr}});
  }
  if (!o.text.empty() || !reason.is_null() || !logprobs.is_null()) {
    choice_event({{"index", o.index},
                  {"delta", o.text.empty() ? json::object() : json{{"content", o.text}}},
                  {"logprobs", logprobs},
                  {"finish_reason", reason}});
  }
  return events;
}

std::string OpenAiAnswer::StreamEnd(const Usage& usage) const {
  std::string events;
  if (include_usage_) {
    events += Event({{"id", id_},
                     {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
                     {"created", created_},
                     {"model", model_},
                     {"choices", json::array()},
                     {"usage", UsageJson(usage)}});
  }
  return events + "data: [DONE]\n\n";
}

void OpenAiAnswer::Add(const RequestOutput& o) {
  Choice& c = ChoiceAt(o.index);
  c.text += EchoOnce(o.index, c) + o.text;
  if (o.finish_reason != FinishReason::kNone) c.finish_reason = FinishReasonName(o.finish_reason);
  if (logprobs_) c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
}

std::string OpenAiAnswer::Body(const Usage& usage) const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json logprobs = nullptr;
    size_t offset = 0;
    const TokenText token_text{tokenizer_, tokens_as_ids_};
    if (logprobs_) {
      logprobs = chat_ ? ChatLogprobs(c.logprobs, token_text)
                       : CompletionLogprobs(c.logprobs, token_text, &offset);
    }
    json choice = {
        {"index", i}, {"logprobs", logprobs}, {"finish_reason", ReasonJson(c.finish_reason)}};
    if (chat_) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    choices.push_back(std::move(choice));
  }
  return Dump({{"id", id_},
               {"object", chat_ ? "chat.completion" : "text_completion"},
               {"created", created_},
               {"model", model_},
               {"choices", choices},
               {"usage", UsageJson(usage)}});
}

}  // namespace pagoda
