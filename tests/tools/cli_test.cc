// End-to-end tests of the `pagoda` binary: generate against the llama2.c reference, make-model
// output that loads and runs, inspect and tokenize.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/cpu/simd_level.h"
#include "model/model.h"
#include "model/tokenizer/sentencepiece_model.h"
#include "tests/run_pagoda.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

using testing::Quote;
using testing::RunPagoda;
using testing::RunPagodaRedirected;
using testing::RunPagodaWithStderr;
using testing::SharedPath;
using testing::TempDir;

// Runs every aidreams260K reference prompt through `pagoda generate` with `extra` flags and
// checks prompt ids, greedy tokens (up to the context limit) and text.
void ExpectAidreamsReference(const std::string& extra) {
  const std::string model = SharedPath("models/aidreams260K/aidreams260K-f32.gguf");
  const auto ref = testing::LoadJson(SharedPath("models/aidreams260K/reference.json"));
  ASSERT_TRUE(ref.contains("cases"));
  ASSERT_GE(ref["cases"].size(), 1u) << "no reference cases: nothing would be checked";
  const int ctx = ref["config"]["seq_len"];
  for (const auto& c : ref["cases"]) {
    const auto prompt_ids = c["prompt_tokens"].get<std::vector<int32_t>>();
    auto expected = c["greedy_tokens"].get<std::vector<int32_t>>();
    // The reference samples one token past the context; Pagoda stops at prompt + gen == ctx.
    expected.resize(std::min<size_t>(expected.size(), ctx - prompt_ids.size()));
    const auto r = RunPagoda("generate --json --temperature 0 --model " + Quote(model) +
                             " --prompt " + Quote(c["prompt"]) + " --max-tokens " +
                             std::to_string(c["greedy_tokens"].size()) + " " + extra);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["prompt_token_ids"].get<std::vector<int32_t>>(), prompt_ids) << c["prompt"];
    EXPECT_EQ(j["token_ids"].get<std::vector<int32_t>>(), expected) << c["prompt"] << extra;
    EXPECT_EQ(j["finish_reason"], "length");
    EXPECT_TRUE(j.contains("prompt_ms") && j.contains("decode_ms") &&
                j.contains("decode_tokens_per_s"));
    // The reference text is prompt + continuation; ours is the continuation.
    const std::string prompt = c["prompt"], text = j["text"], ref_text = c["text"];
    EXPECT_EQ(ref_text.substr(0, prompt.size() + text.size()), prompt + text);
  }
}

TEST(Cli, GenerateMatchesAidreamsReference) { ExpectAidreamsReference(""); }

// Paged KV cache + chunked prefill: every block size / chunk combination gives the same tokens.
TEST(Cli, GenerateMatchesAidreamsReferenceForBlockSizesAndPrefillChunks) {
  for (int bs : {1, 4, 16}) {
    for (int chunk : {1, 7, 64}) {
      ExpectAidreamsReference("--block-size " + std::to_string(bs) + " --prefill-chunk " +
                              std::to_string(chunk));
    }
  }
}

// The CPU backend's arena size (--threads) changes no token: 1 worker, 3 (more than this
// machine's cores) and the default all give the reference.
TEST(Cli, GenerateMatchesAidreamsReferenceForThreadCounts) {
  for (int threads : {1, 3}) ExpectAidreamsReference("--threads " + std::to_string(threads));
}

// All aidreams reference prompts submitted at once through the engine (--prompts-file) give
// the sequential greedy tokens, whatever the block size, pool size (preemption) and prefix cache.
void ExpectBatchedAidreams(const std::string& flags, bool expect_preemption) {
  const auto ref = testing::LoadJson(SharedPath("models/aidreams260K/reference.json"));
  ASSERT_TRUE(ref.contains("cases"));
  TempDir dir;
  const std::string file = dir.File("prompts.jsonl");
  {
    std::ofstream out(file);
    for (const auto& c : ref["cases"]) {
      out << nlohmann::json{{"prompt_token_ids", c["prompt_tokens"]},
                            {"max_tokens", c["greedy_tokens"].size()},
                            {"temperature", 0}}
                 .dump()
          << "\n";
    }
  }
  std::string err;
  const auto r = RunPagodaWithStderr(
      "generate --model " + Quote(SharedPath("models/aidreams260K/aidreams260K-f32.gguf")) +
          " --prompts-file " + file + " " + flags,
      &err);
  ASSERT_EQ(r.exit_code, 0) << err;
  std::istringstream lines(r.out);
  std::string line;
  const int ctx = ref["config"]["seq_len"];
  size_t i = 0;
  for (; std::getline(lines, line); ++i) {
    ASSERT_LT(i, ref["cases"].size());
    const auto& c = ref["cases"][i];
    auto expected = c["greedy_tokens"].get<std::vector<int32_t>>();
    expected.resize(ctx - c["prompt_tokens"].size());
    EXPECT_EQ(nlohmann::json::parse(line)["token_ids"].get<std::vector<int32_t>>(), expected)
        << flags << " case " << i;
  }
  EXPECT_EQ(i, ref["cases"].size());
  const auto stats = nlohmann::json::parse(err.substr(err.find("engine_stats ") + 13));
  if (expect_preemption) {
    EXPECT_GT(stats["preemptions"].get<int>(), 0) << flags;
  }
  if (flags.find("--speculative") != std::string::npos) {
    EXPECT_GT(stats["spec_decode_num_accepted_tokens"].get<int>(), 0) << flags;
  }
}

TEST(Cli, PromptsFileMatchesSequentialGreedy) {
  ExpectBatchedAidreams("--block-size 16", false);
  ExpectBatchedAidreams("--block-size 1", false);
  ExpectBatchedAidreams("--block-size 16 --enable-prefix-caching false", false);
  ExpectBatchedAidreams(
      "--block-size 16 --max-num-seqs 8 --max-num-batched-tokens 32 --prefill-chunk 5", false);
}

TEST(Cli, PromptsFileMatchesSequentialGreedyUnderPreemption) {
  ExpectBatchedAidreams("--block-size 16 --num-blocks 12", true);
  ExpectBatchedAidreams("--block-size 1 --num-blocks 200", true);
  ExpectBatchedAidreams("--block-size 16 --num-blocks 12 --enable-prefix-caching false", true);
}

