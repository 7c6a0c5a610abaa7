// ServingContext: what every API frontend (gRPC, OpenAI HTTP) shares about the served model:
// the model and engine, limits, the bearer token, the resolved chat template, the draining
// flag and the request-id counter. Offers:
//   LoadChatTemplate     model.chat_template (or the model's own template) parsed -> ctx, once;
//   Admit                the bearer-token check (constant time) and the draining check, the
//                        first thing every API call does.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/chat/jinja.h"
#include "model/model.h"
#include "scheduler/engine.h"
#include "scheduler/grammar/constraint.h"
#include "server/metrics.h"

namespace pagoda {

struct ServingContext {
  const Model* model = nullptr;
  Engine* engine = nullptr;
  Metrics* metrics = nullptr;
  std::string model_name;
  std::string backend_name;
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  // The longest sequence (prompt + output): the engine's effective engine.max_model_len; 0:
  // the model's context length (contexts without an engine, in tests).
  int32_t max_model_len = 0;
  int32_t max_tokens_limit = 0;  // 0: max_model_len
  int64_t max_prompt_bytes = 0;  // longer prompt text is refused untokenized; 0: no limit
  std::string bearer_token;      // empty: no auth
  // The parsed chat template of `messages` requests, set once by LoadChatTemplate; an error
  // here (the model has none) is what every `messages` request answers.
  Result<jinja::Template> chat_template = InvalidArgument("messages: no chat template loaded");
  // Compiled structured-output constraints, by constraint text (shared by every frontend).
  grammar::GrammarCache grammar_cache;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> next_request_id{0};
};

// Parses the chat template into ctx->chat_template: `setting` (model.chat_template) "" = the
// model's default template; one of the model's named templates; else a template file. A model
// without a template leaves an INVALID_ARGUMENT for `messages` requests. Errors (start-up
// errors, INVALID_ARGUMENT naming the source): an unreadable file, a template syntax error.
Status LoadChatTemplate(std::string_view setting, ServingContext* ctx);

// Admits one API call: UNAUTHENTICATED unless `authorization` (the header / metadata value, or
// nullopt when absent) is "Bearer <ctx.bearer_token>" (compared in constant time; anything
// passes when no token is configured), then UNAVAILABLE while draining.
Status Admit(const ServingContext& ctx, std::optional<std::string_view> authorization);

// UNAUTHENTICATED unless `authorization` is "Bearer <token>" (compared in constant time); OK
// when `token` is empty (no auth configured).
Status CheckBearer(std::optional<std::string_view> authorization, std::string_view token);

// Compares two strings in time that depends on their lengths only, not on their contents.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace pagoda
