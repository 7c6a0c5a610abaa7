// The server APIs `pagoda bench serve` can load: one streamed generation request at a time,
// timed on the client. Offers BenchTarget (the interface) and its two makers:
//   MakeGrpcTarget    pagoda.v1.Generation/Generate over gRPC (--api grpc);
//   MakeOpenAiTarget  POST /v1/completions with "stream": true over HTTP (--api openai), as an
//                     OpenAI client sees it: SSE chunks, usage from stream_options.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/grpc_client.h"

namespace pagoda::cli {

// What one streamed request measured.
struct StreamTiming {
  bool ok = false;
  std::string error;
  double ttft_s = -1;         // request sent -> first token(s)
  std::vector<double> itl_s;  // one per later token (a message of k tokens counts k gaps of 1/k)
  int64_t tokens = 0;
};

struct ServedModel {
  std::string name;
  int32_t vocab_size = 0;  // the range prompt token ids are drawn from
};

class BenchTarget {
 public:
  virtual ~BenchTarget() = default;
  // The model the server serves; an error when the server cannot be reached.
  virtual Result<ServedModel> Model() = 0;
  // Generates exactly `gen_len` tokens greedily (EOS ignored) after `prompt`. Thread-safe.
  virtual StreamTiming Stream(const std::vector<int32_t>& prompt, int32_t gen_len) = 0;
};

std::unique_ptr<BenchTarget> MakeGrpcTarget(const ClientOptions& client);
std::unique_ptr<BenchTarget> MakeOpenAiTarget(const ClientOptions& client);

// Records the arrival of `n` tokens at `now` into `t` (TTFT for the first, else ITL gaps).
void RecordTokens(std::chrono::steady_clock::time_point start,
                  std::chrono::steady_clock::time_point now, int64_t n,
                  std::chrono::steady_clock::time_point* last, StreamTiming* t);

}  // namespace pagoda::cli