// n-gram speculation (multi-token verification steps, rejected slots given back) changes no
// token: alone, with block size 1 and k 1, batched, and under preemption.
TEST(Cli, NgramSpeculationMatchesAidreamsReference) {
  ExpectAidreamsReference("--speculative ngram --num-speculative-tokens 4");
  ExpectAidreamsReference(
      "--speculative ngram --num-speculative-tokens 1 --ngram-min 1 "
      "--block-size 1");
  ExpectBatchedAidreams("--block-size 16 --speculative ngram --ngram-min 1", false);
  ExpectBatchedAidreams("--block-size 4 --num-blocks 40 --speculative ngram --ngram-min 1", true);
}

// A draft model (aidreams itself, and a Q8_0 copy of it) changes no token: alone, batched, and
// under preemption of the target's pool; nearly every proposal of such a draft is accepted. A
// draft with another vocabulary is refused at start-up, naming the key.
TEST(Cli, DraftModelSpeculationMatchesAidreamsReference) {
  const std::string model = SharedPath("models/aidreams260K/aidreams260K-f32.gguf");
  TempDir dir;
  const std::string q8 = dir.File("draft-q8_0.gguf");
  ASSERT_EQ(RunPagoda("quantize -q --type q8_0 " + Quote(model) + " " + Quote(q8)).exit_code, 0);
  for (const std::string& draft : {model, q8}) {
    const std::string flags = "--speculative draft --draft-model " + Quote(draft);
    ExpectAidreamsReference(flags + " --num-speculative-tokens 4");
    ExpectAidreamsReference(flags + " --num-speculative-tokens 16");  // 17-token verifications
    ExpectBatchedAidreams("--block-size 16 " + flags, false);
    ExpectBatchedAidreams("--block-size 4 --num-blocks 40 " + flags, true);
  }
  std::string err;
  const auto r = RunPagodaWithStderr(
      "generate --json --temperature 0 --max-tokens 64 --prompt 'Once upon a time' --model " +
          Quote(model) + " --speculative draft --draft-model " + Quote(q8),
      &err);
  ASSERT_EQ(r.exit_code, 0) << err;
  const auto stats = nlohmann::json::parse(err.substr(err.find("engine_stats ") + 13));
  EXPECT_GE(stats["spec_decode_num_accepted_tokens"].get<int>(),
            stats["spec_decode_num_draft_tokens"].get<int>() * 8 / 10);
  EXPECT_LT(stats["steps"].get<int>(), 64 / 2);
  // make-model's built-in byte-level vocabulary is not aidreams' SentencePiece one.
  const std::string other = dir.File("other-vocab.gguf");
  ASSERT_EQ(RunPagoda("make-model -q --preset tiny -o " + Quote(other)).exit_code, 0);
  for (const std::string& bad_flags : {" --draft-model " + Quote(other), std::string()}) {
    const auto bad = RunPagodaWithStderr("generate --max-tokens 4 --prompt hi --model " +
                                             Quote(model) + " --speculative draft" + bad_flags,
                                         &err);
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(err.find("speculative.draft_model: "), std::string::npos) << err;
  }
}

// `pagoda generate --prompts-file` of the synth-gqa reference prompts (64 greedy tokens each, all
// submitted at once) with `flags`: each prompt's token ids.
std::vector<std::vector<int32_t>> SynthGreedy(const std::string& model, const std::string& flags) {
  const auto ref = testing::LoadJson(SharedPath("models/synth-gqa/llama-gqa-f32.reference.json"));
  TempDir dir;
  const std::string file = dir.File("prompts.jsonl");
  {
    std::ofstream out(file);
    for (const auto& c : ref["cases"]) {
      out << nlohmann::json{{"prompt_token_ids", c["prompt_tokens"]},
                            {"max_tokens", 64},
                            {"temperature", 0},
                            {"ignore_eos", true}}
                 .dump()
          << "\n";
    }
  }
  const auto r = RunPagoda("generate --model " + Quote(SharedPath("models/synth-gqa/" + model)) +
                           " --prompts-file " + file + " " + flags);
  EXPECT_EQ(r.exit_code, 0) << model << " " << flags;
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    out.push_back(nlohmann::json::parse(line)["token_ids"].get<std::vector<int32_t>>());
  }
  EXPECT_EQ(out.size(), ref["cases"].size());
  return out;
}

// Greedy speculation on the synth-gqa models (random weights: near-ties everywhere) changes no
// token, with n-gram proposals and with a draft model (the same weights in Q4_0): a verification
// step gives each token the logits its single-token decode would (fixed attention splits,
// matmul row kernels that sum a token alike for up to 8 tokens). Alone (steps of up to 6 tokens)
// for every type (the quantized ones at avx512vnni+, where their row kernels are); the 4 prompts
// at once (prefilled together, then decode steps of up to 24 tokens, some sharing a step with a
// prefill chunk) with backend.batch_invariant on, for every type. (Without it, Q8_0 and the
// K-quants switch kernels from 9 tokens and a decode that shares a step with a prefill chunk
// runs the prefill attention: either may break a near-tie differently.)
TEST(Cli, SpeculationKeepsGreedyTokensOnSynthModels) {
  const std::string draft = Quote(SharedPath("models/synth-gqa/llama-gqa-q4_0.gguf"));
  for (const std::string model :
       {"llama-gqa-f32.gguf", "llama-gqa-f16.gguf", "llama-gqa-q8_0.gguf", "llama-gqa-q4_k_m.gguf",
        "llama-gqa-q4_0.gguf", "llama-gqa-q5_k_m.gguf", "llama-gqa-iq4_xs.gguf"}) {
    const bool float_weights = model == "llama-gqa-f32.gguf" || model == "llama-gqa-f16.gguf";
    for (const std::string batch : {"--max-num-seqs 1", "--batch-invariant on"}) {
      // Alone, the quantized types rely on their row kernels: AVX512-VNNI's (matmul.h).
      const bool alone = batch == "--max-num-seqs 1";
      if (alone && !float_weights && cpu::DetectSimdLevel() < cpu::SimdLevel::kAvx512Vnni) {
        continue;
      }
      const auto plain = SynthGreedy(model, batch);
      for (const std::string& spec : {std::string("--speculative ngram --ngram-min 1"),
                                      "--speculative draft --draft-model " + draft}) {
        const std::string flags = batch + " " + spec + " --num-speculative-tokens 5";
        EXPECT_EQ(SynthGreedy(model, flags), plain) << model << " " << flags;
      }
    }
  }
}

