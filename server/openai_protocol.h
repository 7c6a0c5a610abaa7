// The OpenAI-compatible request side: JSON bodies of POST /v1/completions and
// /v1/chat/completions parsed into an ApiRequest (server/api_request.h) plus the options that
// shape the answer (stream, stream_options.include_usage, logprobs), and the OpenAI error body.
//
// Accepted, as OpenAI and vLLM define them: model, prompt (a string, token ids, or an array of
// either: several prompts, choice i * n + j being sample j of prompt i), echo (completions,
// without logprobs: each choice's text starts with its prompt's), messages (content as a
// string or text parts), max_tokens / max_completion_tokens, temperature, top_p, n, stop (string or
// array), seed, presence_penalty, frequency_penalty, logprobs (+ top_logprobs for chat), stream,
// stream_options, user, logit_bias ({"<token id>": bias}); vLLM's extras top_k, min_p,
// repetition_penalty, stop_token_ids, ignore_eos, include_stop_str_in_output, add_special_tokens,
// priority, request_id, return_tokens_as_token_ids, and for chat add_generation_prompt and
// chat_template_kwargs; llama.cpp's parse_special (completions: whether control-token text in the
// prompt is the control token); Pagoda's speculative (false: no speculative decoding for this
// request; the output is the same either way); structured output: response_format, vLLM's
// guided_* fields and structured_outputs (server/openai_constraint.h). Messages may have the
// roles system, user, assistant and tool; text parts of a content list are joined with "\n" (as
// vLLM does). Answered 400 "...: not supported yet": tools / tool_choice / functions /
// tool_calls, echo with logprobs (prompt logprobs) or on chat, suffix, best_of > n,
// non-text message parts. Unknown fields are ignored (as OpenAI's SDKs may send new ones). Errors
// are INVALID_ARGUMENT whose message starts with the offending field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "server/api_request.h"

namespace pagoda {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };

// One prompt of a completions request.
struct OpenAiPrompt {
  ApiInput input = ApiInput::kPrompt;     // kPrompt or kPromptTokenIds
  std::string prompt;                     // kPrompt
  std::vector<int32_t> prompt_token_ids;  // kPromptTokenIds
};

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  ApiRequest api;  // every field, with the (first) prompt
  // Completions with an array of prompts: the ones after the first, each to be generated with
  // `api`'s parameters (see PromptRequests).
  std::string model;  // as sent; "" when absent
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
  bool tokens_as_ids = false;  // return_tokens_as_token_ids: logprobs tokens as "token_id:N"
  bool echo = false;           // completions: the prompt's text before each choice's text
  std::vector<OpenAiPrompt> more_prompts;
};

// One ApiRequest per prompt: `api`, then a copy of it per more_prompts entry; their request ids
// are api.request_id + "-<i>" when one was given (else each gets the server's next id).
std::vector<ApiRequest> PromptRequests(const OpenAiRequest& request);

// Parses a request body. Without max_tokens, completions and chat completions alike generate
// up to the rest of the context (capped by server.max_tokens_limit), as vLLM's chat API does.
Result<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body);

// {"error": {"message", "type", "param", "code"}} for a non-OK status; the HTTP status it maps
// to is HttpStatusOf.
std::string OpenAiErrorBody(const Status& status);
// The same body for an HTTP status of its own (e.g. cpp-httplib's 404 / 413).
std::string OpenAiErrorBody(int http_status, const std::string& message);
int HttpStatusOf(const Status& status);

}  // namespace pagoda
