#include "server/api_request.h"

#include <algorithm>
#include <array>

#include "common/field_check.h"

namespace pagoda {
namespace {

// Prompt text is refused by its size before the tokenizer spends time on it.
Status CheckPromptBytes(const ServingContext& ctx, std::string_view field, size_t bytes) {
  if (ctx.max_prompt_bytes <= 0 || static_cast<int64_t>(bytes) <= ctx.max_prompt_bytes) {
    return Status::Ok();
  }
  return InvalidArgument(std::string(field) + ": " + std::to_string(bytes) +
                         " bytes cannot fit the context (at most " +
                         std::to_string(ctx.max_prompt_bytes) + " bytes of text can)");
}

Status CheckRequestId(std::string_view id) {
  if (id.size() > kMaxRequestIdBytes) {
    return InvalidArgument("request_id: " + std::to_string(id.size()) + " bytes (at most " +
                           std::to_string(kMaxRequestIdBytes) + " printable ASCII characters)");
  }
  for (unsigned char c : id) {
    if (c < 0x20 || c > 0x7e) {
      return InvalidArgument("request_id: byte " + std::to_string(c) +
                             " is not printable ASCII (0x20..0x7e)");
    }
  }
  return Status::Ok();
}

using Json = nlohmann::ordered_json;

// Roles a template may see: role strings count as template text (model/chat/jinja.h), so an
// unchecked role could spell a control token.
constexpr std::array<std::string_view, 4> kChatRoles = {"system", "user", "assistant", "tool"};
// Template variables a request sets itself, which chat_template_kwargs may not replace (the
// special-token strings count as template text: replacing them would forge control tokens).
constexpr std::array<std::string_view, 6> kReservedVariables = {
    "messages", "add_generation_prompt", "tools", "documents", "bos_token", "eos_token"};

// Whether `v` holds an object with a "role" key anywhere (strings under such keys count as
// template text, jinja.h RenderOptions::template_keys).
bool HoldsRoleKey(const Json& v) {
  if (v.is_object() && v.contains("role")) return true;
  if (!v.is_structured()) return false;
  return std::any_of(v.begin(), v.end(), [](const Json& e) { return HoldsRoleKey(e); });
}

std::string TokenText(const Tokenizer& tok, int32_t id) {
  return id >= 0 ? std::string(tok.Piece(id)) : std::string();
}

// The variables of apply_chat_template: messages, add_generation_prompt, the special tokens and
// chat_template_kwargs.
Result<Json> ChatVariables(const Tokenizer& tok, const ApiRequest& api) {
  Json messages = Json::array();
  for (size_t i = 0; i < api.messages.size(); ++i) {
    const ChatMessage& m = api.messages[i];
    if (std::find(kChatRoles.begin(), kChatRoles.end(), m.role) == kChatRoles.end()) {
      return InvalidArgument("messages[" + std::to_string(i) + "].role: '" + m.role +
                             "' (expected " + DescribeChoices(kChatRoles) + ")");
    }
    messages.push_back({{"role", m.role}, {"content", m.content}});
  }
  Json vars = {{"messages", std::move(messages)},
               {"add_generation_prompt", api.add_generation_prompt},
               {"bos_token", TokenText(tok, tok.bos_id())},
               {"eos_token", TokenText(tok, tok.eos_id())}};
  if (api.chat_template_kwargs.is_null()) return vars;
  if (!api.chat_template_kwargs.is_object()) {
    return InvalidArgument("chat_template_kwargs: expected an object");
  }
  for (const auto& [key, value] : api.chat_template_kwargs.items()) {
    if (std::find(kReservedVariables.begin(), kReservedVariables.end(), key) !=
        kReservedVariables.end()) {
      return InvalidArgument("chat_template_kwargs." + key + ": set by the request itself");
    }
    if (HoldsRoleKey(value)) {
      return InvalidArgument("chat_template_kwargs." + key + ": may not hold \"role\" keys");
    }
    vars[key] = value;
  }
  return vars;
}

// Renders the conversation and tokenizes it: special tokens only in the template's own text,
// and BOS in front unless the template wrote it (as llama.cpp does).
Status BuildChatPrompt(const ServingContext& ctx, const ApiRequest& api, Request* r) {
  if (api.messages.empty()) return InvalidArgument("messages: empty");
  if (!ctx.chat_template.ok()) return ctx.chat_template.status();
  const Tokenizer& tok = *ctx.model->tokenizer;
  PAGODA_ASSIGN_OR_RETURN(Json vars, ChatVariables(tok, api));
  auto rendered = ctx.chat_template->Render(vars);
  if (!rendered.ok()) {
    const bool raised = rendered.status().code() == StatusCode::kAborted;
    return InvalidArgument("messages: " + std::string(raised ? "" : "the chat template: ") +
                           rendered.status().message());
  }
  PAGODA_RETURN_IF_ERROR(CheckPromptBytes(ctx, "messages", rendered->text.size()));
  r->prompt_token_ids = EncodeChatPrompt(tok, *rendered);
  return Status::Ok();
}

}  // namespace

std::vector<int32_t> EncodeChatPrompt(const Tokenizer& tok, const jinja::Rendered& rendered) {
  std::vector<TextSpan> template_spans;
  for (const jinja::Segment& s : rendered.segments) {
    if (s.kind == jinja::SegmentKind::kTemplate) template_spans.push_back({s.offset, s.length});
  }
  std::vector<int32_t> ids = tok.EncodeWithSpecials(rendered.text, template_spans, false);
  const int32_t bos = tok.bos_id();
  if (tok.add_bos_by_default() && bos >= 0 && (ids.empty() || ids[0] != bos)) {
    ids.insert(ids.begin(), bos);
  }
  return ids;
}

std::vector<int32_t> EncodePrompt(const Tokenizer& tok, const ApiRequest& api) {
  const bool add_bos = api.add_special_tokens.value_or(tok.add_bos_by_default());
  if (!api.parse_special) return tok.Encode(api.prompt, add_bos);
  const TextSpan all{0, api.prompt.size()};
  return tok.EncodeWithSpecials(
      api.prompt, *api.parse_special ? std::span(&all, 1) : std::span<const TextSpan>(), add_bos);
}

void ApplyModelDefaults(const GenerationDefaults& d, const SamplingGiven& given,
                        SamplingParams* s) {
  if (!given.temperature && d.temperature) s->temperature = *d.temperature;
  if (!given.top_p && d.top_p) s->top_p = *d.top_p;
  if (!given.top_k && d.top_k) s->top_k = *d.top_k;
  if (!given.repetition_penalty && d.repetition_penalty) {
    s->repetition_penalty = *d.repetition_penalty;
  }
}

namespace {

Status BuildPrompt(const ServingContext& ctx, const ApiRequest& api, Request* r) {
  const Tokenizer& tok = *ctx.model->tokenizer;
  switch (api.input) {
    case ApiInput::kPrompt:
      if (api.prompt.empty()) return InvalidArgument("prompt: empty");
      PAGODA_RETURN_IF_ERROR(CheckPromptBytes(ctx, "prompt", api.prompt.size()));
      r->prompt_token_ids = EncodePrompt(tok, api);
      return Status::Ok();
    case ApiInput::kPromptTokenIds:
      if (api.prompt_token_ids.empty()) return InvalidArgument("prompt_token_ids: empty");
      r->prompt_token_ids = api.prompt_token_ids;
      return Status::Ok();
    case ApiInput::kMessages:
      return BuildChatPrompt(ctx, api, r);
    case ApiInput::kNone:
      break;
  }
  return InvalidArgument("input: set prompt, prompt_token_ids or messages");
}

int32_t MaxModelLen(const ServingContext& ctx) {
  return ctx.max_model_len > 0 ? ctx.max_model_len : ctx.model->config.context_length;
}

}  // namespace

SamplingParams DefaultSampling(const GenerationDefaults& defaults) {
  SamplingParams s;
  ApplyModelDefaults(defaults, SamplingGiven{}, &s);
  return s;
}

int32_t MaxTokensLimit(const ServingContext& ctx) {
  return ctx.max_tokens_limit > 0 ? ctx.max_tokens_limit : MaxModelLen(ctx);
}

// Sound bound: every token of an encoding stands for at most L bytes of the normalized text,
// L = the longest TokenBytes or Piece of the vocabulary (a special token matched in the text is
// its piece; a byte-level BPE token's bytes are exactly the
// input bytes it covers; a SentencePiece piece's bytes are its input with spaces as 3-byte "▁",
// never fewer; an unknown character, at most 4 bytes, is one token). Normalization shrinks text
// by at most 4x (Pagoda's tokenizers do no NFKC; NFC composition and a 4-byte code point
// becoming 1 byte stay within it), so a prompt that fits max_model_len - 1 tokens has at most
// 4 * L * max_model_len bytes. Only runs of whitespace that SentencePiece's
// remove_extra_whitespaces collapses can shrink further: prompts padded with over 4x that in
// whitespace are refused too, deliberately.
int64_t MaxPromptBytes(const Tokenizer& tokenizer, int32_t max_model_len) {
  int64_t longest = 4;  // one unknown UTF-8 character
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const size_t bytes = std::max(tokenizer.TokenBytes(id).size(), tokenizer.Piece(id).size());
    longest = std::max(longest, static_cast<int64_t>(bytes));
  }
  return 4 * longest * std::max(1, max_model_len);
}

