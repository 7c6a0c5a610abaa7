// The fp32 Llama forward against independent references:
//  - aidreams260K: llama2.c run.c logits at every prompt position (+4), within 1e-4;
//  - synth-gqa (GQA 8q/2kv; F32, F16, Q8_0): llama.cpp logits at every prompt position and,
//    teacher-forced on its greedy tokens, the top-5 logits of every generated step.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/llama_forward.h"
#include "model/model.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

struct Diff {
  double max_abs = 0, sum_sq = 0;
  int64_t n = 0;
  void Add(double a, double b) {
    max_abs = std::max(max_abs, std::fabs(a - b));
    sum_sq += (a - b) * (a - b);
    ++n;
  }
  double rms() const { return n ? std::sqrt(sum_sq / n) : 0; }
};

std::unique_ptr<Model> Load(const std::string& rel) {
  auto m = LoadModel(testing::SharedPath(rel));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
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
    Diff d;
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
  const auto ref = testing::LoadJson(testing::SharedPath(base + ".reference.json"));
  ASSERT_TRUE(ref.contains("cases"));
  const int V = model->config.vocab_size;
  Diff prompt_diff, gen_diff;
  for (const auto& c : ref["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto greedy = c["greedy"]["tokens"].get<std::vector<int32_t>>();
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), greedy.begin(), greedy.end() - 1);  // teacher forcing
    cpu::LlamaForward fwd(model->config, model->weights, model->config.context_length);
    auto logits = fwd.Forward(all, true);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    for (size_t p = 0; p < prompt.size(); ++p) {
      for (int v = 0; v < V; ++v) prompt_diff.Add((*logits)[p * V + v], c["logits"][p][v]);
    }
    // Step k's distribution is the logits after position prompt.size() - 1 + k.
    for (size_t k = 0; k < greedy.size(); ++k) {
      const size_t pos = prompt.size() - 1 + k;
      for (const auto& e : c["greedy"]["top5"][k]) {
        gen_diff.Add((*logits)[pos * V + e[0].get<int>()], e[1].get<double>());
      }
    }
  }
  EXPECT_LE(prompt_diff.max_abs, sc.max_abs) << sc.file;
  EXPECT_LE(prompt_diff.rms(), sc.rms) << sc.file;
  EXPECT_LE(gen_diff.max_abs, sc.max_abs) << sc.file;
  EXPECT_LE(gen_diff.rms(), sc.rms) << sc.file;
  EXPECT_GT(prompt_diff.n, 0);
  std::printf("%s: prompt max %.3g rms %.3g; generated max %.3g rms %.3g\n", sc.file,
              prompt_diff.max_abs, prompt_diff.rms(), gen_diff.max_abs, gen_diff.rms());
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
