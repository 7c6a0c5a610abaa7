#include "server/serving_context.h"

namespace pagoda {

void ResolveChatTemplate(std::string_view name, ServingContext* ctx) {
  ctx->end_of_turn_id = -1;
  if (name.empty() && ctx->model->chat_template.empty()) {
    ctx->chat_template =
        InvalidArgument("messages: the model has no chat template (set model.chat_template)");
    return;
  }
  Result<ChatTemplateKind> kind =
      name.empty() ? DetectChatTemplate(ctx->model->chat_template) : ParseChatTemplateName(name);
  if (!kind.ok()) {
    ctx->chat_template = kind.status().WithPrefix("messages");
    return;
  }
  ctx->chat_template = *kind;
  const auto eot = ctx->model->tokenizer->Encode(EndOfTurnToken(*kind), false);
  if (eot.size() == 1) ctx->end_of_turn_id = eot[0];
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  // Touch as many bytes when the lengths differ, so the time depends on the lengths only.
  for (size_t i = n; i < b.size(); ++i) diff |= static_cast<unsigned char>(b[i] ^ b[i] ^ 1);
  return diff == 0;
}

Status CheckBearer(std::optional<std::string_view> authorization, std::string_view token) {
  if (token.empty()) return Status::Ok();
  constexpr std::string_view kScheme = "Bearer ";
  const bool ok = authorization && authorization->starts_with(kScheme) &&
                  ConstantTimeEquals(authorization->substr(kScheme.size()), token);
  if (!ok) return Unauthenticated("missing or wrong 'authorization: Bearer <token>'");
  return Status::Ok();
}

Status Admit(const ServingContext& ctx, std::optional<std::string_view> authorization) {
  PAGODA_RETURN_IF_ERROR(CheckBearer(authorization, ctx.bearer_token));
  if (ctx.draining.load()) {
    return Status(StatusCode::kUnavailable, "the server is shutting down");
  }
  return Status::Ok();
}

}  // namespace pagoda