Result<Request> BuildRequest(ServingContext& ctx, const ApiRequest& api) {
  PAGODA_RETURN_IF_ERROR(CheckRequestId(api.request_id));
  Request r;
  r.request_id = api.request_id.empty() ? "req-" + std::to_string(ctx.next_request_id.fetch_add(1))
                                        : api.request_id;
  PAGODA_RETURN_IF_ERROR(BuildPrompt(ctx, api, &r));
  r.sampling = api.sampling;
  ApplyModelDefaults(ctx.model->generation, api.sampling_given, &r.sampling);
  const int32_t limit = MaxTokensLimit(ctx);
  const int32_t room = MaxModelLen(ctx) - static_cast<int32_t>(r.prompt_token_ids.size());
  r.stopping.max_tokens = api.max_tokens.value_or(std::clamp(room, 1, limit));
  if (r.stopping.max_tokens < 1 || r.stopping.max_tokens > limit) {
    return InvalidArgument("max_tokens: " + std::to_string(r.stopping.max_tokens) +
                           " (expected 1.." + std::to_string(limit) + ")");
  }
  r.stopping.stop = api.stop;
  r.stopping.stop_token_ids.insert(r.stopping.stop_token_ids.end(), api.stop_token_ids.begin(),
                                   api.stop_token_ids.end());
  r.stopping.ignore_eos = api.ignore_eos;
  r.stopping.include_stop_str_in_output = api.include_stop_str_in_output;
  r.priority = api.priority;
  r.speculative = api.speculative;
  PAGODA_ASSIGN_OR_RETURN(r.grammar, ctx.grammar_cache.Compile(api.constraint));
  return r;
}

}  // namespace pagoda