// backend.batch_invariant on (issue 18): seeded samples (temperature 1) of the synth-gqa prompts,
// the first one twice, give every request the same tokens whether they run one at a time (the
// repeat then reuses the first one's cached blocks of 4), all at once, or in steps of 16 tokens
// (prompts chunked, decodes sharing steps with prefill chunks), for every weight type.
TEST(Cli, BatchInvariantSeededSamplesDoNotDependOnTheSchedule) {
  const auto ref = testing::LoadJson(SharedPath("models/synth-gqa/llama-gqa-f32.reference.json"));
  TempDir dir;
  const std::string file = dir.File("prompts.jsonl");
  {
    std::ofstream out(file);
    int seed = 7;
    std::vector<nlohmann::json> prompts;
    for (const auto& c : ref["cases"]) prompts.push_back(c["prompt_tokens"]);
    prompts.push_back(prompts.front());
    for (const auto& p : prompts) {
      out << nlohmann::json{{"prompt_token_ids", p},
                            {"max_tokens", 40},
                            {"temperature", 1.0},
                            {"seed", seed++},
                            {"ignore_eos", true}}
                 .dump()
          << "\n";
    }
  }
  for (const std::string model :
       {"llama-gqa-f32.gguf", "llama-gqa-f16.gguf", "llama-gqa-q8_0.gguf", "llama-gqa-q4_0.gguf",
        "llama-gqa-q4_1.gguf", "llama-gqa-q5_0.gguf", "llama-gqa-q5_1.gguf",
        "llama-gqa-iq4_nl.gguf", "llama-gqa-q2_k.gguf", "llama-gqa-q3_k_m.gguf",
        "llama-gqa-q4_k_m.gguf", "llama-gqa-q5_k_m.gguf", "llama-gqa-q6_k.gguf",
        "llama-gqa-iq4_xs.gguf", "qwen2-bias-f32.gguf"}) {
    std::vector<std::vector<std::vector<int32_t>>> runs;
    for (const char* flags :
         {"--max-num-seqs 1", "", "--max-num-batched-tokens 16 --max-num-seqs 8"}) {
      std::string err;
      const auto r = RunPagodaWithStderr("generate --batch-invariant on --block-size 4 --model " +
                                             Quote(SharedPath("models/synth-gqa/" + model)) +
                                             " --prompts-file " + file + " " + flags,
                                         &err);
      ASSERT_EQ(r.exit_code, 0) << model << " " << flags << ": " << err;
      std::vector<std::vector<int32_t>> out;
      std::istringstream lines(r.out);
      std::string line;
      while (std::getline(lines, line)) {
        out.push_back(nlohmann::json::parse(line)["token_ids"].get<std::vector<int32_t>>());
      }
      ASSERT_EQ(out.size(), ref["cases"].size() + 1) << model << " " << flags;
      runs.push_back(std::move(out));
    }
    EXPECT_EQ(runs[1], runs[0]) << model << ": all at once vs one at a time";
    EXPECT_EQ(runs[2], runs[0]) << model << ": steps of 16 tokens vs one at a time";
  }
}

// The first tokens of `runs` seeded samples (temperature 1, seeds first_seed, first_seed + 1, ...)
// of one prompt: histograms of the sampled tokens at positions 0..positions-1.
std::vector<std::map<int32_t, int>> SampleHistograms(const std::string& flags, int first_seed,
                                                     int runs, int positions) {
  TempDir dir;
  const std::string file = dir.File("prompts.jsonl");
  {
    std::ofstream out(file);
    for (int i = 0; i < runs; ++i) {
      out << nlohmann::json{{"prompt", "Once upon a time, there was a"},
                            {"max_tokens", positions},
                            {"temperature", 1.0},
                            {"seed", first_seed + i}}
                 .dump()
          << "\n";
    }
  }
  std::string err;
  const auto r =
      RunPagodaWithStderr("generate --ignore-eos --model " +
                              Quote(SharedPath("models/aidreams260K/aidreams260K-f32.gguf")) +
                              " --prompts-file " + file + " " + flags,
                          &err);
  EXPECT_EQ(r.exit_code, 0) << err;
  std::vector<std::map<int32_t, int>> hist(positions);
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    const auto ids = nlohmann::json::parse(line)["token_ids"].get<std::vector<int32_t>>();
    for (int p = 0; p < positions && p < static_cast<int>(ids.size()); ++p) ++hist[p][ids[p]];
  }
  return hist;
}

// Pearson's chi-square test of homogeneity of two histograms (categories with an expected
// count under 5 pooled): true when the statistic stays under the 0.1% critical value (the
// Wilson-Hilferty approximation of the chi-square quantile).
bool SameDistribution(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b,
                      double* statistic, int* dof) {
  std::map<int32_t, std::pair<double, double>> cells;
  double na = 0, nb = 0;
  for (const auto& [t, c] : a) cells[t].first += c, na += c;
  for (const auto& [t, c] : b) cells[t].second += c, nb += c;
  std::vector<std::pair<double, double>> pooled;
  std::pair<double, double> rest{0, 0};
  for (const auto& [t, c] : cells) {
    if ((c.first + c.second) * std::min(na, nb) / (na + nb) < 5) {
      rest.first += c.first, rest.second += c.second;
    } else {
      pooled.push_back(c);
    }
  }
  if (rest.first + rest.second > 0) pooled.push_back(rest);
  double chi2 = 0;
  for (const auto& [oa, ob] : pooled) {
    const double total = oa + ob;
    const double ea = total * na / (na + nb), eb = total * nb / (na + nb);
    chi2 += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
  }
  const int k = std::max<int>(1, static_cast<int>(pooled.size()) - 1);
  const double z = 3.090;  // the standard normal's 99.9% quantile
  const double h = 2.0 / (9.0 * k);
  const double critical = k * std::pow(1.0 - h + z * std::sqrt(h), 3.0);
  *statistic = chi2;
  *dof = k;
  return chi2 < critical;
}

