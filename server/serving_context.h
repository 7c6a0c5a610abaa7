// ServingContext: what every API frontend (gRPC, OpenAI HTTP) shares about the served model:
// the model and engine, limits, the bearer token, the resolved chat template, the draining
// flag and the request-id counter. Offers:
//   ResolveChatTemplate  model.chat_template (or the model's own template) -> ctx, once;
//   Admit                the bearer-token check (constant time) and the draining check, the
//                        first thing every API call does.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/chat_template.h"
#include "model/model.h"
#include "scheduler/engine.h"
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
  int32_t max_tokens_limit = 0;  // 0: the context length
  std::string bearer_token;      // empty: no auth
  // The chat template of `messages` requests and the id of its end-of-turn token (-1 when that
  // is not a single token), resolved once by ResolveChatTemplate; an error here is what every
  // `messages` request answers.
  Result<ChatTemplateKind> chat_template = InvalidArgument("messages: no chat template resolved");
  int32_t end_of_turn_id = -1;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> next_request_id{0};
};

// Sets ctx->chat_template and ctx->end_of_turn_id for ctx->model: from `name`
// (model.chat_template) or, when it is "", detected from the model's own template.
void ResolveChatTemplate(std::string_view name, ServingContext* ctx);

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
