// ParseOpenAiRequest (OpenAI JSON -> ApiRequest), the OpenAI error body, and Admit's bearer
// check.
#include "server/openai_protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "server/serving_context.h"

namespace pagoda {
namespace {

OpenAiRequest Parse(OpenAiEndpoint endpoint, const std::string& body) {
  Result<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : OpenAiRequest{};
}

std::string ParseError(OpenAiEndpoint endpoint, const std::string& body) {
  Result<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body);
  EXPECT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
  return r.status().message();
}

constexpr auto kCompletions = OpenAiEndpoint::kCompletions;
constexpr auto kChat = OpenAiEndpoint::kChatCompletions;

TEST(ParseOpenAiRequest, CompletionFieldsAndDefaults) {
  const OpenAiRequest r = Parse(kCompletions, R"({"model": "m", "prompt": "hi"})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.api.input, ApiInput::kPrompt);
  EXPECT_EQ(r.api.prompt, "hi");
  EXPECT_FALSE(r.api.max_tokens.has_value());  // the rest of the context, as for chat
  EXPECT_EQ(r.api.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.api.sampling_given.temperature);  // the model's default may apply
  EXPECT_FALSE(r.api.parse_special.has_value());
  EXPECT_FALSE(r.api.sampling.logprobs);
  EXPECT_FALSE(r.stream);

  const OpenAiRequest full = Parse(kCompletions, R"({
      "prompt": [[1, 2, 3]], "max_tokens": 5, "temperature": 0, "top_p": 0.5, "top_k": -1,
      "min_p": 0.1, "repetition_penalty": 1.1, "presence_penalty": 0.2,
      "frequency_penalty": 0.3, "seed": 18446744073709551615, "n": 2, "logprobs": 3,
      "stop": "x", "stop_token_ids": [7], "ignore_eos": true, "stream": true,
      "stream_options": {"include_usage": true}, "user": "u", "request_id": "r1",
      "return_tokens_as_token_ids": true, "speculative": false})");
  EXPECT_EQ(full.api.input, ApiInput::kPromptTokenIds);
  EXPECT_EQ(full.api.prompt_token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(full.api.max_tokens, 5);
  EXPECT_EQ(full.api.sampling.temperature, 0.0f);
  EXPECT_EQ(full.api.sampling.top_p, 0.5f);
  EXPECT_EQ(full.api.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(full.api.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(full.api.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(full.api.sampling.seed, uint64_t{18446744073709551615u});
  EXPECT_EQ(full.api.sampling.n, 2);
  EXPECT_TRUE(full.api.sampling.logprobs);
  EXPECT_EQ(full.api.sampling.top_logprobs, 3);
  EXPECT_EQ(full.api.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(full.api.stop_token_ids, std::vector<int32_t>{7});
  EXPECT_TRUE(full.api.ignore_eos);
  EXPECT_FALSE(full.api.speculative);
  EXPECT_TRUE(r.api.speculative);  // default: as the server runs
  EXPECT_TRUE(full.stream);
  EXPECT_TRUE(full.include_usage);
  EXPECT_TRUE(full.tokens_as_ids);
  EXPECT_EQ(full.api.request_id, "r1");
}

// An array of prompts (strings or token-id arrays, mixed): one ApiRequest per prompt, with the
// same parameters; request ids get "-<i>" suffixes.
TEST(OpenAiProtocol, SeveralPromptsBecomeOneApiRequestEach) {
  const OpenAiRequest r = Parse(kCompletions, R"({"prompt": ["a", [7, 8], "c"], "n": 2,
      "max_tokens": 3, "request_id": "x"})");
  ASSERT_EQ(r.more_prompts.size(), 2u);
  const std::vector<ApiRequest> all = PromptRequests(r);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].prompt, "a");
  EXPECT_EQ(all[1].input, ApiInput::kPromptTokenIds);
  EXPECT_EQ(all[1].prompt_token_ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(all[2].input, ApiInput::kPrompt);
  EXPECT_EQ(all[2].prompt, "c");
  for (const ApiRequest& a : all) {
    EXPECT_EQ(a.sampling.n, 2);
    EXPECT_EQ(a.max_tokens, 3);
  }
  EXPECT_EQ(all[0].request_id, "x");
  EXPECT_EQ(all[1].request_id, "x-1");
  EXPECT_EQ(all[2].request_id, "x-2");
  const OpenAiRequest one = Parse(kCompletions, R"({"prompt": ["only"]})");
  EXPECT_TRUE(one.more_prompts.empty());
  EXPECT_EQ(one.api.prompt, "only");
  EXPECT_EQ(PromptRequests(one).size(), 1u);
}

TEST(ParseOpenAiRequest, ChatMessagesAndMaxCompletionTokens) {
  const OpenAiRequest r = Parse(kChat, R"({"messages": [
      {"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "max_tokens": 9, "max_completion_tokens": 4, "logprobs": true, "top_logprobs": 2,
      "stop": ["x", "y"], "tool_choice": "none", "response_format": {"type": "text"}})");
  EXPECT_EQ(r.api.input, ApiInput::kMessages);
  ASSERT_EQ(r.api.messages.size(), 2u);
  EXPECT_EQ(r.api.messages[0].role, "system");
  EXPECT_EQ(r.api.messages[1].content, "a\nb");  // text parts joined as vLLM joins them
  EXPECT_EQ(r.api.max_tokens, 4);
  EXPECT_TRUE(r.api.sampling.logprobs);
  EXPECT_EQ(r.api.sampling.top_logprobs, 2);
  EXPECT_EQ(r.api.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.api.add_generation_prompt);
  EXPECT_TRUE(r.api.chat_template_kwargs.is_null());
  // Without a limit a chat request generates what fits the context.
  EXPECT_FALSE(Parse(kChat, R"({"messages": []})").api.max_tokens.has_value());
}

TEST(ParseOpenAiRequest, TemplateOptionsParseSpecialAndGivenSampling) {
  const OpenAiRequest chat = Parse(kChat, R"({"messages": [{"role": "tool", "content": "42"}],
      "add_generation_prompt": false, "chat_template_kwargs": {"enable_thinking": false, "n": 3},
      "temperature": 0.5, "top_k": null})");
  EXPECT_EQ(chat.api.messages[0].role, "tool");
  EXPECT_FALSE(chat.api.add_generation_prompt);
  EXPECT_EQ(chat.api.chat_template_kwargs.dump(), R"({"enable_thinking":false,"n":3})");
  EXPECT_TRUE(chat.api.sampling_given.temperature);
  EXPECT_FALSE(chat.api.sampling_given.top_k);  // null = unset
  EXPECT_FALSE(chat.api.sampling_given.top_p);
  const OpenAiRequest plain = Parse(kCompletions, R"({"prompt": "x", "parse_special": false,
      "top_p": 0.9, "repetition_penalty": 1.1})");
  EXPECT_EQ(plain.api.parse_special, std::optional<bool>(false));
  EXPECT_TRUE(plain.api.sampling_given.top_p);
  EXPECT_TRUE(plain.api.sampling_given.repetition_penalty);
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "chat_template_kwargs": [1]})"),
            "chat_template_kwargs: expected an object");
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": "x", "parse_special": 1})"),
            "parse_special: wrong type or out of range");
}