// Speculative sampling keeps the model's distribution: 600 seeded samples of the first 4 tokens
// with a draft model and with n-gram proposals, against 600 other seeds without speculation,
// agree by a chi-square test at every position (deterministic seeds: the test is stable). And a
// seed draws the same tokens with and without speculation.
TEST(Cli, SpeculativeSamplingKeepsTheDistribution) {
  const std::string model = SharedPath("models/aidreams260K/aidreams260K-f32.gguf");
  constexpr int kRuns = 600, kPositions = 4;
  const auto plain = SampleHistograms("", 1, kRuns, kPositions);
  for (const std::string& flags :
       {"--speculative draft --draft-model " + Quote(model), std::string("--speculative ngram")}) {
    const auto spec = SampleHistograms(flags, 1 + kRuns, kRuns, kPositions);
    for (int p = 0; p < kPositions; ++p) {
      double chi2 = 0;
      int dof = 0;
      EXPECT_TRUE(SameDistribution(plain[p], spec[p], &chi2, &dof))
          << flags << " position " << p << ": chi2 " << chi2 << " dof " << dof;
      EXPECT_GE(dof, p == 0 ? 1 : 3) << "too few categories to test anything, position " << p;
    }
    EXPECT_EQ(SampleHistograms(flags, 1, 50, kPositions), SampleHistograms("", 1, 50, kPositions));
  }
}

// Every CPU kernel level forced with --kernels is the one generate runs at (capped at this
// CPU's best; engine_stats on stderr reports it) and reproduces the reference tokens.
// aidreams260K is F32, so the tokens alone would not show that the flag took effect.
TEST(Cli, GenerateMatchesAidreamsReferenceAtEveryKernelLevel) {
  const std::string model = Quote(SharedPath("models/aidreams260K/aidreams260K-f32.gguf"));
  for (const char* level : {"portable", "avx2", "avx512", "avx512vnni", "avx512bf16", "amx"}) {
    std::string err;
    const auto r = RunPagodaWithStderr(
        std::string("generate --max-tokens 2 --prompt hi --kernels ") + level + " --model " + model,
        &err);
    ASSERT_EQ(r.exit_code, 0) << level << ": " << err;
    const size_t at = err.find("engine_stats ");
    ASSERT_NE(at, std::string::npos) << err;
    const auto stats = nlohmann::json::parse(err.substr(at + 13, err.find('\n', at) - at - 13));
    const auto want = std::min(*cpu::ParseSimdLevel(level), cpu::DetectSimdLevel());
    EXPECT_EQ(stats["kernels"].get<std::string>(), cpu::SimdLevelName(want)) << level;
    ExpectAidreamsReference(std::string("--kernels ") + level);
  }
  EXPECT_EQ(
      RunPagoda("generate --kernels sse9 --model " +
                Quote(SharedPath("models/aidreams260K/aidreams260K-f32.gguf")) + " --prompt hi")
          .exit_code,
      2);
}

TEST(Cli, GenerateRunsWithReducedPrecisionKvCaches) {
  const std::string model = SharedPath("models/aidreams260K/aidreams260K-f32.gguf");
  for (const char* dtype : {"bf16", "f16", "fp8_e4m3"}) {
    const auto r =
        RunPagoda("generate --json --temperature 0 --max-tokens 16 --kv-dtype " +
                  std::string(dtype) + " --model " + Quote(model) + " --prompt 'I dream of'");
    ASSERT_EQ(r.exit_code, 0) << dtype;
    EXPECT_EQ(nlohmann::json::parse(r.out)["token_ids"].size(), 16u) << dtype;
  }
  EXPECT_NE(
      RunPagoda("generate --kv-dtype int3 --model " + Quote(model) + " --prompt hi").exit_code, 0);
}

TEST(Cli, GenerateStopsAtMaxTokensAndRejectsBadModel) {
  const std::string model = SharedPath("models/aidreams260K/aidreams260K-f32.gguf");
  auto r = RunPagoda("generate --json --temperature 0.9 --top-k 40 --top-p 0.9 --seed 7 --model " +
                     Quote(model) + " --prompt hi --max-tokens 5");
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_LE(j["token_ids"].size(), 5u);
  auto again =
      RunPagoda("generate --json --temperature 0.9 --top-k 40 --top-p 0.9 --seed 7 --model " +
                Quote(model) + " --prompt hi --max-tokens 5");
  EXPECT_EQ(nlohmann::json::parse(again.out)["token_ids"], j["token_ids"]) << "seeded => same";
  EXPECT_NE(RunPagoda("generate --model /nonexistent.gguf --prompt hi").exit_code, 0);
}

class MakeModelDtypes : public ::testing::TestWithParam<const char*> {};

TEST_P(MakeModelDtypes, WritesALoadableModelThatGenerates) {
  TempDir dir;
  const std::string out = dir.File("m.gguf");
  ASSERT_EQ(RunPagoda(std::string("make-model -q --preset tiny --layers 2 --dtype ") + GetParam() +
                      " -o " + out)
                .exit_code,
            0);
  auto model = LoadModel(out);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->config.n_layers, 2);
  EXPECT_EQ((*model)->config.n_kv_heads, 2);
  const auto info = RunPagoda("inspect --json " + out);
  ASSERT_EQ(info.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(info.out)["config"]["architecture"], "llama");
  const auto r = RunPagoda("generate --json --temperature 0 --max-tokens 8 --model " + out +
                           " --prompt 'Hello there'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["token_ids"].size(), 8u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MakeModelDtypes, ::testing::Values("f32", "f16", "bf16", "q8_0"));

TEST(Cli, MakeModelIsDeterministic) {
  TempDir dir;
  ASSERT_EQ(RunPagoda("make-model -q --layers 1 --seed 5 -o " + dir.File("a.gguf")).exit_code, 0);
  ASSERT_EQ(RunPagoda("make-model -q --layers 1 --seed 5 -o " + dir.File("b.gguf")).exit_code, 0);
  ASSERT_EQ(RunPagoda("make-model -q --layers 1 --seed 6 -o " + dir.File("c.gguf")).exit_code, 0);
  auto read = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read(dir.File("a.gguf")), read(dir.File("b.gguf")));
  EXPECT_NE(read(dir.File("a.gguf")), read(dir.File("c.gguf")));
}

