// BenchTarget over the OpenAI-compatible HTTP API: streamed POST /v1/completions
// (tools/bench_target.h). Each SSE chunk carries one engine step's token (as vLLM's
// benchmark_serving counts them); the final usage chunk must agree.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "tools/bench_target.h"

namespace pagoda::cli {
namespace {

using nlohmann::json;

// OpenAI's API does not tell the vocabulary size: prompt ids are drawn from [3, 259), token ids
// every vocabulary has (the byte tokens of SentencePiece and byte-level BPE alike).
constexpr int32_t kPromptVocab = 259;

class OpenAiTarget final : public BenchTarget {
 public:
  explicit OpenAiTarget(const ClientOptions& client) : client_(client) {}

  Result<ServedModel> Model() override {
    httplib::Client http = Connect();
    const httplib::Result res = http.Get("/v1/models");
    if (!res) return Status(StatusCode::kUnavailable, httplib::to_string(res.error()));
    if (res->status != 200) {
      return Status(StatusCode::kUnavailable,
                    "GET /v1/models: HTTP " + std::to_string(res->status) + " " + res->body);
    }
    const json j = json::parse(res->body, nullptr, false);
    if (j.is_discarded() || !j.contains("data") || j["data"].empty()) {
      return Status(StatusCode::kUnavailable, "GET /v1/models: no model in " + res->body);
    }
    model_ = j["data"][0].value("id", "");
    return ServedModel{model_, kPromptVocab};
  }

  StreamTiming Stream(const std::vector<int32_t>& prompt, int32_t gen_len) override {
    const json body = {{"model", model_},
                       {"prompt", prompt},
                       {"max_tokens", gen_len},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"stream", true},
                       {"stream_options", {{"include_usage", true}}}};
    StreamTiming t;
    httplib::Client http = Connect();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    std::string buffer;
    int64_t usage_tokens = -1;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      buffer.append(data, n);
      for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
        OnEvent(std::string_view(buffer).substr(0, end), start, &last, &usage_tokens, &t);
        buffer.erase(0, end + 2);
      }
      return true;
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    if (!http.send(req, res, error)) {
      t.error = httplib::to_string(error);
    } else if (res.status != 200) {
      t.error = "HTTP " + std::to_string(res.status) + " " + buffer;
    } else {
      if (t.error.empty() && usage_tokens != t.tokens) {
        t.error = "usage.completion_tokens " + std::to_string(usage_tokens) + " but " +
                  std::to_string(t.tokens) + " chunks";
      }
      t.ok = t.error.empty();
    }
    return t;
  }

 private:
  httplib::Client Connect() const {
    httplib::Client http("http://" + client_.server);
    http.set_tcp_nodelay(true);
    if (!client_.token.empty()) http.set_bearer_token_auth(client_.token);
    if (client_.timeout_s > 0) {
      const auto t = std::chrono::duration<double>(client_.timeout_s);
      http.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
    }
    return http;
  }

  // One SSE event: a token chunk, the final usage chunk, an error or [DONE].
  static void OnEvent(std::string_view event, std::chrono::steady_clock::time_point start,
                      std::chrono::steady_clock::time_point* last, int64_t* usage_tokens,
                      StreamTiming* t) {
    constexpr std::string_view kData = "data: ";
    if (!event.starts_with(kData) || event == "data: [DONE]") return;
    event.remove_prefix(kData.size());
    if (event.starts_with(R"({"choices":[],)")) {  // the usage chunk (keys are sorted)
      const json j = json::parse(event, nullptr, false);
      if (!j.is_discarded()) *usage_tokens = j["usage"].value("completion_tokens", int64_t{0});
      return;
    }
    if (event.starts_with(R"({"error")")) {
      t->error = std::string(event);
      return;
    }
    RecordTokens(start, std::chrono::steady_clock::now(), 1, last, t);
  }

  ClientOptions client_;
  std::string model_;
};

}  // namespace

std::unique_ptr<BenchTarget> MakeOpenAiTarget(const ClientOptions& client) {
  return std::make_unique<OpenAiTarget>(client);
}

}  // namespace pagoda::cli
