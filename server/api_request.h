// ApiRequest: the API-neutral form of one generation request, and BuildRequest, the one place
// that turns it into the engine's Request. The gRPC service (GenerateRequest) and the OpenAI
// HTTP API (/v1/completions, /v1/chat/completions) each translate their wire message into an
// ApiRequest and call BuildRequest, so tokenization, chat rendering, defaults and the checks
// below are the same on every API:
//   - request_id: at most kMaxRequestIdBytes printable ASCII characters (it is echoed in every
//     message and gRPC metadata);
//   - exactly one input: a text prompt, prompt token ids or chat messages, none empty; prompt
//     text (or the rendered chat) longer than ctx.max_prompt_bytes is refused before tokenizing;
//   - messages rendered with the resolved chat template; a rendered BOS string becomes the BOS
//     token and the template's end-of-turn token becomes a stop token;
//   - max_tokens in 1..server.max_tokens_limit (or the context length); when not given, the
//     room left in the context after the prompt (capped the same way);
// The engine's Submit checks the rest (vocabulary, context fit, sampling ranges, KV capacity).
// Errors are INVALID_ARGUMENT naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/chat_template.h"
#include "scheduler/request.h"
#include "server/serving_context.h"

namespace pagoda {

enum class ApiInput { kNone, kPrompt, kPromptTokenIds, kMessages };

struct ApiRequest {
  std::string request_id;  // "" = "req-<n>" from ctx.next_request_id
  ApiInput input = ApiInput::kNone;
  std::string prompt;                      // kPrompt
  std::vector<int32_t> prompt_token_ids;   // kPromptTokenIds
  std::vector<ChatMessage> messages;       // kMessages
  std::optional<bool> add_special_tokens;  // kPrompt: add BOS; nullopt = the tokenizer's default
  SamplingParams sampling;                 // the API's defaults already applied
  std::optional<int32_t> max_tokens;       // nullopt = what fits the context
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  int32_t priority = 0;
};

inline constexpr size_t kMaxRequestIdBytes = 256;

// The most bytes of text that can tokenize into fewer than `max_model_len` tokens (for
// ServingContext::max_prompt_bytes); see the derivation in api_request.cc.
int64_t MaxPromptBytes(const Tokenizer& tokenizer, int32_t max_model_len);

// Builds the engine Request (see the file comment); errors name the field.
Result<Request> BuildRequest(ServingContext& ctx, const ApiRequest& api);

}  // namespace pagoda