TEST(ParseOpenAiRequest, ErrorsNameTheField) {
  EXPECT_EQ(ParseError(kCompletions, "{not json"), "body: expected a JSON object");
  EXPECT_EQ(ParseError(kCompletions, "[]"), "body: expected a JSON object");
  EXPECT_EQ(ParseError(kCompletions, "{}"), "prompt: required");
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": 5})"), "prompt: expected a string or token ids");
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": [1, -2]})"),
            "prompt: expected token ids (integers >= 0)");
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": ["a", 5]})"),
            "prompt[1]: expected a string or token ids");
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": [[1], [2, -1]]})"),
            "prompt[1]: expected token ids (integers >= 0)");
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": "x", "max_tokens": "5"})"),
            "max_tokens: wrong type or out of range");
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": "x", "n": 4294967296})"),
            "n: wrong type or out of range");
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": "x", "stop": [1]})"),
            "stop: expected a string or an array of strings");
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": "x", "stream_options": {}})"),
            "stream_options: only with \"stream\": true");
  EXPECT_EQ(ParseError(kChat, R"({"messages": "hi"})"), "messages: required (an array)");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [{"content": "x"}]})"),
            "messages[0].role: required (a string)");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "top_logprobs": 2})"),
            "top_logprobs: needs \"logprobs\": true");
  // Wrong types anywhere are 400s, never exceptions.
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": "x", "echo": "yes"})"),
            "echo: wrong type or out of range");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [{"role": "user", "content": [{"type": 5}]}]})"),
            "messages[0].content: parts other than {\"type\": \"text\"}: not supported yet");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "response_format": "json"})"),
            "response_format: expected an object with a string \"type\"");
}