// The SentencePiece vocabulary carried through GGUF (make-model --vocab-from tokenizer.model)
// tokenizes exactly like the SentencePiece library on the Llama 2 reference.
TEST(Cli, GgufTokenizerFromSentencePieceMatchesReference) {
  TempDir dir;
  const std::string out = dir.File("spm.gguf");
  ASSERT_EQ(RunPagoda("make-model -q --layers 1 --vocab-from " +
                      Quote(SharedPath("tokenizers/llama2-spm/tokenizer.model")) + " -o " + out)
                .exit_code,
            0);
  auto model = LoadModel(out);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->config.vocab_size, 32000);
  const Tokenizer& tok = *(*model)->tokenizer;
  const auto ref = testing::LoadJson(SharedPath("tokenizers/llama2-spm/reference.json"));
  ASSERT_TRUE(ref.contains("cases"));
  int n = 0;
  for (const auto& c : ref["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(tok.Encode(text, false), c["ids_no_bos"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tok.Decode(c["ids_no_bos"].get<std::vector<int32_t>>()), c["decoded"]) << text;
    ++n;
  }
  EXPECT_GT(n, 10);
  const auto r = RunPagoda("tokenize --json --model " + out + " --text 'Hello world'");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)["token_ids"], (std::vector<int>{1, 15043, 3186}));
}

