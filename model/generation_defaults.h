// GenerationDefaults: what a model's files say about ending and sampling a generation -- the
// stop tokens and generation_config.json's sampling values -- which the server applies to a
// request only where it leaves a field unset (as vLLM's `--generation-config auto` does).
//
// Sources (model/model.cc and model/hf_model.cc fill it):
//   stop_token_ids  GGUF: tokenizer.ggml.eos_token_id, eot_token_id, eom_token_id (without an
//                   eot key, a control token spelled like a known end-of-turn token, as
//                   llama.cpp does); HF: the tokenizer's EOS (tokenizer_config.json eos_token)
//                   and every eos_token_id of config.json / generation_config.json (int or list).
//   pad_id          GGUF tokenizer.ggml.padding_token_id; HF pad_token_id, else tokenizer_config
//                   pad_token.
//   sampling        generation_config.json temperature, top_p, top_k, repetition_penalty.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda {

struct GenerationDefaults {
  std::vector<int32_t> stop_token_ids;  // distinct, in the order above
  int32_t pad_id = -1;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> repetition_penalty;

  // Appends `id` unless negative or present.
  void AddStopToken(int32_t id);
};

// Reads the sampling keys of a generation_config.json object (`file` names it in errors);
// absent or null keys stay unset. Errors: INVALID_ARGUMENT naming the key.
Status ReadSamplingDefaults(const nlohmann::json& generation_config, const std::string& file,
                            GenerationDefaults* defaults);

// The texts of the end-of-turn tokens llama.cpp recognises when a GGUF has no eot key.
inline constexpr std::string_view kKnownEndOfTurnTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>"};

}  // namespace pagoda
