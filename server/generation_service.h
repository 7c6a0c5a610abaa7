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

#include "pagoda/v1/generation.grpc.pb.h"
#include "server/api_request.h"
#include "server/serving_context.h"

namespace pagoda {

grpc::Status ToGrpcStatus(const Status& status);

// The wire request as an ApiRequest (server/api_request.h), with the gRPC API's defaults.
ApiRequest ToApiRequest(const v1::GenerateRequest& req);

// Builds the engine Request from the wire request (ToApiRequest, then the shared
// BuildRequest); errors name the field.
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

// Admit (server/serving_context.h) on the call's `authorization` metadata.
grpc::Status Admit(ServingContext& ctx, grpc::CallbackServerContext* call);

}  // namespace pagoda
