// The OpenAI-compatible answer side: engine outputs (RequestOutput) of one request turned into
// the JSON of /v1/completions ("text_completion") and /v1/chat/completions ("chat.completion"),
// either gathered into one body or, when streaming, as Server-Sent Events:
//   data: {chunk}\n\n  per output (chat: a first chunk with the assistant role per choice),
//   data: {chunk with "choices": [] and usage}\n\n  when stream_options.include_usage,
//   data: [DONE]\n\n  at the end.
// Usage is {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details.cached_tokens}.
// Logprobs take each API's shape (completions: tokens / token_logprobs / top_logprobs /
// text_offset; chat: content[{token, logprob, bytes, top_logprobs}]).
// A backend failure mid-stream becomes an error event ({"error": {...}}) before [DONE].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "scheduler/request.h"
#include "server/openai_protocol.h"

namespace pagoda {

class OpenAiAnswer {
 public:
  // `id`: the response id ("cmpl-..." / "chatcmpl-..."); `created`: Unix seconds.
  OpenAiAnswer(const OpenAiRequest& request, std::string id, std::string model, int64_t created,
               const Tokenizer& tokenizer);

  // Streaming: the SSE events of one engine output.
  std::string StreamEvents(const RequestOutput& output);
  // Streaming, after the request's last output: the usage chunk (if asked) and [DONE].
  std::string StreamEnd(const Usage& usage) const;

  // Non-streaming: gathers one output; Body() is the whole response once the last came.
  void Add(const RequestOutput& output);
  std::string Body(const Usage& usage) const;

 private:
  struct Choice {
    std::string text;
    std::string finish_reason;
    std::vector<TokenLogprob> logprobs;
    size_t text_offset = 0;  // completions logprobs: where the next token's text starts
    bool started = false;    // chat streaming: the role chunk was sent; echo: the prompt was
  };
  Choice& ChoiceAt(int32_t index);
  // With echo, the prompt text of choice `index` the first time (then ""); else "".
  std::string EchoOnce(int32_t index, Choice& choice);

  bool chat_;
  bool logprobs_;
  bool include_usage_;
  bool tokens_as_ids_;
  std::string id_;
  std::string model_;
  int64_t created_;
  const Tokenizer& tokenizer_;
  std::vector<Choice> choices_;
  int32_t n_;                      // samples per prompt
  std::vector<std::string> echo_;  // echo: each prompt's text; else empty
};

}  // namespace pagoda
