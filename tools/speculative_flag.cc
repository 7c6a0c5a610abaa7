#include "tools/speculative_flag.h"

#include "common/field_check.h"

namespace pagoda::cli {

void AddSpeculativeFlags(CLI::App* cmd, SpeculativeFlags* flags) {
  cmd->add_option("--speculative", flags->method,
                  "speculative.method: none | ngram (prompt lookup) | draft (a smaller model with "
                  "the same vocabulary, --draft-model); proposals are verified in one "
                  "multi-token decode step, outputs unchanged");
  cmd->add_option("--draft-model", flags->draft_model,
                  "speculative.draft_model: the draft model of --speculative draft (GGUF file or "
                  "Hugging Face directory)");
  cmd->add_option("--num-speculative-tokens", flags->num_tokens,
                  "speculative.num_tokens: tokens proposed per sequence and step (1..16)");
  cmd->add_option("--ngram-min", flags->ngram_min,
                  "speculative.ngram_min: shortest suffix looked up (1..64)");
  cmd->add_option("--ngram-max", flags->ngram_max,
                  "speculative.ngram_max: longest suffix looked up (1..64)");
}

Status ApplySpeculativeFlags(const SpeculativeFlags& flags, SpeculativeConfig* config) {
  if (!flags.method.empty()) {
    const auto method =
        ParseEnum(EnumNames<SpeculativeMethod>(kSpeculativeMethodNames), flags.method);
    if (!method) {
      return InvalidArgument("--speculative: '" + flags.method +
                             "' (expected none, ngram or draft)");
    }
    config->method = *method;
  }
  if (!flags.draft_model.empty()) config->draft_model = flags.draft_model;
  if (flags.num_tokens != 0) config->num_tokens = flags.num_tokens;
  if (flags.ngram_min != 0) config->ngram_min = flags.ngram_min;
  if (flags.ngram_max != 0) config->ngram_max = flags.ngram_max;
  return Status::Ok();
}

}  // namespace pagoda::cli