TEST(ParseOpenAiRequest, StructuredOutputFieldsMapOntoOneConstraint) {
  using grammar::ConstraintKind;
  const auto constraint = [](OpenAiEndpoint e, const char* body) {
    return Parse(e, body).api.constraint;
  };
  EXPECT_EQ(constraint(kChat, R"({"messages": [], "response_format": {"type": "text"}})").kind,
            ConstraintKind::kNone);
  EXPECT_EQ(
      constraint(kChat, R"({"messages": [], "response_format": {"type": "json_object"}})").kind,
      ConstraintKind::kJsonObject);
  const grammar::ConstraintSpec schema = constraint(kChat, R"({"messages": [],
      "response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true,
      "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})");
  EXPECT_EQ(schema.kind, ConstraintKind::kJsonSchema);
  EXPECT_TRUE(schema.strict);
  EXPECT_EQ(nlohmann::json::parse(schema.text)["properties"]["a"]["type"], "integer");
  EXPECT_EQ(schema.field, "response_format.json_schema.schema");
  // vLLM's guided_* fields: a schema as an object or as JSON text.
  EXPECT_EQ(
      constraint(kCompletions, R"({"prompt": "a", "guided_json": "{\"type\": \"string\"}"})").text,
      R"({"type": "string"})");
  EXPECT_EQ(constraint(kCompletions, R"({"prompt": "a", "guided_regex": "[0-9]+"})").text,
            "[0-9]+");
  const grammar::ConstraintSpec choice =
      constraint(kCompletions, R"({"prompt": "a", "guided_choice": ["yes", "no"]})");
  EXPECT_EQ(choice.kind, ConstraintKind::kChoice);
  EXPECT_EQ(choice.choices, (std::vector<std::string>{"yes", "no"}));
  EXPECT_EQ(constraint(kCompletions, R"({"prompt": "a", "guided_grammar": "root ::= \"x\""})").kind,
            ConstraintKind::kGrammar);
  // vLLM's newer structured_outputs object.
  EXPECT_EQ(constraint(kChat, R"({"messages": [], "structured_outputs": {"regex": "a+"}})").field,
            "structured_outputs.regex");
  EXPECT_EQ(
      constraint(kChat, R"({"messages": [], "structured_outputs": {"json_object": true}})").kind,
      ConstraintKind::kJsonObject);
  EXPECT_EQ(constraint(kChat, R"({"messages": [], "guided_decoding_backend": "xgrammar"})").kind,
            ConstraintKind::kNone);
}

TEST(ParseOpenAiRequest, StructuredOutputErrorsNameTheField) {
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "response_format": {"type": "xml"}})"),
            "response_format.type: expected \"text\", \"json_object\" or \"json_schema\", "
            "got \"xml\"");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "response_format": {"type": "json_schema"}})"),
            "response_format.json_schema: expected an object");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "response_format": {"type": "json_schema",
                "json_schema": {"name": "x"}}})"),
            "response_format.json_schema.schema: expected an object");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "guided_choice": []})"),
            "guided_choice: expected a non-empty array of strings");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "guided_regex": 5})"),
            "guided_regex: expected a string");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "guided_json": 5})"),
            "guided_json: expected a JSON schema (an object or its JSON text)");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "guided_regex": "a", "guided_choice": ["b"]})"),
            "guided_choice: only one structured-output constraint per request (guided_regex is "
            "given too)");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "structured_outputs": [1]})"),
            "structured_outputs: expected an object");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "guided_whitespace_pattern": " "})"),
            "guided_whitespace_pattern: not supported yet");
}

TEST(ParseOpenAiRequest, LogitBiasIsAnObjectOfTokenIdStrings) {
  const OpenAiRequest r =
      Parse(kChat, R"({"messages": [], "logit_bias": {"15": 100, "7": -2.5, "0": 0}})");
  std::vector<std::pair<int32_t, float>> bias = r.api.sampling.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias, (std::vector<std::pair<int32_t, float>>{{0, 0.0f}, {7, -2.5f}, {15, 100.0f}}));
  EXPECT_TRUE(Parse(kCompletions, R"({"prompt": "a", "logit_bias": null})")
                  .api.sampling.logit_bias.empty());
  EXPECT_TRUE(
      Parse(kCompletions, R"({"prompt": "a", "logit_bias": {}})").api.sampling.logit_bias.empty());
  // Ranges and the vocabulary are the engine's checks: out-of-range values parse.
  EXPECT_EQ(Parse(kCompletions, R"({"prompt": "a", "logit_bias": {"99999999": 500}})")
                .api.sampling.logit_bias.size(),
            1u);
}

