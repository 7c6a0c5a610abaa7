// The speculative-decoding flags of generate, serve and bench model (scheduler/speculative.h):
//   --speculative none|ngram|draft  speculative.method
//   --draft-model PATH            speculative.draft_model
//   --num-speculative-tokens K    speculative.num_tokens
//   --ngram-min N, --ngram-max N  speculative.ngram_min / ngram_max
// A flag not given leaves the config's value (serve: the YAML's; else the defaults). The values
// are range-checked with the rest of the engine config (errors name the speculative.* key).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "scheduler/speculative.h"

namespace pagoda::cli {

struct SpeculativeFlags {  // empty / 0: not given
  std::string method, draft_model;
  int32_t num_tokens = 0, ngram_min = 0, ngram_max = 0;
};

void AddSpeculativeFlags(CLI::App* cmd, SpeculativeFlags* flags);
// INVALID_ARGUMENT naming --speculative for a method Pagoda does not have.
Status ApplySpeculativeFlags(const SpeculativeFlags& flags, SpeculativeConfig* config);

}  // namespace pagoda::cli
