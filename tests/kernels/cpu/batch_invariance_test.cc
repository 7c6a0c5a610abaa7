// CpuBackendOptions::batch_invariant (issue 18 item 4): a sequence's logits are bit for bit the
// same whichever sequences share its steps, however its prompt is chunked, whether its first
// blocks come from another sequence (a prefix-cache hit) and however many tokens its decode steps
// carry (speculative verification). Per weight type (every synth-gqa file, a BF16 model made
// here), over randomized schedules driven like the engine drives the backend: each run feeds the
// target sequence's fixed tokens (teacher-forced) and records the logits after every position
// from the end of its prompt on; every run must record exactly the rows of the reference run
// (the target alone: one prefill step, then one decode step per token).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd_level.h"
#include "kvcache/kv_types.h"
#include "model/make_model.h"
#include "model/model.h"
#include "tests/reference/synth_reference.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

constexpr int32_t kBlock = 16;
constexpr int32_t kPromptLen = 150;  // past the int16 path of file rows (128 tokens)
constexpr int32_t kTotalLen = 180;   // prompt + 30 decoded positions (context 256)

struct Seq {
  std::vector<int32_t> tokens;
  int32_t prompt_len = 0;
  int32_t computed = 0;        // tokens in the cache
  std::vector<int32_t> table;  // block ids
  int32_t shared_blocks = 0;   // leading blocks borrowed from another sequence (not freed here)
};

// What one step gives a sequence: its next q_len tokens, logits for the last num_logits.
struct Share {
  Seq* seq;
  int32_t q_len, num_logits;
  bool decode;
};

class Schedule {
 public:
  Schedule(const Model& model, uint32_t seed) : model_(model), rng_(seed) {
    KvCacheConfig kv;
    kv.block_size = kBlock;
    kv.num_blocks = 160;
    kv.dtype = KvDtype::kF16;
    cpu::CpuBackendOptions o;
    // The models where it is free run with the default (auto), the others with it on.
    const bool free = cpu::BatchInvariant(o, model.weights);
    o.batch_invariance = free ? cpu::BatchInvariance::kAuto : cpu::BatchInvariance::kOn;
    auto backend = cpu::CpuBackend::Create(model.config, model.weights, kv, StepLimits{512, 8}, o);
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    if (backend.ok()) backend_ = std::move(*backend);
    if (backend_) {
      EXPECT_TRUE(backend_->capabilities().batch_invariant);
    }
    free_.resize(kv.num_blocks);
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), rng_);  // physical placement differs per run
  }
  bool ok() const { return backend_ != nullptr; }
  int32_t Rand(int32_t lo, int32_t hi) { return std::uniform_int_distribution(lo, hi)(rng_); }

  // Runs the shares as one step (decodes first, as the engine orders them); appends the
  // target's logits rows to rows_ by position.
  void Step(std::vector<Share> shares, const Seq* target) {
    std::stable_partition(shares.begin(), shares.end(), [](const Share& s) { return s.decode; });
    std::vector<int32_t> ids, slots;
    std::vector<StepSequence> seqs;
    int32_t n_logits = 0;
    for (const Share& s : shares) {
      Seq& q = *s.seq;
      while (static_cast<int32_t>(q.table.size()) * kBlock < q.computed + s.q_len) {
        ASSERT_FALSE(free_.empty());
        q.table.push_back(free_.back());
        free_.pop_back();
      }
      seqs.push_back(StepSequence{static_cast<int32_t>(ids.size()), s.q_len, q.computed, q.table,
                                  s.decode, s.num_logits});
      for (int32_t i = 0; i < s.q_len; ++i) {
        const int32_t p = q.computed + i;
        ids.push_back(q.tokens[p]);
        slots.push_back(SlotForPosition(q.table, kBlock, p));
      }
      n_logits += s.num_logits;
    }
    const size_t vocab = static_cast<size_t>(model_.config.vocab_size);
    std::vector<float> logits(vocab * n_logits);
    const Status st = backend_->Execute(StepBatch{ids, slots, seqs, {}}, logits);
    ASSERT_TRUE(st.ok()) << st.ToString();
    size_t row = 0;
    for (const Share& s : shares) {
      Seq& q = *s.seq;
      for (int32_t i = s.q_len - s.num_logits; i < s.q_len; ++i, ++row) {
        if (&q != target) continue;
        const int32_t p = q.computed + i;
        EXPECT_EQ(rows_.count(p), 0u) << "position " << p << " twice";
        rows_[p].assign(logits.begin() + row * vocab, logits.begin() + (row + 1) * vocab);
      }
      q.computed += s.q_len;
    }
  }

  void Free(Seq& q) {
    free_.insert(free_.end(), q.table.begin() + q.shared_blocks, q.table.end());
    q.table.clear();
  }

  // A random other sequence: a prompt of 1..kPromptLen random tokens, then up to 8 decoded.
  Seq Other() {
    Seq q;
    q.prompt_len = Rand(1, kPromptLen);
    const int32_t len = q.prompt_len + Rand(0, 8);
    for (int32_t i = 0; i < len; ++i) q.tokens.push_back(Rand(1, model_.config.vocab_size - 1));
    return q;
  }

  // The next share of q: a prefill chunk of up to max_chunk tokens (the rest of the prompt if
  // max_chunk is 0), or a decode of up to max_decode tokens with logits for all of them.
  static Share NextShare(Seq& q, int32_t chunk, int32_t decode) {
    const int32_t left = static_cast<int32_t>(q.tokens.size()) - q.computed;
    if (q.computed < q.prompt_len) {
      const int32_t n = std::min(chunk, q.prompt_len - q.computed);
      return Share{&q, n, q.computed + n == q.prompt_len ? 1 : 0, false};
    }
    const int32_t n = std::min(decode, left);
    return Share{&q, n, n, true};
  }

  std::map<int32_t, std::vector<float>> rows_;

 private:
  const Model& model_;
  std::mt19937 rng_;
  std::unique_ptr<cpu::CpuBackend> backend_;
  std::vector<int32_t> free_;
};

