// SamplingParams: how one request chooses its tokens (vLLM / OpenAI semantics and defaults).
//
// A plain struct; ValidateSamplingParams() checks it against a vocabulary and answers
// INVALID_ARGUMENT naming the field and its allowed range. A Sampler (scheduler/sampler.h)
// expects params that passed validation. Stop strings live in scheduler/stop_checker.h;
// token-id stops (EOS, stop_token_ids) are the OutputProcessor's business.
//
//   temperature         1.0   0 = greedy (argmax after penalties); [0, 100]
//   top_k               0     0 or -1 = off; else keep the k most likely tokens; <= vocab
//   top_p               1.0   nucleus mass, (0, 1]; 1 = off
//   min_p               0.0   drop tokens with p < min_p * p_max; [0, 1]; 0 = off
//   repetition_penalty  1.0   HF style over prompt + output tokens; (0, 10]; 1 = off
//   presence_penalty    0.0   OpenAI style over output tokens; [-2, 2]
//   frequency_penalty   0.0   OpenAI style over output tokens; [-2, 2]
//   seed                none  same seed (and sample index) -> same tokens
//   n                   1     samples per request; [1, 64]
//   logprobs            false return the chosen token's logprob
//   top_logprobs        0     also return the k most likely tokens' logprobs; [0, 20]
//   logit_bias          none  (token id, bias) pairs added to the raw logits before everything
//                             else (OpenAI / vLLM); ids in the vocabulary and distinct, bias
//                             finite in [-100, 100], at most kMaxLogitBiasEntries pairs
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pagoda {

struct SamplingParams {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;
  int32_t n = 1;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias)
};

// OpenAI's bias range: -100 bans a token, +100 makes it (nearly) the only choice.
inline constexpr float kMaxLogitBias = 100.0f;
// Every sampling step of every sample walks the whole list, and each sample keeps a copy, so the
// list is bounded independently of server.max_message_bytes. 1024 is far above real use (banning
// or boosting the few spellings of some words: tens of ids) yet keeps that walk negligible beside
// the vocabulary-sized work of a step.
inline constexpr size_t kMaxLogitBiasEntries = 1024;

// Temperatures below this are treated as greedy (as vLLM does).
inline constexpr float kGreedyTemperature = 1e-5f;

// OK, or INVALID_ARGUMENT "<field> must be in <range>, got <value>"; logit_bias errors name the
// token: "logit_bias.<id>: ...".
Status ValidateSamplingParams(const SamplingParams& params, int32_t vocab_size);

}  // namespace pagoda
