// The fp32 Llama forward against independent references:
//  - aidreams260K: llama2.c run.c logits at every prompt position (+4), within 1e-4;
//  - synth-gqa (GQA 8q/2kv; F32, F16, Q8_0): llama.cpp logits at every prompt position and,
//    teacher-forced on its greedy tokens, the top-5 logits of every generated step.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/reference/llama_forward.h"
#include "model/model.h"
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
