#include "server/generation_service.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <string_view>

#include "server/request_log.h"

namespace pagoda {
namespace {

void FillLogprobs(const std::vector<TokenLogprob>& in,
                  google::protobuf::RepeatedPtrField<v1::TokenLogprob>* out) {
  for (const TokenLogprob& lp : in) {
    v1::TokenLogprob* p = out->Add();
    p->set_token_id(lp.token_id);
    p->set_logprob(lp.logprob);
    for (const auto& [id, logprob] : lp.top) {
      v1::TopLogprob* t = p->add_top_logprobs();
      t->set_token_id(id);
      t->set_logprob(logprob);
    }
  }
}

void FillUsage(const Usage& u, v1::Usage* out) {
  out->set_prompt_tokens(u.prompt_tokens);
  out->set_completion_tokens(u.completion_tokens);
  out->set_cached_prompt_tokens(u.cached_prompt_tokens);
}

void FillSampling(const v1::SamplingParams& p, SamplingParams* s, SamplingGiven* given) {
  given->temperature = p.has_temperature();
  given->top_p = p.has_top_p();
  given->top_k = p.has_top_k();
  given->repetition_penalty = p.has_repetition_penalty();
  s->temperature = p.has_temperature() ? p.temperature() : 1.0f;
  s->top_k = p.has_top_k() ? p.top_k() : 0;
  s->top_p = p.has_top_p() ? p.top_p() : 1.0f;
  s->min_p = p.min_p();
  s->repetition_penalty = p.has_repetition_penalty() ? p.repetition_penalty() : 1.0f;
  s->presence_penalty = p.presence_penalty();
  s->frequency_penalty = p.frequency_penalty();
  if (p.has_seed()) s->seed = p.seed();
  s->n = p.has_n() ? p.n() : 1;
  s->logprobs = p.logprobs();
  s->top_logprobs = p.top_logprobs();
  // A protobuf map iterates in no fixed order: sorted by id, so an error names the same id
  // every time.
  for (const auto& [id, bias] : p.logit_bias()) s->logit_bias.emplace_back(id, bias);
  std::sort(s->logit_bias.begin(), s->logit_bias.end());
}

// State shared between a call's reactor and the engine-thread listener; `reactor` is cleared
// (under `mu`) before the reactor is deleted, so a late notification is a no-op.
template <typename Reactor>
struct Bridge {
  std::recursive_mutex mu;
  Reactor* reactor = nullptr;
};

// Base for the two generation reactors: submission, the listener hookup and cleanup.
template <typename Base>
class EngineCall : public Base {
 protected:
  explicit EngineCall(ServingContext& ctx) : ctx_(ctx) {}

  // Submits; on error returns the status to finish the call with.
  grpc::Status Submit(grpc::CallbackServerContext* call, const v1::GenerateRequest& req) {
    grpc::Status admit = Admit(ctx_, call);
    if (!admit.ok()) return admit;
    auto built = BuildRequest(ctx_, req);
    if (!built.ok()) return ToGrpcStatus(built.status());
    request_id_ = built->request_id;
    auto stream = ctx_.engine->Submit(std::move(built).value());
    if (!stream.ok()) return ToGrpcStatus(stream.status());
    stream_ = *stream;
    return grpc::Status::OK;
  }

  template <typename Self>
  void Listen(Self* self) {
    auto bridge = std::make_shared<Bridge<Self>>();
    bridge->reactor = self;
    unhook_ = [bridge] {
      std::lock_guard<std::recursive_mutex> lock(bridge->mu);
      bridge->reactor = nullptr;
    };
    lock_ = [bridge] { bridge->mu.lock(); };
    unlock_ = [bridge] { bridge->mu.unlock(); };
    stream_->SetListener([bridge] {
      std::lock_guard<std::recursive_mutex> lock(bridge->mu);
      if (bridge->reactor) bridge->reactor->Pump();
    });
  }

  void OnCancel() override {
    if (stream_) ctx_.engine->Abort(request_id_);
  }

  void OnDone() override {
    if (stream_) stream_->SetListener(nullptr);
    if (unhook_) unhook_();
    delete this;
  }

