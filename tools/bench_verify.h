// `pagoda bench verify`: the time of one speculative verification step -- a decode of k + 1
// tokens per sequence with logits for each (the multi-token TKG path) -- against a 1-token decode
// step, on the backend directly (no engine, no sampling): per sequence a prompt of --context
// tokens is prefilled once, then every repetition times one step of each --tokens count in
// rotating order, giving the rejected slots back after each. Reports the median / best step time
// per count and its ratio to the 1-token step; --interleave-bandwidth adds one read-loop pass per
// round so the host's read bandwidth of the same minutes stands beside the figures.
#pragma once

#include <CLI/CLI.hpp>

namespace pagoda::cli {

void RegisterBenchVerify(CLI::App* bench, int* exit_code);

}  // namespace pagoda::cli