// Every command opens models the same way (model/model.h): tokenize takes a GGUF, an HF
// directory, a bare tokenizer.json or tokenizer.model; a directory where a file is expected
// says so.
TEST(Cli, OneWayToOpenAModel) {
  TempDir dir;
  const std::string spm = SharedPath("tokenizers/llama2-spm/tokenizer.model");
  ASSERT_EQ(
      RunPagoda("make-model -q --layers 1 --vocab-from " + Quote(spm) + " -o " + dir.File("m.gguf"))
          .exit_code,
      0);
  ASSERT_EQ(RunPagoda("make-model -q --layers 1 --vocab-from " + Quote(spm) +
                      " --format safetensors -o " + dir.File("hf"))
                .exit_code,
            0);
  const std::vector<int> hello = {1, 15043, 3186};  // <s> Hello world
  for (const std::string& m : {dir.File("m.gguf"), dir.File("hf"), spm}) {
    const auto r = RunPagoda("tokenize --json --model " + Quote(m) + " --text 'Hello world'");
    ASSERT_EQ(r.exit_code, 0) << m;
    EXPECT_EQ(nlohmann::json::parse(r.out)["token_ids"], hello) << m;
  }
  // A bare tokenizer.json (GPT-2's), with and without parse_special.
  const std::string json = Quote(SharedPath("tokenizers/gpt2-bpe/tokenizer.json"));
  auto r = RunPagoda("tokenize --json --model " + json + " --text 'a<|endoftext|>'");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)["token_ids"], (std::vector<int>{64, 50256}));
  r = RunPagoda("tokenize --json --no-parse-special --model " + json + " --text '<|endoftext|>'");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_GT(nlohmann::json::parse(r.out)["token_ids"].size(), 1u);
  // Directories and tokenizer files where a model is expected say what they are.
  std::filesystem::create_directories(dir.File("empty"));
  for (const std::string cmd :
       {"inspect ", "generate --max-tokens 1 --prompt a --model ", "bench model --model "}) {
    r = RunPagodaRedirected(cmd + Quote(dir.File("empty")), "2>&1");
    // inspect reports what it can and exits 0 with an "error" section (see cmd_inspect.cc).
    EXPECT_EQ(r.exit_code == 0, cmd == std::string("inspect ")) << cmd;
    EXPECT_NE(r.out.find("a directory without config.json"), std::string::npos) << cmd << r.out;
  }
  r = RunPagodaRedirected("generate --max-tokens 1 --prompt a --model " + Quote(spm), "2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("a tokenizer file, not a model"), std::string::npos) << r.out;
  r = RunPagodaRedirected("tokenize --text a --model " + Quote(dir.File("empty")), "2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("neither tokenizer.json nor tokenizer.model"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("9223372036854775807"), std::string::npos) << r.out;
}

// ---- pagoda inspect --json ----

nlohmann::json InspectJson(const std::string& path) {
  const auto r = RunPagoda("inspect --json " + Quote(path));
  EXPECT_EQ(r.exit_code, 0) << path;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out.substr(0, 200);
  EXPECT_FALSE(j.contains("error")) << j.value("error", "");
  return j;
}

const nlohmann::json* FindTensor(const nlohmann::json& j, const std::string& name) {
  for (const auto& t : j["tensors"]) {
    if (t["name"] == name) return &t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

void ExpectToken(const nlohmann::json& j, const char* which, int id, const std::string& text) {
  EXPECT_EQ(j["special_tokens"][which]["id"], id) << which;
  EXPECT_EQ(j["special_tokens"][which]["text"], text) << which;
}

TEST(CliInspect, AidreamsGguf) {
  const auto j = InspectJson(SharedPath("models/aidreams260K/aidreams260K-f32.gguf"));
  EXPECT_EQ(j["format"], "gguf");
  const auto& c = j["config"];
  EXPECT_EQ(c["architecture"], "llama");
  EXPECT_EQ(c["n_embd"], 64);
  EXPECT_EQ(c["n_layers"], 4);
  EXPECT_EQ(c["n_heads"], 4);
  EXPECT_EQ(c["n_kv_heads"], 4);
  EXPECT_EQ(c["head_dim"], 16);
  EXPECT_EQ(c["n_ff"], 172);
  EXPECT_EQ(c["vocab_size"], 512);
  EXPECT_EQ(c["context_length"], 128);
  EXPECT_EQ(c["qkv_bias"], false);
  EXPECT_EQ(c["qk_norm"], false);
  EXPECT_EQ(c["sliding_window"], 0);
  EXPECT_EQ(j["rope"]["base"], 10000.0);
  EXPECT_EQ(j["rope"]["dim"], 16);
  EXPECT_EQ(j["rope"]["layout"], "interleaved");
  EXPECT_EQ(j["rope"]["scaling"]["type"], "none");
  EXPECT_EQ(j["tokenizer"]["type"], "spm");
  EXPECT_EQ(j["tokenizer"]["pre_tokenizer"], "");
  EXPECT_EQ(j["tokenizer"]["vocab_size"], 512);
  ExpectToken(j, "bos", 1, "<s>");
  ExpectToken(j, "eos", 2, "</s>");
  ExpectToken(j, "unk", 0, "<unk>");
  ExpectToken(j, "pad", -1, "");  // 4294967295 in the file means none
  ExpectToken(j, "eot", -1, "");
  EXPECT_EQ(j["chat_template"]["present"], false);
  EXPECT_EQ(j["generation"]["stop_token_ids"], std::vector<int>{2});
  EXPECT_EQ(j["generation"]["temperature"], 1.0);
  EXPECT_EQ(j["generation"]["from_model"].size(), 0u);
  EXPECT_EQ(j["tensors"].size(), 39u);
  if (const auto* t = FindTensor(j, "token_embd.weight")) {
    EXPECT_EQ((*t)["type"], "F32");
    EXPECT_EQ((*t)["shape"], (std::vector<int>{512, 64}));
    EXPECT_EQ((*t)["ne"], (std::vector<int>{64, 512}));
  }
  EXPECT_EQ(j["metadata"]["general.architecture"], "\"llama\"");
}

TEST(CliInspect, Qwen2BiasGguf) {
  const auto j = InspectJson(SharedPath("models/synth-gqa/qwen2-bias-f32.gguf"));
  const auto& c = j["config"];
  EXPECT_EQ(c["architecture"], "qwen2");
  EXPECT_EQ(c["n_embd"], 256);
  EXPECT_EQ(c["n_layers"], 4);
  EXPECT_EQ(c["n_heads"], 8);
  EXPECT_EQ(c["n_kv_heads"], 2);
  EXPECT_EQ(c["head_dim"], 32);
  EXPECT_EQ(c["n_ff"], 768);
  EXPECT_EQ(c["vocab_size"], 512);
  EXPECT_EQ(c["context_length"], 256);
  EXPECT_EQ(c["qkv_bias"], true);
  EXPECT_EQ(c["qk_norm"], false);
  EXPECT_EQ(j["rope"]["layout"], "halves");
  EXPECT_EQ(j["rope"]["dim"], 32);
  EXPECT_EQ(j["rope"]["scaling"]["type"], "none");
  EXPECT_EQ(j["tokenizer"]["type"], "spm");
  ExpectToken(j, "bos", 1, "<s>");
  ExpectToken(j, "eos", 2, "</s>");
  if (const auto* t = FindTensor(j, "blk.0.attn_q.bias")) {
    EXPECT_EQ((*t)["type"], "F32");
    EXPECT_EQ((*t)["shape"], (std::vector<int>{256}));
  }
  if (const auto* t = FindTensor(j, "blk.3.attn_k.weight")) {
    EXPECT_EQ((*t)["shape"], (std::vector<int>{64, 256}));
  }
}

// A make-model Qwen3 (QK-norm, head_dim 48 != 256 / 8, llama3 RoPE scaling) as an HF directory
// and as a GGUF: the same summary, the scaling from config.json vs rope_freqs.weight.
TEST(CliInspect, MakeModelSafetensorsDirectoryAndGguf) {
  TempDir dir;
  const std::string flags =
      "make-model -q --arch qwen3 --head-dim 48 --layers 2 --context 64 "
      "--rope-scaling llama3:8,1,4,32 ";
  ASSERT_EQ(RunPagoda(flags + "--format safetensors -o " + dir.File("hf")).exit_code, 0);
  ASSERT_EQ(RunPagoda(flags + "-o " + dir.File("m.gguf")).exit_code, 0);
  const auto hf = InspectJson(dir.File("hf"));
  const auto gg = InspectJson(dir.File("m.gguf"));
  EXPECT_EQ(hf["format"], "hf");
  EXPECT_EQ(hf["hf_config"]["architectures"][0], "Qwen3ForCausalLM");
  for (const auto* j : {&hf, &gg}) {
    const auto& c = (*j)["config"];
    EXPECT_EQ(c["architecture"], "qwen3");
    EXPECT_EQ(c["n_embd"], 256);
    EXPECT_EQ(c["n_layers"], 2);
    EXPECT_EQ(c["n_heads"], 8);
    EXPECT_EQ(c["n_kv_heads"], 2);
    EXPECT_EQ(c["head_dim"], 48);
    EXPECT_EQ(c["n_ff"], 768);
    EXPECT_EQ(c["context_length"], 64);
    EXPECT_EQ(c["qk_norm"], true);
    EXPECT_EQ(c["qkv_bias"], false);
    EXPECT_EQ((*j)["rope"]["layout"], "halves");
    EXPECT_EQ((*j)["rope"]["dim"], 48);
    EXPECT_EQ((*j)["rope"]["scaling"]["type"], "llama3");
    EXPECT_EQ((*j)["rope"]["scaling"]["factor"], 8.0);
    EXPECT_EQ((*j)["tokenizer"]["type"], "spm");
    ExpectToken(*j, "bos", 1, "<s>");
    ExpectToken(*j, "eos", 2, "</s>");
    ExpectToken(*j, "unk", 0, "<unk>");
  }
  const auto& s = hf["rope"]["scaling"];
  EXPECT_EQ(s["source"], "config.json");
  EXPECT_EQ(s["low_freq_factor"], 1.0);
  EXPECT_EQ(s["high_freq_factor"], 4.0);
  EXPECT_EQ(s["original_context"], 32);
  EXPECT_EQ(gg["rope"]["scaling"]["source"], "rope_freqs.weight");
  EXPECT_EQ(gg["rope"]["scaling"]["freq_factors"].size(), 24u);
  EXPECT_EQ(hf["tensors"].size() + 1, gg["tensors"].size());  // + rope_freqs.weight
  if (const auto* t = FindTensor(hf, "model.layers.1.self_attn.q_norm.weight")) {
    EXPECT_EQ((*t)["type"], "F32");
    EXPECT_EQ((*t)["shape"], (std::vector<int>{48}));
  }
  if (const auto* t = FindTensor(hf, "model.layers.0.self_attn.q_proj.weight")) {
    EXPECT_EQ((*t)["shape"], (std::vector<int>{384, 256}));
  }
  // Named templates in tokenizer_config.json and generation_config.json's defaults.
  {
    std::ofstream(dir.File("hf/tokenizer_config.json"))
        << R"({"bos_token": "<s>", "eos_token": "</s>", "chat_template": [)"
           R"({"name": "default", "template": "{% for m in messages %}{{ m.content }}{% endfor %}"},)"
           R"({"name": "tool_use", "template": "{{ tools }}"}]})";
    std::ofstream(dir.File("hf/generation_config.json"))
        << R"({"eos_token_id": [2, 7], "temperature": 0.6, "top_p": 0.9})";
  }
  const auto with_defaults = InspectJson(dir.File("hf"));
  EXPECT_EQ(with_defaults["chat_template"]["present"], true);
  EXPECT_EQ(with_defaults["chat_template"]["parses"], true);
  EXPECT_EQ(with_defaults["chat_template"]["named"], std::vector<std::string>{"tool_use"});
  EXPECT_EQ(with_defaults["generation"]["stop_token_ids"], (std::vector<int>{2, 7}));
  EXPECT_NEAR(with_defaults["generation"]["temperature"].get<double>(), 0.6, 1e-6);
  EXPECT_NEAR(with_defaults["generation"]["top_p"].get<double>(), 0.9, 1e-6);
  EXPECT_EQ(with_defaults["generation"]["from_model"],
            (std::vector<std::string>{"temperature", "top_p"}));
  const auto text = RunPagoda("inspect " + dir.File("hf"));
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("qwen3"), std::string::npos);
  EXPECT_NE(text.out.find("llama3"), std::string::npos);
  EXPECT_NE(text.out.find("stop tokens    [2,7]"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("named: [\"tool_use\"]"), std::string::npos) << text.out;
}

TEST(CliInspect, ReportsWhyAModelDoesNotLoad) {
  TempDir dir;
  std::filesystem::create_directories(dir.File("bad"));
  std::ofstream(dir.File("bad/config.json")) << R"({"architectures": ["GPT2LMHeadModel"]})";
  const auto r = RunPagoda("inspect --json " + dir.File("bad"));
  EXPECT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["error"].get<std::string>().find("GPT2LMHeadModel"), std::string::npos);
  EXPECT_EQ(j["hf_config"]["architectures"][0], "GPT2LMHeadModel");
  EXPECT_NE(RunPagoda("inspect " + dir.File("missing.gguf")).exit_code, 0);
}

// A special token whose bytes are not UTF-8 (here BOS "<s>" patched to "\xff\xfe<" in a copy
// of aidreams) is printed with U+FFFD in text mode; nlohmann used to abort (type_error.316).
TEST(CliInspect, NonUtf8SpecialTokenInTextMode) {
  TempDir dir;
  std::ifstream in(SharedPath("models/aidreams260K/aidreams260K-f32.gguf"), std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  const std::string piece = std::string("\x03\0\0\0\0\0\0\0", 8) + "<s>";
  const size_t at = bytes.find(piece);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + 8, 3, "\xff\xfe<");
  std::ofstream(dir.File("bad.gguf"), std::ios::binary) << bytes;
  const auto r = RunPagoda("inspect " + dir.File("bad.gguf"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("bos            1 \"\xef\xbf\xbd\xef\xbf\xbd<\""), std::string::npos)
      << r.out;
  EXPECT_EQ(RunPagoda("inspect --json " + dir.File("bad.gguf")).exit_code, 0);
}

// JSON nested 200000 deep in an HF folder's config.json used to overflow the stack (SIGSEGV):
// it is reported as the loader's error, in text and JSON mode.
TEST(CliInspect, DeeplyNestedHfJsonIsAnErrorNotACrash) {
  TempDir dir;
  std::filesystem::create_directories(dir.File("deep"));
  std::ofstream(dir.File("deep/config.json"))
      << "{\"a\": " << std::string(200000, '[') << std::string(200000, ']') << "}";
  const auto text = RunPagoda("inspect " + dir.File("deep"));
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("config.json: JSON nested deeper than 256 levels"), std::string::npos)
      << text.out;
  const auto json = RunPagoda("inspect --json " + dir.File("deep"));
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_NE(nlohmann::json::parse(json.out)["error"].get<std::string>().find("nested deeper"),
            std::string::npos);
}

// A broken tokenizer.json beside a tokenizer.model is reported (it used to fall back to
// tokenizer.model silently); one of a kind the BPE reader does not take still falls back.
TEST(Cli, BrokenTokenizerJsonIsReportedNotReplaced) {
  TempDir dir;
  ASSERT_EQ(
      RunPagoda("make-model -q --layers 1 --format safetensors -o " + dir.File("hf")).exit_code, 0);
  ASSERT_TRUE(std::filesystem::exists(dir.File("hf/tokenizer.model")));
  std::ofstream(dir.File("hf/tokenizer.json")) << "{\"model\": {\"type\": \"BPE\", \"vocab\": [";
  auto broken = LoadModel(dir.File("hf"));
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("tokenizer.json"), std::string::npos)
      << broken.status().ToString();
  std::ofstream(dir.File("hf/tokenizer.json")) << R"({"model": {"type": "Unigram", "vocab": []}})";
  auto unigram = LoadModel(dir.File("hf"));
  EXPECT_TRUE(unigram.ok()) << unigram.status().ToString();
}

TEST(Cli, MakeModelRejectsBadArchAndRopeScaling) {
  TempDir dir;
  EXPECT_NE(RunPagoda("make-model -q --arch gpt2 -o " + dir.File("a.gguf")).exit_code, 0);
  EXPECT_EQ(RunPagoda("make-model -q --rope-scaling yarn:2 -o " + dir.File("a.gguf")).exit_code, 2);
  EXPECT_EQ(RunPagoda("make-model -q --rope-scaling linear:0 -o " + dir.File("a.gguf")).exit_code,
            2);
}

// A knob out of its range stops `serve` before anything is loaded or allocated, with one
// `--set '...':` prefix (it used to be printed twice) and the range.
TEST(CliServe, OutOfRangeSetIsAClearErrorNotAnAllocationFailure) {
  std::string err;
  const auto r = RunPagodaWithStderr("serve --set engine.max_num_batched_tokens=2147483647", &err);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(err,
            "error: --set 'engine.max_num_batched_tokens=2147483647': "
            "engine.max_num_batched_tokens: expected an integer in 1..1048576, got "
            "\"2147483647\"\n");
}

TEST(Cli, HelpWorksForEveryCommand) {
  for (const char* cmd : {"", "generate", "tokenize", "inspect", "make-model"}) {
    const auto r = RunPagoda(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd;
  }
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// Smoke runs of the benchmark modes (figures are not asserted: benchmarks, not timed tests).
TEST(Cli, BenchLimitsAndModelSmoke) {
  auto r = RunPagoda("bench limits --json");
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["read_bandwidth_gbps"].get<double>(), 0.0);
  EXPECT_GT(j["fp32_gflops"].get<double>(), 0.0);
  r = RunPagoda("bench model --json --prompt-len 8 --gen-len 4 --batch 2 --model " +
                Quote(SharedPath("models/aidreams260K/aidreams260K-f32.gguf")));
  ASSERT_EQ(r.exit_code, 0);
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["decode_steps"].get<int>(), 3);
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["bytes_per_decode_step"].get<int64_t>(), 0);
  EXPECT_GT(j["total_tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(j["f16_matmul"], "int16");          // the default
  EXPECT_EQ(j["compute_peak"], "fp32_gflops");  // an F32 model
  EXPECT_EQ(j["step_time_budget_percent"], 0);  // off here: the batch decodes in step
  EXPECT_FALSE(j.contains("interleaved_read_bandwidth_gbps"));
  r = RunPagoda(
      "bench model --json --prompt-len 8 --gen-len 2 -r 2 --f16-matmul bf16 "
      "--step-time-budget-percent 150 --interleave-bandwidth --model " +
      Quote(SharedPath("models/aidreams260K/aidreams260K-f32.gguf")));
  ASSERT_EQ(r.exit_code, 0);
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["f16_matmul"], "bf16");
  EXPECT_EQ(j["step_time_budget_percent"], 150);
  EXPECT_EQ(j["repetitions"], 2);
  EXPECT_EQ(j["decode_tokens_per_s_runs"].size(), 2u);
  EXPECT_EQ(j["decode_steps"].get<int>(), 2);  // 1 decode step per run (first token: prefill)
  // One read pass per decode step: a mean and a best reading, and decode set against the mean.
  const double mean = j["interleaved_read_bandwidth_gbps"].get<double>();
  EXPECT_GT(mean, 0.0);
  EXPECT_GE(j["interleaved_read_bandwidth_best_gbps"].get<double>(), mean);
  EXPECT_NEAR(j["decode_fraction_of_interleaved_bandwidth"].get<double>(),
              j["decode_gbps"].get<double>() / mean, 1e-9);
  EXPECT_NE(RunPagoda("bench model --json --f16-matmul fast --model x.gguf").exit_code, 0);
}

// Structured output through the engine: 8 seeded temperature-1 samples of a JSON schema on a
// random-weight model give the same tokens with preemption (a small KV pool) and n-gram
// speculation as one at a time, and every output that finished with "stop" is an object with
// the required keys of the right types. F32 weights: their logits do not depend on the batch
// (Q8_0's still do, unconstrained alike: issue 18).
TEST(Cli, JsonSchemaOutputsUnchangedByPreemptionAndSpeculation) {
  TempDir dir;
  const std::string schema = dir.File("schema.json");
  std::ofstream(schema) << R"({"type": "object", "properties": {
      "id": {"type": "integer", "minimum": 0, "maximum": 999},
      "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 6},
      "name": {"type": "string", "maxLength": 10}},
    "required": ["id", "tags", "name"], "additionalProperties": false})";
  const std::string prompts = dir.File("prompts.jsonl");
  {
    std::ofstream out(prompts);
    for (int i = 0; i < 8; ++i) {
      out << nlohmann::json{{"prompt", "Record " + std::to_string(i)},
                            {"seed", 100 + i},
                            {"temperature", 1.0},
                            {"max_tokens", 120}}
                 .dump()
          << "\n";
    }
  }
  auto run = [&](const std::string& flags, nlohmann::json* stats) {
    std::string err;
    const auto r = RunPagodaWithStderr(
        "generate --model " + Quote(SharedPath("models/synth-gqa/llama-gqa-f32.gguf")) +
            " --prompts-file " + prompts + " --json-schema " + schema + " " + flags,
        &err);
    EXPECT_EQ(r.exit_code, 0) << err;
    *stats = nlohmann::json::parse(err.substr(err.find("engine_stats ") + 13));
    std::vector<nlohmann::json> lines;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  };
  nlohmann::json plain_stats, stressed_stats;
  const auto plain = run("--block-size 16 --max-num-seqs 1", &plain_stats);
  const auto stressed =
      run("--block-size 4 --num-blocks 40 --speculative ngram --ngram-min 1", &stressed_stats);
  ASSERT_EQ(plain.size(), 8u);
  ASSERT_EQ(stressed.size(), 8u);
  EXPECT_GT(stressed_stats["preemptions"].get<int>(), 0);
  EXPECT_GT(plain_stats["structured_output_num_masks"].get<int>(), 0);
  int stops = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i]["token_ids"], stressed[i]["token_ids"]) << i;
    if (plain[i]["finish_reason"] != "stop") continue;
    ++stops;
    const auto v = nlohmann::json::parse(plain[i]["text"].get<std::string>());
    ASSERT_TRUE(v.is_object()) << v;
    EXPECT_EQ(v.size(), 3u) << v;
    EXPECT_TRUE(v["id"].is_number_integer() && v["id"] >= 0 && v["id"] <= 999) << v;
    EXPECT_TRUE(v["tags"].is_array() && v["tags"].size() <= 6) << v;
    EXPECT_TRUE(v["name"].is_string() && v["name"].get<std::string>().size() <= 40) << v;
  }
  EXPECT_GT(stops, 4);
}

TEST(Cli, ConstraintFlagErrorsNameTheFlag) {
  const std::string model = Quote(SharedPath("models/aidreams260K/aidreams260K-f32.gguf"));
  std::string err;
  EXPECT_NE(RunPagodaWithStderr("generate --prompt x --regex a --choice b --model " + model, &err)
                .exit_code,
            0);
  EXPECT_NE(err.find("give at most one"), std::string::npos) << err;
  EXPECT_NE(
      RunPagodaWithStderr("generate --prompt x --regex '(a' --model " + model, &err).exit_code, 0);
  EXPECT_NE(err.find("--regex: "), std::string::npos) << err;
  EXPECT_NE(RunPagodaWithStderr(
                "generate --prompt x --json-schema /nonexistent.json --model " + model, &err)
                .exit_code,
            0);
  EXPECT_NE(err.find("--json-schema /nonexistent.json: cannot open"), std::string::npos) << err;
  const auto r =
      RunPagoda("generate --json --prompt x --choice alpha --choice beta --model " + model);
  ASSERT_EQ(r.exit_code, 0);
  const std::string text = nlohmann::json::parse(r.out)["text"];
  EXPECT_TRUE(text == "alpha" || text == "beta") << text;
}

}  // namespace
}  // namespace pagoda