  ServingContext& ctx_;
  std::string request_id_;
  std::shared_ptr<RequestStream> stream_;
  std::function<void()> unhook_, lock_, unlock_;
};

class GenerateReactor final : public EngineCall<grpc::ServerWriteReactor<v1::GenerateResponse>> {
 public:
  GenerateReactor(ServingContext& ctx, grpc::CallbackServerContext* call,
                  const v1::GenerateRequest& req)
      : EngineCall(ctx) {
    grpc::Status st = Submit(call, req);
    if (!st.ok()) {
      Finish(st);
      return;
    }
    Listen(this);
  }

  // Writes the next queued message unless a write is in flight. Called with the bridge locked.
  void Pump() {
    if (writing_ || finished_) return;
    RequestOutput o;
    if (!stream_->Pop(&o, EngineClock::now())) return;
    if (o.finish_reason == FinishReason::kError) {
      finished_ = true;
      if (o.request_finished) LogRequest({"grpc", "Generate", request_id_, 500, true}, o);
      Finish(grpc::Status(grpc::StatusCode::INTERNAL, "generation failed: " + o.error));
      return;
    }
    response_.Clear();
    response_.set_request_id(request_id_);
    response_.set_index(o.index);
    for (int32_t t : o.token_ids) response_.add_token_ids(t);
    response_.set_text(o.text);
    FillLogprobs(o.logprobs, response_.mutable_logprobs());
    response_.set_finish_reason(FinishReasonName(o.finish_reason));
    if (o.request_finished) {
      FillUsage(o.usage, response_.mutable_usage());
      LogRequest({"grpc", "Generate", request_id_, 200, true}, o);
      finished_ = true;
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    writing_ = true;
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    lock_();
    writing_ = false;
    if (!ok) {  // the client is gone
      ctx_.engine->Abort(request_id_);
      if (!finished_) {
        finished_ = true;
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      }
    } else {
      Pump();
    }
    unlock_();
  }

 private:
  v1::GenerateResponse response_;
  bool writing_ = false;
  bool finished_ = false;
};

class CompleteReactor final : public EngineCall<grpc::ServerUnaryReactor> {
 public:
  CompleteReactor(ServingContext& ctx, grpc::CallbackServerContext* call,
                  const v1::GenerateRequest& req, v1::CompleteResponse* response)
      : EngineCall(ctx), response_(response) {
    grpc::Status st = Submit(call, req);
    if (!st.ok()) {
      Finish(st);
      return;
    }
    response_->set_request_id(request_id_);
    Listen(this);
  }

  // Gathers every queued message; finishes the call on the request's last one.
  void Pump() {
    RequestOutput o;
    while (!finished_ && stream_->Pop(&o, EngineClock::now())) {
      while (response_->completions_size() <= o.index) {
        response_->add_completions()->set_index(response_->completions_size() - 1);
      }
      v1::Completion* c = response_->mutable_completions(o.index);
      for (int32_t t : o.token_ids) c->add_token_ids(t);
      c->mutable_text()->append(o.text);
      FillLogprobs(o.logprobs, c->mutable_logprobs());
      if (o.finish_reason != FinishReason::kNone) {
        c->set_finish_reason(FinishReasonName(o.finish_reason));
      }
      if (o.finish_reason == FinishReason::kError) error_ = o.error;
      if (!o.request_finished) continue;
      FillUsage(o.usage, response_->mutable_usage());
      LogRequest({"grpc", "Complete", request_id_, error_.empty() ? 200 : 500, false}, o);
      finished_ = true;
      Finish(error_.empty()
                 ? grpc::Status::OK
                 : grpc::Status(grpc::StatusCode::INTERNAL, "generation failed: " + error_));
    }
  }

