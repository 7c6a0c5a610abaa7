// `pagoda bench serve`: a closed-loop (or Poisson-rate) gRPC load generator for a running
// `pagoda serve`, reporting TTFT, inter-token latency percentiles and aggregate tok/s.
#pragma once

#include <CLI/CLI.hpp>

namespace pagoda::cli {

void RegisterBenchServe(CLI::App* bench, int* exit_code);

}  // namespace pagoda::cli