TEST(ParseOpenAiRequest, LogitBiasErrorsNameTheKey) {
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": "a", "logit_bias": {"abc": 1}})"),
            "logit_bias.abc: expected a token id (an integer) as the key");
  for (const char* key : {"1.5", "", " 1", "1x", "99999999999"}) {
    const std::string body = std::string(R"({"prompt": "a", "logit_bias": {")") + key + R"(": 1}})";
    EXPECT_EQ(ParseError(kCompletions, body).rfind("logit_bias." + std::string(key) + ": ", 0), 0u)
        << body;
  }
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "logit_bias": {"12": "high"}})"),
            "logit_bias.12: expected a number (the bias)");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "logit_bias": {"12": null}})"),
            "logit_bias.12: expected a number (the bias)");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [], "logit_bias": [1, 2]})"),
            "logit_bias: expected an object of token id: bias");
  const auto body = nlohmann::json::parse(
      OpenAiErrorBody(InvalidArgument("logit_bias.abc: expected a token id (an integer)")));
  EXPECT_EQ(body["error"]["param"], "logit_bias.abc");
}

TEST(ParseOpenAiRequest, OtherFeaturesAreNotSupportedYet) {
  for (const char* body : {
           R"({"messages": [], "tools": [{"type": "function"}]})",
           R"({"messages": [], "tool_choice": "auto"})",
           R"({"messages": [{"role": "assistant", "tool_calls": []}]})",
           R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       }) {
    EXPECT_NE(ParseError(kChat, body).find("not supported yet"), std::string::npos) << body;
  }
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": "a", "echo": true, "logprobs": 1})"),
            "echo: with logprobs: not supported yet");
  EXPECT_EQ(ParseError(kChat, R"({"messages": [{"role": "user", "content": "x"}], "echo": true})"),
            "echo: not supported yet");
  EXPECT_TRUE(Parse(kCompletions, R"({"prompt": "a", "echo": true})").echo);
  EXPECT_EQ(ParseError(kCompletions, R"({"prompt": "a", "best_of": 3})"),
            "best_of: not supported yet");
}

TEST(OpenAiErrorBody, OpenAiShapeAndHttpStatus) {
  const auto body = nlohmann::json::parse(OpenAiErrorBody(InvalidArgument("max_tokens: 0")));
  EXPECT_EQ(body["error"]["message"], "max_tokens: 0");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "max_tokens");
  EXPECT_EQ(body["error"]["code"], 400);
  EXPECT_EQ(HttpStatusOf(Unauthenticated("x")), 401);
  EXPECT_EQ(HttpStatusOf(NotFound("x")), 404);
  EXPECT_EQ(HttpStatusOf(ResourceExhausted("x")), 429);
  EXPECT_EQ(HttpStatusOf(Status(StatusCode::kUnavailable, "x")), 503);
  EXPECT_EQ(HttpStatusOf(Internal("x")), 500);
  const auto auth = nlohmann::json::parse(OpenAiErrorBody(Unauthenticated("no token")));
  EXPECT_EQ(auth["error"]["type"], "authentication_error");
  EXPECT_TRUE(auth["error"]["param"].is_null());
}

TEST(Admit, BearerTokenAndDraining) {
  ServingContext ctx;
  EXPECT_TRUE(Admit(ctx, std::nullopt).ok());  // no token configured
  ctx.bearer_token = "s3cret";
  EXPECT_EQ(Admit(ctx, std::nullopt).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Admit(ctx, "Bearer s3cre").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Admit(ctx, "Bearer s3cret2").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Admit(ctx, "s3cret").code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(Admit(ctx, "Bearer s3cret").ok());
  ctx.draining = true;
  EXPECT_EQ(Admit(ctx, "Bearer s3cret").code(), StatusCode::kUnavailable);
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("a", ""));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "ac"));
}

}  // namespace
}  // namespace pagoda
