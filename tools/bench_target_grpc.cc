// BenchTarget over gRPC: pagoda.v1.Generation/Generate (tools/bench_target.h).
#include "pagoda/v1/generation.grpc.pb.h"
#include "tools/bench_target.h"

namespace pagoda::cli {
namespace {

class GrpcTarget final : public BenchTarget {
 public:
  explicit GrpcTarget(const ClientOptions& client)
      : client_(client), stub_(v1::Generation::NewStub(MakeChannel(client))) {}

  Result<ServedModel> Model() override {
    v1::ModelInfo info;
    grpc::ClientContext ctx;
    PrepareContext(client_, &ctx);
    const grpc::Status st = stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    if (!st.ok()) return Status(StatusCode::kUnavailable, st.error_message());
    return ServedModel{info.model_name(), info.vocab_size()};
  }

  StreamTiming Stream(const std::vector<int32_t>& prompt, int32_t gen_len) override {
    v1::GenerateRequest req;
    for (int32_t id : prompt) req.mutable_prompt_token_ids()->add_ids(id);
    req.mutable_sampling()->set_temperature(0);
    req.mutable_stopping()->set_max_tokens(gen_len);
    req.mutable_stopping()->set_ignore_eos(true);
    grpc::ClientContext ctx;
    PrepareContext(client_, &ctx);
    StreamTiming t;
    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    auto reader = stub_->Generate(&ctx, req);
    v1::GenerateResponse resp;
    while (reader->Read(&resp)) {
      if (resp.token_ids_size() > 0) {
        RecordTokens(start, std::chrono::steady_clock::now(), resp.token_ids_size(), &last, &t);
      }
    }
    const grpc::Status st = reader->Finish();
    t.ok = st.ok();
    t.error = st.error_message();
    return t;
  }

 private:
  ClientOptions client_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace

std::unique_ptr<BenchTarget> MakeGrpcTarget(const ClientOptions& client) {
  return std::make_unique<GrpcTarget>(client);
}

void RecordTokens(std::chrono::steady_clock::time_point start,
                  std::chrono::steady_clock::time_point now, int64_t n,
                  std::chrono::steady_clock::time_point* last, StreamTiming* t) {
  const auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  if (t->ttft_s < 0) {
    t->ttft_s = secs(now - start);
  } else {
    for (int64_t k = 0; k < n; ++k) t->itl_s.push_back(secs(now - *last) / n);
  }
  *last = now;
  t->tokens += n;
}

}  // namespace pagoda::cli
