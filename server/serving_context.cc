#include "server/serving_context.h"

#include "common/mapped_file.h"

namespace pagoda {

namespace {

// The text of model.chat_template `setting`: one of the model's named templates, else a file.
Result<std::string> ReadConfiguredTemplate(const Model& m, const std::string& setting) {
  constexpr uint64_t kMaxTemplateBytes = 16 << 20;
  const auto named = m.named_chat_templates.find(setting);
  if (named != m.named_chat_templates.end()) return named->second;
  auto file = ReadSmallFile(setting, kMaxTemplateBytes);
  if (file.ok()) return file;
  std::string names;
  for (const auto& [name, _] : m.named_chat_templates) {
    names += (names.empty() ? "" : ", ") + name;
  }
  return InvalidArgument("model.chat_template: " + file.status().message() +
                         " (expected a template file" +
                         (names.empty() ? "" : " or one of the model's templates: " + names) + ")");
}

}  // namespace

Status LoadChatTemplate(std::string_view setting, ServingContext* ctx) {
  std::string text = ctx->model->chat_template;
  std::string source = "the model's chat template";
  if (!setting.empty()) {
    PAGODA_ASSIGN_OR_RETURN(text, ReadConfiguredTemplate(*ctx->model, std::string(setting)));
    source = std::string(setting);
  } else if (text.empty()) {
    ctx->chat_template = InvalidArgument(
        "messages: the model has no chat template (set model.chat_template to a template file)");
    return Status::Ok();
  }
  auto parsed = jinja::Template::Parse(text);
  if (!parsed.ok()) {
    return InvalidArgument(
        "model.chat_template: " + source + ": " + parsed.status().message() +
        (setting.empty() ? " (set model.chat_template to a template file)" : ""));
  }
  ctx->chat_template = std::move(parsed).value();
  return Status::Ok();
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
