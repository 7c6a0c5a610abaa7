#include "server/api_request.h"

#include <algorithm>

namespace pagoda {
namespace {

// Renders a conversation with the resolved chat template and tokenizes it; the template's
// end-of-turn token becomes a stop token.
Status BuildChatPrompt(const ServingContext& ctx, const std::vector<ChatMessage>& messages,
                       Request* r) {
  if (messages.empty()) return InvalidArgument("messages: empty");
  if (!ctx.chat_template.ok()) return ctx.chat_template.status();
  PAGODA_ASSIGN_OR_RETURN(std::string text, RenderChat(*ctx.chat_template, messages, true));
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

Result<Request> BuildRequest(ServingContext& ctx, const ApiRequest& api) {
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
