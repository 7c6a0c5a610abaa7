// ApiRequest: the API-neutral form of one generation request, and BuildRequest, the one place
// that turns it into the engine's Request. The gRPC service (GenerateRequest) and the OpenAI
// HTTP API (/v1/completions, /v1/chat/completions) each translate their wire message into an
// ApiRequest and call BuildRequest, so tokenization, chat rendering, defaults and the checks
// below are the same on every API:
//   - request_id: at most kMaxRequestIdBytes printable ASCII characters (it is echoed in every
//     message and gRPC metadata);
//   - exactly one input: a text prompt, prompt token ids or chat messages, none empty; prompt
//     text (or the rendered chat) longer than ctx.max_prompt_bytes is refused before tokenizing;
//   - messages (roles system, user, assistant, tool) rendered with the chat template (jinja.h)
//     over messages, add_generation_prompt, bos_token, eos_token and chat_template_kwargs, and
//     tokenized with special tokens recognised only in the template's own text: content cannot
//     spell a control token. BOS is added when the tokenizer adds it and the prompt does not
//     already start with it;
//   - text prompts: special tokens as the tokenizer finds them, or per parse_special;
//   - sampling fields the request leaves unset take the model's generation_config.json values;
//   - a structured-output constraint compiled (ctx.grammar_cache; errors name its field);
//   - max_tokens in 1..server.max_tokens_limit (or the context length); when not given, the
//     room left in the context after the prompt (capped the same way);
// The engine's Submit checks the rest (vocabulary, context fit, sampling ranges, KV capacity).
// Errors are INVALID_ARGUMENT naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/grammar/constraint.h"
#include "scheduler/request.h"
#include "server/serving_context.h"

namespace pagoda {

enum class ApiInput { kNone, kPrompt, kPromptTokenIds, kMessages };

struct ChatMessage {
  std::string role;  // system | user | assistant | tool
  std::string content;
};

// Which of the sampling fields with model defaults (generation_config.json) the request set.
struct SamplingGiven {
  bool temperature = false;
  bool top_p = false;
  bool top_k = false;
  bool repetition_penalty = false;
};

struct ApiRequest {
  std::string request_id;  // "" = "req-<n>" from ctx.next_request_id
  ApiInput input = ApiInput::kNone;
  std::string prompt;                     // kPrompt
  std::vector<int32_t> prompt_token_ids;  // kPromptTokenIds
  std::vector<ChatMessage> messages;      // kMessages
  bool add_generation_prompt = true;      // kMessages
  // kMessages: extra template variables (e.g. enable_thinking); a JSON object or null.
  nlohmann::ordered_json chat_template_kwargs;
  std::optional<bool> add_special_tokens;  // kPrompt: add BOS; nullopt = the tokenizer's default
  // kPrompt: true = control-token text is the control token, false = plain text; nullopt = as
  // the tokenizer does (byte-level BPE: recognised; SentencePiece: plain).
  std::optional<bool> parse_special;
  SamplingParams sampling;            // the API's defaults already applied
  SamplingGiven sampling_given;       // the rest take the model's defaults
  std::optional<int32_t> max_tokens;  // nullopt = what fits the context
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  int32_t priority = 0;
  bool speculative = true;             // false: no speculative tokens for this request
  grammar::ConstraintSpec constraint;  // structured output; kind kNone = unconstrained
};

inline constexpr size_t kMaxRequestIdBytes = 256;

// The most bytes of text that can tokenize into fewer than `max_model_len` tokens (for
// ServingContext::max_prompt_bytes); see the derivation in api_request.cc.
int64_t MaxPromptBytes(const Tokenizer& tokenizer, int32_t max_model_len);

// Builds the engine Request (see the file comment); errors name the field.
Result<Request> BuildRequest(ServingContext& ctx, const ApiRequest& api);

// The token ids of a rendered chat: special tokens only in the template's segments, then BOS in
// front when the tokenizer adds one and the template did not write it (as llama.cpp does).
std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tok, const jinja::Rendered& rendered);
// The token ids of api.prompt (add_special_tokens, parse_special), as BuildRequest makes them.
std::vector<int32_t> EncodePrompt(const Tokenizer& tok, const ApiRequest& api);
// What a request that sets no sampling field gets: the model's defaults over SamplingParams'.
SamplingParams DefaultSampling(const GenerationDefaults& defaults);
// Sampling fields left unset (`given` false) take the model's generation_config.json values,
// as vLLM's --generation-config auto does.
void ApplyModelDefaults(const GenerationDefaults& d, const SamplingGiven& given, SamplingParams* s);
// The largest max_tokens: server.max_tokens_limit, else the context length.
int32_t MaxTokensLimit(const ServingContext& ctx);

}  // namespace pagoda
