// Logit comparisons against the llama.cpp references of ../shared/models/synth-gqa (format in
// its README): every logit at the prompt positions, and the top-5 logits of each greedy step,
// computed by teacher forcing through the reference forward (tests/reference/llama_forward.h).
// Shared by tests/kernels/cpu/forward_reference_test.cc and tests/model/quant_test.cc.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "tests/reference/llama_forward.h"
#include "tests/test_data.h"

namespace pagoda::testing {

// Loads the model at `path`; on failure ADD_FAILURE with the status and returns null.
inline std::unique_ptr<Model> LoadModelOrFail(const std::string& path) {
  auto m = LoadModel(path);
  EXPECT_TRUE(m.ok()) << path << ": " << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Max |a - b| and rms over the pairs added.
struct LogitDiff {
  double max_abs = 0, sum_sq = 0;
  int64_t n = 0;
  void Add(double a, double b) {
    max_abs = std::max(max_abs, std::fabs(a - b));
    sum_sq += (a - b) * (a - b);
    ++n;
  }
  double rms() const { return n ? std::sqrt(sum_sq / n) : 0; }
};

struct SynthDiffs {
  LogitDiff prompt, generated;
};

// Compares `model` with the reference json at SharedPath(ref_rel); failures are ADD_FAILUREs.
// The forward's matmuls run at `matmul`.
inline SynthDiffs CompareWithSynthReference(const Model& model, const std::string& ref_rel,
                                            const cpu::mm::MatMulOptions& matmul = {}) {
  SynthDiffs d;
  const auto ref = LoadJson(SharedPath(ref_rel));
  if (!ref.contains("cases")) {
    ADD_FAILURE() << ref_rel << ": no cases";
    return d;
  }
  const int V = model.config.vocab_size;
  for (const auto& c : ref["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto greedy = c["greedy"]["tokens"].get<std::vector<int32_t>>();
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), greedy.begin(), greedy.end() - 1);  // teacher forcing
    cpu::LlamaForward fwd(model.config, model.weights, model.config.context_length, matmul);
    auto logits = fwd.Forward(all, /*all_logits=*/true);
    if (!logits.ok()) {
      ADD_FAILURE() << ref_rel << ": " << logits.status().ToString();
      return d;
    }
    for (size_t p = 0; p < prompt.size(); ++p) {
      for (int v = 0; v < V; ++v) d.prompt.Add((*logits)[p * V + v], c["logits"][p][v]);
    }
    // Step k's distribution is the logits after position prompt.size() - 1 + k.
    for (size_t k = 0; k < greedy.size(); ++k) {
      const size_t pos = prompt.size() - 1 + k;
      for (const auto& e : c["greedy"]["top5"][k]) {
        d.generated.Add((*logits)[pos * V + e[0].get<int>()], e[1].get<double>());
      }
    }
  }
  return d;
}

// Both comparisons within max_abs / rms (llama.cpp's suggested tolerances in the README); prints
// the measured figures under `what`.
inline void ExpectWithinSynthReference(const Model& model, const std::string& ref_rel,
                                       double max_abs, double rms, const std::string& what,
                                       const cpu::mm::MatMulOptions& matmul = {}) {
  const auto [prompt, generated] = CompareWithSynthReference(model, ref_rel, matmul);
  EXPECT_GT(prompt.n, 0) << what;
  EXPECT_LE(prompt.max_abs, max_abs) << what;
  EXPECT_LE(prompt.rms(), rms) << what;
  EXPECT_LE(generated.max_abs, max_abs) << what;
  EXPECT_LE(generated.rms(), rms) << what;
  std::printf("%s: prompt max %.3g rms %.3g; generated max %.3g rms %.3g\n", what.c_str(),
              prompt.max_abs, prompt.rms(), generated.max_abs, generated.rms());
}

// Free-running greedy decoding (argmax, lowest id on ties) from each case's prompt produces
// llama.cpp's greedy tokens over the case's `robust_prefix` (the steps whose top-1 / top-2
// margin exceeds twice the tolerance). Returns the number of tokens compared.
inline int ExpectGreedyRobustPrefix(const Model& model, const std::string& ref_rel,
                                    const cpu::mm::MatMulOptions& matmul = {}) {
  const auto ref = LoadJson(SharedPath(ref_rel));
  int compared = 0;
  for (const auto& c : ref["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    const auto want = c["greedy"]["tokens"].get<std::vector<int32_t>>();
    const int robust = c["greedy"]["robust_prefix"].get<int>();
    cpu::LlamaForward fwd(model.config, model.weights, model.config.context_length, matmul);
    std::vector<int32_t> feed = prompt;
    for (int k = 0; k < robust; ++k) {
      auto logits = fwd.Forward(feed, /*all_logits=*/false);
      if (!logits.ok()) {
        ADD_FAILURE() << ref_rel << ": " << logits.status().ToString();
        return compared;
      }
      const auto best = std::max_element(logits->begin(), logits->end());  // first maximum
      const auto token = static_cast<int32_t>(best - logits->begin());
      EXPECT_EQ(token, want[k]) << ref_rel << " '" << c["text"] << "' step " << k;
      feed = {token};
      ++compared;
    }
  }
  return compared;
}

}  // namespace pagoda::testing
