// The fp32 Llama forward against independent references:
//  - aidreams260K: llama2.c run.c logits at every prompt position (+4), within 1e-4; also
//    through the CPU backend at every SIMD level cap, by its prefill (flash paged attention)
//    and its decode (attention block TKG) path;
//  - synth-gqa (GQA 8q/2kv; F32, F16, Q8_0): llama.cpp logits at every prompt position and,
//    teacher-forced on its greedy tokens, the top-5 logits of every generated step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd_level.h"
#include "model/model.h"
#include "tests/reference/llama_forward.h"
#include "tests/reference/synth_reference.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

using testing::LogitDiff;

std::unique_ptr<Model> Load(const std::string& rel) {
  return testing::LoadModelOrFail(testing::SharedPath(rel));
}

TEST(ForwardReference, Aidreams260KMatchesLlama2c) {
  auto model = Load("models/aidreams260K/aidreams260K-f32.gguf");
  ASSERT_TRUE(model);
  const auto ref = testing::LoadJson(testing::SharedPath("models/aidreams260K/reference.json"));
  ASSERT_TRUE(ref.contains("cases"));
  int checked = 0;
  for (const auto& c : ref["cases"]) {
    std::vector<int32_t> tokens = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto greedy = c["greedy_tokens"].get<std::vector<int32_t>>();
    const size_t n_logits = c["logits"].size();
    ASSERT_GE(tokens.size() + greedy.size(), n_logits);
    tokens.insert(tokens.end(), greedy.begin(), greedy.end());
    tokens.resize(n_logits);
    cpu::LlamaForward fwd(model->config, model->weights, model->config.context_length);
    auto logits = fwd.Forward(tokens, /*all_logits=*/true);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    LogitDiff d;
    for (size_t pos = 0; pos < n_logits; ++pos) {
      const auto& row = c["logits"][pos];
      for (int v = 0; v < model->config.vocab_size; ++v) {
        d.Add((*logits)[pos * model->config.vocab_size + v], row[v].get<double>());
      }
    }
    EXPECT_LE(d.max_abs, 1e-4) << "prompt '" << c["prompt"] << "'";
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

// One aidreams260K case: the tokens fed (prompt, then greedy) and llama2.c's logits after each.
struct AidreamsCase {
  std::vector<int32_t> tokens;
  nlohmann::json logits;  // [tokens.size()][vocab]
};

std::vector<AidreamsCase> AidreamsCases() {
  const auto ref = testing::LoadJson(testing::SharedPath("models/aidreams260K/reference.json"));
  std::vector<AidreamsCase> cases;
  for (const auto& c : ref["cases"]) {
    AidreamsCase a{c["prompt_tokens"].get<std::vector<int32_t>>(), c["logits"]};
    const auto greedy = c["greedy_tokens"].get<std::vector<int32_t>>();
    a.tokens.insert(a.tokens.end(), greedy.begin(), greedy.end());
    a.tokens.resize(a.logits.size());
    cases.push_back(std::move(a));
  }
  return cases;
}

// One sequence on a CpuBackend with an f32 KV cache (blocks of 16, a reversed block table).
class BackendSequence {
 public:
  BackendSequence(const Model& model, cpu::SimdLevel max_simd_level,
                  KvDtype kv_dtype = KvDtype::kF32)
      : model_(model) {
    KvCacheConfig kv;
    kv.block_size = kBlock;
    kv.num_blocks = model.config.context_length / kBlock + 1;
    kv.dtype = kv_dtype;
    const StepLimits limits{model.config.context_length, 1};
    cpu::CpuBackendOptions o;
    o.max_simd_level = max_simd_level;
    // Prefill chunks through flash paged attention (batch-invariant backends, the F32 models'
    // default, run them through the TKG block: batch_invariance_test).
    o.batch_invariance = cpu::BatchInvariance::kOff;
    auto backend = cpu::CpuBackend::Create(model.config, model.weights, kv, limits, o);
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    if (backend.ok()) backend_ = std::move(*backend);
    for (int32_t b = model.config.context_length / kBlock; b > 0; --b) table_.push_back(b);
  }

  const cpu::CpuBackend* backend() const { return backend_.get(); }

  // Feeds tokens at positions [pos, pos + tokens.size()) as one step (a decode step or a
  // prefill chunk); returns the logits after the last `num_logits` of them, row by row.
  std::vector<float> Step(std::span<const int32_t> tokens, int32_t pos, bool decode,
                          int32_t num_logits = 1) {
    std::vector<int32_t> slots;
    for (size_t i = 0; i < tokens.size(); ++i) {
      slots.push_back(SlotForPosition(table_, kBlock, pos + static_cast<int32_t>(i)));
    }
    const StepSequence seq{0, static_cast<int32_t>(tokens.size()), pos, table_, decode, num_logits};
    const StepBatch batch{tokens, slots, std::span(&seq, 1), {}};
    std::vector<float> logits(static_cast<size_t>(model_.config.vocab_size) * num_logits);
    const Status st = backend_->Execute(batch, logits);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return logits;
  }

 private:
  static constexpr int32_t kBlock = 16;
  const Model& model_;
  std::unique_ptr<cpu::CpuBackend> backend_;
  std::vector<int32_t> table_;
};

// Max |logits - llama2.c| over the positions of `rows` (row p: the logits after token p).
double MaxDiff(const std::vector<std::vector<float>>& rows, const nlohmann::json& ref) {
  LogitDiff d;
  for (size_t p = 0; p < rows.size(); ++p) {
    for (size_t v = 0; v < rows[p].size(); ++v) d.Add(rows[p][v], ref[p][v].get<double>());
  }
  return d.max_abs;
}

// The CPU backend, its SIMD level capped by CpuBackendOptions::max_simd_level at each level
// (levels above this CPU's run at its best), holds the llama2.c reference within the same
// 1e-4 as the reference forward, by both attention kernels: prefill (flash paged attention;
// position p's logits from a fresh prefill chunk of tokens 0..p) and decode (the TKG block;
// token 0 prefilled, then one decode step per token).
TEST(ForwardReference, Aidreams260KMatchesLlama2cThroughTheBackendAtEveryLevel) {
  auto model = Load("models/aidreams260K/aidreams260K-f32.gguf");
  ASSERT_TRUE(model);
  const std::vector<AidreamsCase> cases = AidreamsCases();
  ASSERT_EQ(cases.size(), 6u);
  std::vector<std::vector<float>> portable, best;  // case 0's decode logits, for the check below
  for (cpu::SimdLevel level : cpu::kAllSimdLevels) {
    SCOPED_TRACE(cpu::SimdLevelName(level));
    BackendSequence seq(*model, level);
    ASSERT_TRUE(seq.backend());
    EXPECT_EQ(seq.backend()->capabilities().kernels,
              cpu::SimdLevelName(std::min(level, cpu::DetectSimdLevel())));
    for (const AidreamsCase& c : cases) {
      std::vector<std::vector<float>> prefill, decode;
      for (size_t p = 0; p < c.tokens.size(); ++p) {
        prefill.push_back(seq.Step(std::span(c.tokens).first(p + 1), 0, false));
      }
      decode.push_back(seq.Step(std::span(c.tokens).first(1), 0, false));
      for (size_t p = 1; p < c.tokens.size(); ++p) {
        decode.push_back(
            seq.Step(std::span(c.tokens).subspan(p, 1), static_cast<int32_t>(p), true));
      }
      EXPECT_LE(MaxDiff(prefill, c.logits), 1e-4) << "prefill, " << c.tokens.size() << " tokens";
      EXPECT_LE(MaxDiff(decode, c.logits), 1e-4) << "decode, " << c.tokens.size() << " tokens";
      if (&c == &cases[0] && level == cpu::SimdLevel::kPortable) portable = decode;
      if (&c == &cases[0] && level == cpu::DetectSimdLevel()) best = decode;
    }
  }
  // The cap reaches the kernels: the portable run's bits differ from the best level's.
  if (cpu::DetectSimdLevel() > cpu::SimdLevel::kPortable) {
    EXPECT_NE(portable, best);
  }
}

// Speculative verification's step shape: after token 0, decode steps of 1..5 tokens each with
// the logits of every one (StepSequence::num_logits = query_len, the TKG block with several
// tokens per sequence) hold the llama2.c reference at every row, at every level.
TEST(ForwardReference, Aidreams260KMultiTokenDecodeStepsMatchLlama2cAtEveryLevel) {
  auto model = Load("models/aidreams260K/aidreams260K-f32.gguf");
  ASSERT_TRUE(model);
  const std::vector<AidreamsCase> cases = AidreamsCases();
  const size_t vocab = static_cast<size_t>(model->config.vocab_size);
  for (cpu::SimdLevel level : {cpu::SimdLevel::kPortable, cpu::SimdLevel::kAvx2,
                               cpu::SimdLevel::kAvx512, cpu::SimdLevel::kAvx512Bf16}) {
    SCOPED_TRACE(cpu::SimdLevelName(level));
    BackendSequence seq(*model, level);
    ASSERT_TRUE(seq.backend());
    for (const AidreamsCase& c : cases) {
      std::vector<std::vector<float>> rows;
      rows.push_back(seq.Step(std::span(c.tokens).first(1), 0, false));
      for (size_t p = 1, len = 1; p < c.tokens.size(); p += len, len = len % 5 + 1) {
        const size_t n = std::min(len, c.tokens.size() - p);
        const std::vector<float> all =
            seq.Step(std::span(c.tokens).subspan(p, n), static_cast<int32_t>(p), true,
                     static_cast<int32_t>(n));
        for (size_t i = 0; i < n; ++i) {
          rows.emplace_back(all.begin() + i * vocab, all.begin() + (i + 1) * vocab);
        }
      }
      ASSERT_EQ(rows.size(), c.tokens.size());
      EXPECT_LE(MaxDiff(rows, c.logits), 1e-4) << c.tokens.size() << " tokens";
    }
  }
}

// Speculative verification is exact only if a token's logits in a k + 1-token decode step are
// the ones its own 1-token step gives: bit for bit, per weight type, with the f16 KV cache the
// quantized models get (and f32), over 40 positions in steps of 1..5 tokens.
TEST(ForwardReference, MultiTokenDecodeStepsAreBitIdenticalToSingleTokenSteps) {
  for (const char* file : {"llama-gqa-f32.gguf", "llama-gqa-f16.gguf", "llama-gqa-q8_0.gguf",
                           "llama-gqa-q4_0.gguf", "llama-gqa-q4_k_m.gguf", "llama-gqa-q5_k_m.gguf",
                           "llama-gqa-q6_k.gguf", "llama-gqa-iq4_xs.gguf"}) {
    // The quantized types' batch-invariant row kernels are AVX512-VNNI's (matmul.h).
    const bool float_weights = std::string(file).find("-f") != std::string::npos;
    if (!float_weights && cpu::DetectSimdLevel() < cpu::SimdLevel::kAvx512Vnni) continue;
    auto model = Load(std::string("models/synth-gqa/") + file);
    ASSERT_TRUE(model);
    const size_t vocab = static_cast<size_t>(model->config.vocab_size);
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < 41; ++i)
      tokens.push_back(1 + (i * 37) % (model->config.vocab_size - 1));
    for (KvDtype kv : {KvDtype::kF16, KvDtype::kF32}) {
      SCOPED_TRACE(std::string(file) + (kv == KvDtype::kF16 ? " f16 KV" : " f32 KV"));
      BackendSequence single(*model, cpu::kMaxSimdLevel, kv), multi(*model, cpu::kMaxSimdLevel, kv);
      single.Step(std::span(tokens).first(1), 0, false);
      multi.Step(std::span(tokens).first(1), 0, false);
      for (size_t p = 1, len = 1; p < tokens.size(); p += len, len = len % 5 + 1) {
        const size_t n = std::min(len, tokens.size() - p);
        const std::vector<float> all =
            multi.Step(std::span(tokens).subspan(p, n), static_cast<int32_t>(p), true,
                       static_cast<int32_t>(n));
        for (size_t i = 0; i < n; ++i) {
          const std::vector<float> one =
              single.Step(std::span(tokens).subspan(p + i, 1), static_cast<int32_t>(p + i), true);
          ASSERT_TRUE(std::equal(one.begin(), one.end(), all.begin() + i * vocab))
              << "position " << p + i << " in a step of " << n;
        }
      }
    }
  }
}

struct SynthCase {
  const char* file;
  double max_abs, rms;
};

class SynthGqa : public ::testing::TestWithParam<SynthCase> {};

TEST_P(SynthGqa, MatchesLlamaCppLogits) {
  const SynthCase& sc = GetParam();
  const std::string base = std::string("models/synth-gqa/") + sc.file;
  auto model = Load(base + ".gguf");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->config.n_kv_heads, 2);
  testing::ExpectWithinSynthReference(*model, base + ".reference.json", sc.max_abs, sc.rms,
                                      sc.file);
}

INSTANTIATE_TEST_SUITE_P(Models, SynthGqa,
                         ::testing::Values(SynthCase{"llama-gqa-f32", 1e-4, 2e-5},
                                           SynthCase{"llama-gqa-f16", 0.03, 0.005},
                                           SynthCase{"llama-gqa-q8_0", 0.6, 0.12},
                                           SynthCase{"qwen2-bias-f32", 1e-4, 2e-5}),
                         [](const auto& info) {
                           std::string n = info.param.file;
                           for (char& ch : n) ch = std::isalnum(ch) ? ch : '_';
                           return n;
                         });

}  // namespace
}  // namespace pagoda