std::vector<int32_t> TargetTokens(const Model& model) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < kTotalLen; ++i)
    t.push_back(1 + (i * 97 + 13) % (model.config.vocab_size - 1));
  return t;
}

// The target alone: its prompt in one step, then one decode step per token.
std::map<int32_t, std::vector<float>> Alone(const Model& model) {
  Schedule s(model, 1);
  if (!s.ok()) return {};
  Seq t;
  t.tokens = TargetTokens(model);
  t.prompt_len = kPromptLen;
  while (t.computed < kTotalLen) s.Step({Schedule::NextShare(t, kPromptLen, 1)}, &t);
  return s.rows_;
}

// The target among random others, its prompt in random chunks, its decodes 1..4 tokens a step;
// with `prefix_hit`, a first sequence computes the target's first blocks, which the target then
// reuses (as the prefix cache hands them out), starting its prefill after them.
std::map<int32_t, std::vector<float>> Shuffled(const Model& model, uint32_t seed, bool prefix_hit) {
  Schedule s(model, seed);
  if (!s.ok()) return {};
  Seq t;
  t.tokens = TargetTokens(model);
  t.prompt_len = kPromptLen;
  Seq warm;
  if (prefix_hit) {
    const int32_t blocks = s.Rand(1, (kPromptLen - 1) / kBlock);
    warm.tokens.assign(t.tokens.begin(), t.tokens.begin() + blocks * kBlock);
    warm.prompt_len = blocks * kBlock;
    while (warm.computed < warm.prompt_len) {
      s.Step({Schedule::NextShare(warm, s.Rand(1, warm.prompt_len), 1)}, nullptr);
    }
    t.table.assign(warm.table.begin(), warm.table.begin() + blocks);
    t.shared_blocks = blocks;
    t.computed = blocks * kBlock;
  }
  std::vector<Seq> others;
  while (t.computed < kTotalLen) {
    while (static_cast<int>(others.size()) < s.Rand(0, 4)) others.push_back(s.Other());
    std::vector<Share> shares{Schedule::NextShare(t, s.Rand(1, kPromptLen), s.Rand(1, 4))};
    for (Seq& o : others) shares.push_back(Schedule::NextShare(o, s.Rand(1, 80), 1));
    s.Step(shares, &t);
    for (auto it = others.begin(); it != others.end();) {
      if (it->computed == static_cast<int32_t>(it->tokens.size())) {
        s.Free(*it);
        it = others.erase(it);
      } else {
        ++it;
      }
    }
  }
  return s.rows_;
}

void ExpectSameRows(const std::map<int32_t, std::vector<float>>& want,
                    const std::map<int32_t, std::vector<float>>& got, const std::string& what) {
  ASSERT_EQ(want.size(), static_cast<size_t>(kTotalLen - kPromptLen + 1)) << what;
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [pos, row] : want) {
    const auto it = got.find(pos);
    ASSERT_NE(it, got.end()) << what << ": no logits at position " << pos;
    ASSERT_EQ(it->second.size(), row.size());
    ASSERT_EQ(0, std::memcmp(it->second.data(), row.data(), row.size() * sizeof(float)))
        << what << ": logits differ at position " << pos;
  }
}

void ExpectBatchInvariant(const Model& model, const std::string& name) {
  const auto alone = Alone(model);
  for (uint32_t seed = 2; seed < 5; ++seed) {
    for (bool prefix_hit : {false, true}) {
      ExpectSameRows(alone, Shuffled(model, seed, prefix_hit),
                     name + " seed " + std::to_string(seed) + (prefix_hit ? " prefix hit" : ""));
    }
  }
}

class BatchInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchInvariance, LogitsDoNotDependOnTheScheduleSynthGqa) {
  const std::string file = GetParam();
  auto model = testing::LoadModelOrFail(testing::SharedPath("models/synth-gqa/" + file));
  ASSERT_TRUE(model);
  ExpectBatchInvariant(*model, file);
}

INSTANTIATE_TEST_SUITE_P(
    Files, BatchInvariance,
    ::testing::Values("llama-gqa-f32.gguf", "llama-gqa-f16.gguf", "llama-gqa-q8_0.gguf",
                      "llama-gqa-q4_0.gguf", "llama-gqa-q4_1.gguf", "llama-gqa-q5_0.gguf",
                      "llama-gqa-q5_1.gguf", "llama-gqa-iq4_nl.gguf", "llama-gqa-q2_k.gguf",
                      "llama-gqa-q3_k_m.gguf", "llama-gqa-q4_k_m.gguf", "llama-gqa-q5_k_m.gguf",
                      "llama-gqa-q6_k.gguf", "llama-gqa-iq4_xs.gguf", "qwen2-bias-f32.gguf"),
    [](const auto& info) {
      std::string n = info.param;
      for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return n;
    });

// auto turns it on exactly where it is free: models whose matrices are all F32 or BF16, and
// those whose block-quantized matrices are packed and read by their packed kernels at every batch
// size (Q8_0 at AVX512-VNNI and above; the other types, Q6_K too, from AVX2); never F16, never
// without pack_weights.
TEST(BatchInvarianceAuto, OnWhereItIsFree) {
  using cpu::BatchInvariance;
  using cpu::SimdLevel;
  testing::TempDir dir;
  MakeModelOptions made;
  made.dtype = GgmlType::kQ4_1;  // every matrix Q4_1
  made.output = dir.File("q4_1.gguf");
  ASSERT_TRUE(MakeModel(made).ok());
  const SimdLevel top = cpu::EffectiveSimdLevel(cpu::kMaxSimdLevel);
  const bool avx2 = top >= SimdLevel::kAvx2, vnni = top >= SimdLevel::kAvx512Vnni;
  struct Case {
    std::string path;
    bool at_top, at_avx2;  // with packed weights
  };
  const auto shared = [](const std::string& f) {
    return testing::SharedPath("models/synth-gqa/" + f);
  };
  for (const Case& c : std::vector<Case>{{shared("llama-gqa-f32.gguf"), true, true},
                                         {shared("qwen2-bias-f32.gguf"), true, true},
                                         {shared("llama-gqa-f16.gguf"), false, false},
                                         {shared("llama-gqa-q8_0.gguf"), vnni, false},
                                         {shared("llama-gqa-q4_k_m.gguf"), avx2, avx2},
                                         {made.output, avx2, avx2}}) {
    auto model = testing::LoadModelOrFail(c.path);
    ASSERT_TRUE(model);
    const bool f32 = c.path.find("f32") != std::string::npos;
    cpu::CpuBackendOptions o;
    EXPECT_EQ(cpu::BatchInvariant(o, model->weights), c.at_top) << c.path;
    o.max_simd_level = SimdLevel::kAvx2;
    EXPECT_EQ(cpu::BatchInvariant(o, model->weights), c.at_avx2) << c.path;
    o.max_simd_level = cpu::kMaxSimdLevel;
    o.pack_weights = false;
    EXPECT_EQ(cpu::BatchInvariant(o, model->weights), f32) << c.path;
    o.batch_invariance = BatchInvariance::kOn;
    EXPECT_TRUE(cpu::BatchInvariant(o, model->weights)) << c.path;
    o.batch_invariance = BatchInvariance::kOff;
    EXPECT_FALSE(cpu::BatchInvariant(o, model->weights)) << c.path;
  }
}

TEST(BatchInvarianceBf16, LogitsDoNotDependOnTheSchedule) {
  testing::TempDir dir;
  MakeModelOptions o;
  o.preset = "tiny";
  o.dtype = GgmlType::kBF16;
  o.context_length = 256;
  o.output = dir.File("bf16.gguf");
  const Status made = MakeModel(o);
  ASSERT_TRUE(made.ok()) << made.ToString();
  auto model = testing::LoadModelOrFail(o.output);
  ASSERT_TRUE(model);
  EXPECT_TRUE(cpu::BatchInvariant(cpu::CpuBackendOptions{}, model->weights));
  ExpectBatchInvariant(*model, "tiny bf16");
}

}  // namespace
}  // namespace pagoda