 private:
  v1::CompleteResponse* response_;
  std::string error_;
  bool finished_ = false;
};

}  // namespace

grpc::Status ToGrpcStatus(const Status& s) {
  using grpc::StatusCode;
  switch (s.code()) {
    case pagoda::StatusCode::kOk:
      return grpc::Status::OK;
    case pagoda::StatusCode::kInvalidArgument:
    case pagoda::StatusCode::kOutOfRange:
      return grpc::Status(StatusCode::INVALID_ARGUMENT, s.message());
    case pagoda::StatusCode::kResourceExhausted:
      return grpc::Status(StatusCode::RESOURCE_EXHAUSTED, s.message());
    case pagoda::StatusCode::kUnavailable:
      return grpc::Status(StatusCode::UNAVAILABLE, s.message());
    case pagoda::StatusCode::kNotFound:
      return grpc::Status(StatusCode::NOT_FOUND, s.message());
    case pagoda::StatusCode::kUnimplemented:
      return grpc::Status(StatusCode::UNIMPLEMENTED, s.message());
    case pagoda::StatusCode::kFailedPrecondition:
      return grpc::Status(StatusCode::FAILED_PRECONDITION, s.message());
    case pagoda::StatusCode::kUnauthenticated:
      return grpc::Status(StatusCode::UNAUTHENTICATED, s.message());
    default:
      return grpc::Status(StatusCode::INTERNAL, s.message());
  }
}

grpc::Status Admit(ServingContext& ctx, grpc::CallbackServerContext* call) {
  const auto& md = call->client_metadata();
  auto it = md.find("authorization");
  std::optional<std::string_view> authorization;
  if (it != md.end()) authorization = std::string_view(it->second.data(), it->second.size());
  return ToGrpcStatus(pagoda::Admit(ctx, authorization));
}

// The request's structured-output constraint (the oneof), or kind kNone.
void FillConstraint(const v1::GenerateRequest& req, grammar::ConstraintSpec* c) {
  using grammar::ConstraintKind;
  switch (req.constraint_case()) {
    case v1::GenerateRequest::kJsonSchema:
      *c = {ConstraintKind::kJsonSchema,
            req.json_schema(),
            {},
            req.json_schema_strict(),
            "json_schema"};
      break;
    case v1::GenerateRequest::kJsonObject:
      if (req.json_object()) *c = {ConstraintKind::kJsonObject, "", {}, false, "json_object"};
      break;
    case v1::GenerateRequest::kRegex:
      *c = {ConstraintKind::kRegex, req.regex(), {}, false, "regex"};
      break;
    case v1::GenerateRequest::kGrammar:
      *c = {ConstraintKind::kGrammar, req.grammar(), {}, false, "grammar"};
      break;
    case v1::GenerateRequest::kChoice:
      *c = {ConstraintKind::kChoice,
            "",
            {req.choice().choices().begin(), req.choice().choices().end()},
            false,
            "choice.choices"};
      break;
    default:
      break;
  }
}

ApiRequest ToApiRequest(const v1::GenerateRequest& req) {
  ApiRequest api;
  api.request_id = req.request_id();
  switch (req.input_case()) {
    case v1::GenerateRequest::kPrompt:
      api.input = ApiInput::kPrompt;
      api.prompt = req.prompt();
      break;
    case v1::GenerateRequest::kPromptTokenIds:
      api.input = ApiInput::kPromptTokenIds;
      api.prompt_token_ids.assign(req.prompt_token_ids().ids().begin(),
                                  req.prompt_token_ids().ids().end());
      break;
    case v1::GenerateRequest::kMessages:
      api.input = ApiInput::kMessages;
      for (const auto& m : req.messages().messages()) {
        api.messages.push_back({m.role(), m.content()});
      }
      api.add_generation_prompt =
          !req.messages().has_add_generation_prompt() || req.messages().add_generation_prompt();
      if (!req.messages().chat_template_kwargs().empty()) {
        // Not valid JSON -> a string, which BuildRequest answers "expected an object".
        api.chat_template_kwargs = nlohmann::ordered_json::parse(
            req.messages().chat_template_kwargs(), nullptr, /*allow_exceptions=*/false);
        if (api.chat_template_kwargs.is_discarded()) api.chat_template_kwargs = "";
      }
      break;
    default:
      break;
  }
  if (req.has_add_special_tokens()) api.add_special_tokens = req.add_special_tokens();
  if (req.has_parse_special()) api.parse_special = req.parse_special();
  FillSampling(req.sampling(), &api.sampling, &api.sampling_given);
  const auto& st = req.stopping();
  if (st.has_max_tokens()) api.max_tokens = st.max_tokens();
  api.stop.assign(st.stop().begin(), st.stop().end());
  api.stop_token_ids.assign(st.stop_token_ids().begin(), st.stop_token_ids().end());
  api.ignore_eos = st.ignore_eos();
  api.include_stop_str_in_output = st.include_stop_str_in_output();
  api.priority = req.priority();
  if (req.has_speculative()) api.speculative = req.speculative();
  FillConstraint(req, &api.constraint);
  return api;
}

Result<Request> BuildRequest(ServingContext& ctx, const v1::GenerateRequest& req) {
  return BuildRequest(ctx, ToApiRequest(req));
}

grpc::ServerWriteReactor<v1::GenerateResponse>* GenerationService::Generate(
    grpc::CallbackServerContext* call, const v1::GenerateRequest* request) {
  return new GenerateReactor(ctx_, call, *request);
}

grpc::ServerUnaryReactor* GenerationService::Complete(grpc::CallbackServerContext* call,
                                                      const v1::GenerateRequest* request,
                                                      v1::CompleteResponse* response) {
  return new CompleteReactor(ctx_, call, *request, response);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* call,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  auto* reactor = call->DefaultReactor();
  grpc::Status st = Admit(ctx_, call);
  if (st.ok()) {
    const Tokenizer& tok = *ctx_.model->tokenizer;
    ApiRequest api;
    api.prompt = request->text();
    if (request->has_add_special_tokens()) api.add_special_tokens = request->add_special_tokens();
    if (request->has_parse_special()) api.parse_special = request->parse_special();
    for (int32_t id : EncodePrompt(tok, api)) response->add_token_ids(id);
  }
  reactor->Finish(st);
  return reactor;
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* call,
                                                        const v1::DetokenizeRequest* request,
                                                        v1::DetokenizeResponse* response) {
  auto* reactor = call->DefaultReactor();
  grpc::Status st = Admit(ctx_, call);
  const Tokenizer& tok = *ctx_.model->tokenizer;
  for (int32_t id : request->token_ids()) {
    if (st.ok() && (id < 0 || id >= tok.vocab_size())) {
      st = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "token_ids: " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(tok.vocab_size()) + ")");
    }
  }
  if (st.ok()) {
    std::vector<int32_t> ids(request->token_ids().begin(), request->token_ids().end());
    response->set_text(tok.Decode(ids));
  }
  reactor->Finish(st);
  return reactor;
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* call,
                                                          const v1::GetModelInfoRequest*,
                                                          v1::ModelInfo* info) {
  auto* reactor = call->DefaultReactor();
  grpc::Status st = Admit(ctx_, call);
  const ModelConfig& c = ctx_.model->config;
  info->set_model_name(ctx_.model_name);
  info->set_architecture(c.architecture);
  info->set_context_length(c.context_length);
  info->set_vocab_size(c.vocab_size);
  info->set_bos_token_id(ctx_.model->tokenizer->bos_id());
  info->set_eos_token_id(ctx_.model->tokenizer->eos_id());
  info->set_backend(ctx_.backend_name);
  info->set_block_size(ctx_.block_size);
  info->set_num_blocks(ctx_.num_blocks);
  const GenerationDefaults& g = ctx_.model->generation;
  for (int32_t id : g.stop_token_ids) info->add_stop_token_ids(id);
  info->set_pad_token_id(g.pad_id);
  const SamplingParams s = DefaultSampling(g);
  info->set_default_temperature(s.temperature);
  info->set_default_top_p(s.top_p);
  info->set_default_top_k(s.top_k);
  info->set_default_repetition_penalty(s.repetition_penalty);
  info->set_max_tokens_limit(MaxTokensLimit(ctx_));
  info->set_has_chat_template(ctx_.chat_template.ok());
  reactor->Finish(st);
  return reactor;
}

}  // namespace pagoda
