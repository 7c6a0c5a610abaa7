#include "server/api_request.h"

#include <algorithm>

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

// Renders a conversation with the resolved chat template and tokenizes it; the template's
// end-of-turn token becomes a stop token.
Status BuildChatPrompt(const ServingContext& ctx, const std::vector<ChatMessage>& messages,
                       Request* r) {
  if (messages.empty()) return InvalidArgument("messages: empty");
  if (!ctx.chat_template.ok()) return ctx.chat_template.status();
  PAGODA_ASSIGN_OR_RETURN(std::string text, RenderChat(*ctx.chat_template, messages, true));
  PAGODA_RETURN_IF_ERROR(CheckPromptBytes(ctx, "messages", text.size()));
  const Tokenizer& tok = *ctx.model->tokenizer;
  bool add_bos = tok.add_bos_by_default();
  if (tok.bos_id() >= 0) {  // a rendered BOS string becomes the BOS token
    const std::string_view bos = tok.Piece(tok.bos_id());
    if (!bos.empty() && std::string_view(text).starts_with(bos)) {
      text.erase(0, bos.size());
      add_bos = true;
    }
  }
  r->prompt_token_ids = tok.Encode(text, add_bos);
  if (ctx.end_of_turn_id >= 0) r->stopping.stop_token_ids.push_back(ctx.end_of_turn_id);
  return Status::Ok();
}

Status BuildPrompt(const ServingContext& ctx, const ApiRequest& api, Request* r) {
  const Tokenizer& tok = *ctx.model->tokenizer;
  switch (api.input) {
    case ApiInput::kPrompt:
      if (api.prompt.empty()) return InvalidArgument("prompt: empty");
      PAGODA_RETURN_IF_ERROR(CheckPromptBytes(ctx, "prompt", api.prompt.size()));
      r->prompt_token_ids =
          tok.Encode(api.prompt, api.add_special_tokens.value_or(tok.add_bos_by_default()));
      return Status::Ok();
    case ApiInput::kPromptTokenIds:
      if (api.prompt_token_ids.empty()) return InvalidArgument("prompt_token_ids: empty");
      r->prompt_token_ids = api.prompt_token_ids;
      return Status::Ok();
    case ApiInput::kMessages:
      return BuildChatPrompt(ctx, api.messages, r);
    case ApiInput::kNone:
      break;
  }
  return InvalidArgument("input: set prompt, prompt_token_ids or messages");
}

}  // namespace

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
  const int32_t context = ctx.model->config.context_length;
  const int32_t limit = ctx.max_tokens_limit > 0 ? ctx.max_tokens_limit : context;
  const int32_t room = context - static_cast<int32_t>(r.prompt_token_ids.size());
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
  return r;
}

}  // namespace pagoda
