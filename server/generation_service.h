// GenerationService: the pagoda.v1.Generation gRPC service (callback API) over the Engine.
//
// Generate streams each RequestOutput as one GenerateResponse as soon as the engine emits it
// (the engine thread wakes the call's reactor through RequestStream::SetListener). Complete
// gathers the same messages into one CompleteResponse. Client cancellation or a passed deadline
// aborts the request in the engine at once, which frees its KV blocks within one step.
// Errors: INVALID_ARGUMENT naming the field, RESOURCE_EXHAUSTED for a full queue, UNAVAILABLE
// while draining, UNAUTHENTICATED without the configured bearer token, INTERNAL when the
// backend failed this request's step.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "model/chat_template.h"
#include "model/model.h"
#include "pagoda/v1/generation.grpc.pb.h"
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

grpc::Status ToGrpcStatus(const Status& status);

// Sets ctx->chat_template and ctx->end_of_turn_id for ctx->model: from `name`
// (model.chat_template) or, when it is "", detected from the model's own template.
void ResolveChatTemplate(std::string_view name, ServingContext* ctx);

// Builds the engine Request from the wire request; errors name the field.
Result<Request> BuildRequest(ServingContext& ctx, const v1::GenerateRequest& req);

class GenerationService final : public v1::Generation::CallbackService {
 public:
  explicit GenerationService(ServingContext& ctx) : ctx_(ctx) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* call, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Complete(grpc::CallbackServerContext* call,
                                     const v1::GenerateRequest* request,
                                     v1::CompleteResponse* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* call,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* call,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* call,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

 private:
  ServingContext& ctx_;
};

// Checks the bearer token (if configured) and the draining flag.
grpc::Status Admit(ServingContext& ctx, grpc::CallbackServerContext* call);

}  // namespace pagoda
