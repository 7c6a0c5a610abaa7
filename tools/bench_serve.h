// `pagoda bench serve`: a closed-loop (or Poisson-rate) load generator for a running
// `pagoda serve`, over gRPC (--api grpc) or the OpenAI-compatible HTTP API (--api openai;
// tools/bench_target.h), reporting TTFT, inter-token latency percentiles and aggregate tok/s.
#pragma once

#include <CLI/CLI.hpp>

namespace pagoda::cli {

void RegisterBenchServe(CLI::App* bench, int* exit_code);

}  // namespace pagoda::cli
