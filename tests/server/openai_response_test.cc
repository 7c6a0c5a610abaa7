// OpenAiAnswer: engine outputs -> OpenAI JSON bodies and SSE events (completions and chat),
// usage, logprobs shapes, the error event.
#include "server/openai_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/tokenizer/bpe_tokenizer.h"

namespace pagoda {
namespace {

using nlohmann::json;

std::unique_ptr<Tokenizer> ByteTokenizer() {
  BpeVocab v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(ByteLevelEncode(std::string(1, static_cast<char>(b))));
    v.kinds.push_back(TokenKind::kNormal);
  }
  auto tok = MakeBpeTokenizer(std::move(v));
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

RequestOutput Output(int32_t index, const std::string& text, FinishReason reason = {}) {
  RequestOutput o;
  o.index = index;
  o.text = text;
  for (char c : text) o.token_ids.push_back(static_cast<unsigned char>(c));
  o.finish_reason = reason;
  return o;
}

// The JSON payloads of SSE text ("data: X\n\n" each).
std::vector<std::string> Payloads(const std::string& sse) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t end; (end = sse.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    EXPECT_EQ(sse.compare(pos, 6, "data: "), 0) << sse;
    out.push_back(sse.substr(pos + 6, end - pos - 6));
  }
  EXPECT_EQ(pos, sse.size()) << sse;
  return out;
}

OpenAiRequest Req(OpenAiEndpoint endpoint) {
  OpenAiRequest r;
  r.endpoint = endpoint;
  return r;
}

TEST(OpenAiAnswer, CompletionStreamAndUsageChunk) {
  auto tok = ByteTokenizer();
  OpenAiRequest req = Req(OpenAiEndpoint::kCompletions);
  req.include_usage = true;
  OpenAiAnswer a(req, "cmpl-1", "m", 7, *tok);
  auto events = Payloads(a.StreamEvents(Output(0, "ab")));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0],
            R"({"choices":[{"finish_reason":null,"index":0,"logprobs":null,"text":"ab"}],)"
            R"("created":7,"id":"cmpl-1","model":"m","object":"text_completion","usage":null})");
  events = Payloads(a.StreamEvents(Output(0, "c", FinishReason::kStop)));
  EXPECT_EQ(json::parse(events[0])["choices"][0]["finish_reason"], "stop");
  const Usage usage{5, 3, 2};
  events = Payloads(a.StreamEnd(usage));
  ASSERT_EQ(events.size(), 2u);
  const json u = json::parse(events[0]);
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"], json::parse(R"({"prompt_tokens":5,"completion_tokens":3,)"
                                    R"("total_tokens":8,"prompt_tokens_details":)"
                                    R"({"cached_tokens":2}})"));
  EXPECT_EQ(events[1], "[DONE]");
}

TEST(OpenAiAnswer, ChatStreamSendsTheRoleOncePerChoice) {
  auto tok = ByteTokenizer();
  OpenAiAnswer a(Req(OpenAiEndpoint::kChatCompletions), "chatcmpl-1", "m", 7, *tok);
  auto events = Payloads(a.StreamEvents(Output(1, "hi")));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"],
            json::parse(R"({"role":"assistant","content":""})"));
  EXPECT_EQ(json::parse(events[0])["choices"][0]["index"], 1);
  EXPECT_EQ(json::parse(events[1])["choices"][0]["delta"], json::parse(R"({"content":"hi"})"));
  EXPECT_FALSE(json::parse(events[1]).contains("usage"));  // only with include_usage
  // The last output of a choice may carry no text: an empty delta with the finish reason.
  events = Payloads(a.StreamEvents(Output(1, "", FinishReason::kLength)));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"], json::object());
  EXPECT_EQ(json::parse(events[0])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(Payloads(a.StreamEnd(Usage{})), std::vector<std::string>{"[DONE]"});
}

TEST(OpenAiAnswer, BodiesGatherEveryChoice) {
  auto tok = ByteTokenizer();
  OpenAiAnswer chat(Req(OpenAiEndpoint::kChatCompletions), "chatcmpl-2", "m", 7, *tok);
  chat.Add(Output(0, "a"));
  chat.Add(Output(1, "x", FinishReason::kStop));
  chat.Add(Output(0, "b", FinishReason::kLength));
  const json body = json::parse(chat.Body(Usage{4, 3, 0}));
  EXPECT_EQ(body["object"], "chat.completion");
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["message"], json::parse(R"({"role":"assistant","content":"ab"})"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["choices"][1]["message"]["content"], "x");
  EXPECT_EQ(body["usage"]["total_tokens"], 7);
}

TEST(OpenAiAnswer, LogprobsShapes) {
  auto tok = ByteTokenizer();
  OpenAiRequest req = Req(OpenAiEndpoint::kCompletions);
  req.api.sampling.logprobs = true;
  OpenAiAnswer completion(req, "cmpl-3", "m", 7, *tok);
  RequestOutput o = Output(0, "ab");
  o.logprobs = {{'a', -0.5f, {{'a', -0.5f}, {'z', -1.0f}}}, {'b', -0.25f, {}}};
  const json lp = json::parse(Payloads(completion.StreamEvents(o))[0])["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::parse(R"(["a", "b"])"));
  EXPECT_EQ(lp["token_logprobs"], json::parse("[-0.5, -0.25]"));
  EXPECT_EQ(lp["top_logprobs"][0], json::parse(R"({"a": -0.5, "z": -1.0})"));
  EXPECT_EQ(lp["text_offset"], json::parse("[0, 1]"));
  // The offsets continue across chunks.
  RequestOutput next = Output(0, "c");
  next.logprobs = {{'c', -1.0f, {}}};
  EXPECT_EQ(json::parse(Payloads(
                completion.StreamEvents(next))[0])["choices"][0]["logprobs"]["text_offset"],
            json::parse("[2]"));

  req.endpoint = OpenAiEndpoint::kChatCompletions;
  req.tokens_as_ids = true;
  OpenAiAnswer chat(req, "chatcmpl-3", "m", 7, *tok);
  chat.Add(o);
  const json content = json::parse(chat.Body(Usage{}))["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "token_id:97");
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "token_id:122");
  EXPECT_EQ(content[1]["top_logprobs"], json::array());
}

TEST(OpenAiAnswer, BackendFailureIsAnErrorEvent) {
  auto tok = ByteTokenizer();
  OpenAiAnswer a(Req(OpenAiEndpoint::kCompletions), "cmpl-4", "m", 7, *tok);
  RequestOutput o = Output(0, "", FinishReason::kError);
  o.error = "device timeout";
  const json e = json::parse(Payloads(a.StreamEvents(o))[0]);
  EXPECT_EQ(e["error"]["message"], "generation failed: device timeout");
  EXPECT_EQ(e["error"]["code"], 500);
}

}  // namespace
}  // namespace pagoda
