// The paged CPU backend (flash paged attention for prefill chunks, the TKG block for decode)
// against the simple reference forward (LlamaForward) on random in-memory models, including
// the options real checkpoints use: GQA, QKV bias, per-head QK-norm (Qwen3), sliding window
// (Mistral), both RoPE layouts, RoPE scaling (linear, Llama 3 from the HF parameters and from
// llama.cpp's rope_freqs factors).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <span>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/matmul/matmul.h"
#include "tests/kernels/malformed_batches.h"
#include "tests/reference/llama_forward.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

using testing::MaxAbsDiff;

struct RandomModel {
  ModelConfig config;
  ModelWeights weights;
  std::vector<std::vector<float>> storage;  // owns every matrix

  WeightView Matrix(int64_t rows, int64_t cols, float scale, std::mt19937& rng) {
    std::normal_distribution<float> n(0.0f, scale);
    storage.emplace_back(static_cast<size_t>(rows * cols));
    for (float& v : storage.back()) v = n(rng);
    return {GgmlType::kF32, reinterpret_cast<const uint8_t*>(storage.back().data()), rows, cols,
            cols * 4};
  }
  static std::vector<float> Vector(int64_t n, float lo, float hi, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng);
    return v;
  }
};

enum class Rope { kPlain, kLinear, kLlama3, kFreqFactors };

// RoPE scaling on a rope_dim 16, theta 1e4 model (pair wavelengths 6.3, 19.9, 62.8, ...): Llama 3
// with original context 32 keeps pair 0, smooths pair 1 and divides the rest by the factor.
void SetRopeScaling(Rope rope, ModelConfig& c) {
  if (rope == Rope::kLinear) {
    c.rope_scaling = RopeScaling::kLinear;
    c.rope_scaling_factor = 3.0f;
  } else if (rope == Rope::kLlama3) {
    c.rope_scaling = RopeScaling::kLlama3;
    c.rope_scaling_factor = 8.0f;
    c.rope_low_freq_factor = 1.0f;
    c.rope_high_freq_factor = 4.0f;
    c.rope_original_context = 32;
  } else if (rope == Rope::kFreqFactors) {
    c.rope_scaling = RopeScaling::kLlama3;
    c.rope_freq_factors = {1.0f, 1.5f, 2.0f, 4.0f, 8.0f, 8.0f, 8.0f, 8.0f};
    c.rope_scaling_factor = 8.0f;
  }
}

std::unique_ptr<RandomModel> MakeRandomModel(bool bias, bool qk_norm, int32_t window,
                                             RopeLayout layout, uint32_t seed,
                                             Rope rope = Rope::kPlain) {
  auto m = std::make_unique<RandomModel>();
  ModelConfig& c = m->config;
  c.architecture = "test";
  c.n_embd = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 16;
  c.n_ff = 96, c.vocab_size = 50, c.context_length = 64, c.rope_dim = 16;
  c.rope_layout = layout, c.has_qkv_bias = bias, c.has_qk_norm = qk_norm;
  c.sliding_window = window;
  SetRopeScaling(rope, c);
  std::mt19937 rng(seed);
  const float s = 1.0f / std::sqrt(64.0f);
  m->weights.token_embd = m->Matrix(c.vocab_size, c.n_embd, 1.0f, rng);
  m->weights.output = m->Matrix(c.vocab_size, c.n_embd, 2.0f * s, rng);
  m->weights.output_norm = RandomModel::Vector(c.n_embd, 0.5f, 1.5f, rng);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights w;
    w.attn_norm = RandomModel::Vector(c.n_embd, 0.5f, 1.5f, rng);
    w.ffn_norm = RandomModel::Vector(c.n_embd, 0.5f, 1.5f, rng);
    w.wq = m->Matrix(c.q_dim(), c.n_embd, 1.5f * s, rng);
    w.wk = m->Matrix(c.kv_dim(), c.n_embd, 1.5f * s, rng);
    w.wv = m->Matrix(c.kv_dim(), c.n_embd, s, rng);
    w.wo = m->Matrix(c.n_embd, c.q_dim(), s, rng);
    w.w_gate = m->Matrix(c.n_ff, c.n_embd, s, rng);
    w.w_up = m->Matrix(c.n_ff, c.n_embd, s, rng);
    w.w_down = m->Matrix(c.n_embd, c.n_ff, 1.0f / std::sqrt(96.0f), rng);
    if (bias) {
      w.bq = RandomModel::Vector(c.q_dim(), -0.5f, 0.5f, rng);
      w.bk = RandomModel::Vector(c.kv_dim(), -0.5f, 0.5f, rng);
      w.bv = RandomModel::Vector(c.kv_dim(), -0.5f, 0.5f, rng);
    }
    if (qk_norm) {
      w.q_norm = RandomModel::Vector(c.head_dim, 0.5f, 1.5f, rng);
      w.k_norm = RandomModel::Vector(c.head_dim, 0.5f, 1.5f, rng);
    }
    m->weights.layers.push_back(std::move(w));
  }
  return m;
}

// Feeds `tokens` to the backend as prefill chunks of `chunk`, then decodes `decode` more tokens
// one by one; returns the logits after every decode input (and after the prompt).
std::vector<std::vector<float>> RunBackend(const RandomModel& m, std::span<const int32_t> tokens,
                                           int32_t prompt_len, int32_t chunk, int32_t block,
                                           const cpu::CpuBackendOptions& options = {},
                                           int64_t* packed_bytes = nullptr) {
  KvCacheConfig kv;
  StepLimits limits;
  kv.block_size = block;
  kv.num_blocks = 64 / block + 1;
  kv.dtype = KvDtype::kF32;
  limits.max_num_batched_tokens = 64;
  limits.max_num_seqs = 1;
  auto backend = cpu::CpuBackend::Create(m.config, m.weights, kv, limits, options);
  EXPECT_TRUE(backend.ok()) << backend.status().ToString();
  if (packed_bytes != nullptr) *packed_bytes = (*backend)->capabilities().packed_weight_bytes;
  std::vector<int32_t> table;
  for (int32_t b = 0; b < 64 / block; ++b) table.push_back(64 / block - 1 - b);  // shuffled
  std::vector<std::vector<float>> out;
  std::vector<float> logits(static_cast<size_t>(m.config.vocab_size));
  for (int32_t pos = 0; pos < static_cast<int32_t>(tokens.size());) {
    const bool decode = pos >= prompt_len;
    const int32_t n = decode ? 1 : std::min(chunk, prompt_len - pos);
    std::vector<int32_t> slots;
    for (int32_t i = 0; i < n; ++i) slots.push_back(SlotForPosition(table, block, pos + i));
    StepSequence seq{0, n, pos, table, decode, true};
    StepBatch batch{tokens.subspan(pos, n), slots, std::span(&seq, 1), {}};
    EXPECT_TRUE((*backend)->Execute(batch, logits).ok());
    pos += n;
    if (pos >= prompt_len) out.push_back(logits);
  }
  return out;
}

struct Case {
  bool bias, qk_norm;
  int32_t window;
  RopeLayout layout;
  Rope rope = Rope::kPlain;
};

class BackendParity : public ::testing::TestWithParam<Case> {};

TEST_P(BackendParity, PagedBackendMatchesReferenceForward) {
  const Case& k = GetParam();
  auto m = MakeRandomModel(k.bias, k.qk_norm, k.window, k.layout, 7, k.rope);
  ASSERT_TRUE(m->config.Validate().ok()) << m->config.Validate().ToString();
  std::mt19937 rng(3);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 30; ++i) tokens.push_back(static_cast<int32_t>(rng() % 50));
  const int32_t prompt_len = 19;
  cpu::LlamaForward ref(m->config, m->weights, m->config.context_length);
  auto all = ref.Forward(tokens, /*all_logits=*/true);
  ASSERT_TRUE(all.ok());
  const int V = m->config.vocab_size;
  for (int32_t chunk : {1, 5, 64}) {
    for (int32_t block : {1, 4, 16}) {
      const auto got = RunBackend(*m, tokens, prompt_len, chunk, block);
      ASSERT_EQ(got.size(), tokens.size() - prompt_len + 1);
      double max_diff = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const size_t pos = prompt_len - 1 + i;
        max_diff = std::max(max_diff, MaxAbsDiff(got[i], all->subspan(pos * V, V)));
      }
      EXPECT_LT(max_diff, 2e-4) << "chunk " << chunk << " block " << block;
    }
  }
}

// Several sequences per step, as the engine runs them: decodes first, then prefill chunks of the
// others, each in its own blocks; every sequence's logits match its own reference forward.
struct SeqRun {
  std::vector<int32_t> tokens;
  int32_t prompt_len = 0, pos = 0;
  std::vector<int32_t> table;
  std::vector<std::vector<float>> logits;  // after the prompt and after every decode input
};

void RunBatched(const RandomModel& m, std::vector<SeqRun>& runs, int32_t chunk, int32_t block) {
  const int32_t per_seq = 64 / block;
  KvCacheConfig kv;
  kv.block_size = block;
  kv.num_blocks = per_seq * static_cast<int32_t>(runs.size()) + 1;
  kv.dtype = KvDtype::kF32;
  const int32_t nseq = static_cast<int32_t>(runs.size());
  auto backend = cpu::CpuBackend::Create(m.config, m.weights, kv, StepLimits{64 * nseq, nseq}, {});
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  for (int32_t s = 0; s < nseq; ++s) {
    runs[s].table.clear();
    for (int32_t b = 0; b < per_seq; ++b) runs[s].table.push_back(s * per_seq + per_seq - 1 - b);
  }
  const int32_t V = m.config.vocab_size;
  while (true) {
    std::vector<int32_t> tokens, slots;
    std::vector<StepSequence> seqs;
    std::vector<SeqRun*> order;
    for (bool decodes : {true, false}) {
      for (SeqRun& r : runs) {
        if (r.pos >= static_cast<int32_t>(r.tokens.size()) || (r.pos >= r.prompt_len) != decodes) {
          continue;
        }
        const int32_t n = decodes ? 1 : std::min(chunk, r.prompt_len - r.pos);
        seqs.push_back({static_cast<int32_t>(tokens.size()), n, r.pos, r.table, decodes, true});
        for (int32_t i = 0; i < n; ++i) {
          tokens.push_back(r.tokens[r.pos + i]);
          slots.push_back(SlotForPosition(r.table, block, r.pos + i));
        }
        order.push_back(&r);
      }
    }
    if (seqs.empty()) return;
    std::vector<float> logits(seqs.size() * V);
    ASSERT_TRUE((*backend)->Execute(StepBatch{tokens, slots, seqs, {}}, logits).ok());
    for (size_t i = 0; i < order.size(); ++i) {
      SeqRun& r = *order[i];
      r.pos += seqs[i].query_len;
      if (r.pos >= r.prompt_len) {
        r.logits.emplace_back(logits.begin() + i * V, logits.begin() + (i + 1) * V);
      }
    }
  }
}

TEST_P(BackendParity, SeveralSequencesPerStepMatchTheirReferenceForwards) {
  const Case& k = GetParam();
  auto m = MakeRandomModel(k.bias, k.qk_norm, k.window, k.layout, 7, k.rope);
  std::mt19937 rng(5);
  const int V = m->config.vocab_size;
  for (int32_t chunk : {3, 64}) {
    std::vector<SeqRun> runs(3);
    const int32_t lens[3] = {30, 24, 27}, prompts[3] = {19, 6, 13};
    for (int s = 0; s < 3; ++s) {
      for (int i = 0; i < lens[s]; ++i) runs[s].tokens.push_back(static_cast<int32_t>(rng() % V));
      runs[s].prompt_len = prompts[s];
    }
    RunBatched(*m, runs, chunk, 4);
    for (int s = 0; s < 3; ++s) {
      cpu::LlamaForward ref(m->config, m->weights, m->config.context_length);
      auto all = ref.Forward(runs[s].tokens, /*all_logits=*/true);
      ASSERT_TRUE(all.ok());
      ASSERT_EQ(runs[s].logits.size(), runs[s].tokens.size() - runs[s].prompt_len + 1);
      double max_diff = 0;
      for (size_t i = 0; i < runs[s].logits.size(); ++i) {
        const size_t pos = runs[s].prompt_len - 1 + i;
        max_diff = std::max(max_diff, MaxAbsDiff(runs[s].logits[i], all->subspan(pos * V, V)));
      }
      EXPECT_LT(max_diff, 2e-4) << "sequence " << s << " chunk " << chunk;
    }
  }
}

// ---- An independent float64 reference, written here from the published formulas ----
// (not LlamaForward, which shares the production RoPE table and norms): RMSNorm
// x / sqrt(mean(x^2) + eps) * w; Qwen3's per-head RMSNorm of q and k before RoPE; RoPE on pairs
// (2i, 2i+1) or (i, i + d/2) at angle pos * inv_freq[i]; Mistral's sliding window (query p sees
// keys p - W < p' <= p); softmax(q k / sqrt(d)) v with GQA; SwiGLU MLP.
using Vec = std::vector<double>;

// theta^(-2i/d), then linear scaling (HF "linear": divided by the factor), llama.cpp's
// rope_freqs divisors, or Llama 3.1's per-frequency rule (HF _compute_llama3_parameters).
Vec InvFreqF64(const ModelConfig& c) {
  Vec f(static_cast<size_t>(c.rope_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    double v = std::pow(double{c.rope_theta}, -2.0 * static_cast<double>(i) / c.rope_dim);
    if (c.rope_scaling == RopeScaling::kLinear) {
      v /= c.rope_scaling_factor;
    } else if (c.rope_scaling == RopeScaling::kLlama3 && !c.rope_freq_factors.empty()) {
      v /= c.rope_freq_factors[i];
    } else if (c.rope_scaling == RopeScaling::kLlama3) {
      const double wavelen = 2.0 * M_PI / v, old_ctx = c.rope_original_context;
      const double low_wavelen = old_ctx / c.rope_low_freq_factor;
      const double high_wavelen = old_ctx / c.rope_high_freq_factor;
      if (wavelen > low_wavelen) {
        v /= c.rope_scaling_factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (old_ctx / wavelen - c.rope_low_freq_factor) /
                              (c.rope_high_freq_factor - c.rope_low_freq_factor);
        v = (1.0 - smooth) * v / c.rope_scaling_factor + smooth * v;
      }
    }
    f[i] = v;
  }
  return f;
}

Vec MatVecF64(const WeightView& w, const Vec& x) {
  Vec y(static_cast<size_t>(w.rows), 0.0);
  for (int64_t r = 0; r < w.rows; ++r) {
    const float* row = reinterpret_cast<const float*>(w.row(r));
    for (int64_t k = 0; k < w.cols; ++k) y[r] += double{row[k]} * x[k];
  }
  return y;
}

Vec RmsNormF64(const double* x, const std::vector<float>& w, size_t n, double eps) {
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// Per-head QK-norm (when the model has it) and RoPE of one projected q or k at `pos`.
void NormAndRotateF64(const ModelConfig& c, const std::vector<float>& norm, const Vec& inv_freq,
                      int64_t pos, Vec& v) {
  const size_t d = static_cast<size_t>(c.head_dim), half = static_cast<size_t>(c.rope_dim / 2);
  for (size_t h = 0; h < v.size() / d; ++h) {
    double* x = v.data() + h * d;
    if (c.has_qk_norm) {
      const Vec n = RmsNormF64(x, norm, d, c.rms_eps);
      std::copy(n.begin(), n.end(), x);
    }
    for (size_t i = 0; i < half; ++i) {
      const size_t a = c.rope_layout == RopeLayout::kInterleaved ? 2 * i : i;
      const size_t b = c.rope_layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
      const double th = static_cast<double>(pos) * inv_freq[i];
      const double xa = x[a], xb = x[b];
      x[a] = xa * std::cos(th) - xb * std::sin(th);
      x[b] = xa * std::sin(th) + xb * std::cos(th);
    }
  }
}

// Logits [tokens.size()][vocab] of the whole sequence.
std::vector<Vec> ForwardF64(const RandomModel& m, std::span<const int32_t> tokens) {
  const ModelConfig& c = m.config;
  const Vec inv_freq = InvFreqF64(c);
  const size_t T = tokens.size(), E = c.n_embd, d = c.head_dim;
  std::vector<Vec> x(T);
  for (size_t t = 0; t < T; ++t) {
    const float* e = reinterpret_cast<const float*>(m.weights.token_embd.row(tokens[t]));
    x[t].assign(e, e + E);
  }
  for (const LayerWeights& w : m.weights.layers) {
    std::vector<Vec> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      const Vec h = RmsNormF64(x[t].data(), w.attn_norm, E, c.rms_eps);
      q[t] = MatVecF64(w.wq, h), k[t] = MatVecF64(w.wk, h), v[t] = MatVecF64(w.wv, h);
      for (size_t i = 0; i < w.bq.size(); ++i) q[t][i] += w.bq[i];
      for (size_t i = 0; i < w.bk.size(); ++i) k[t][i] += w.bk[i];
      for (size_t i = 0; i < w.bv.size(); ++i) v[t][i] += w.bv[i];
      NormAndRotateF64(c, w.q_norm, inv_freq, static_cast<int64_t>(t), q[t]);
      NormAndRotateF64(c, w.k_norm, inv_freq, static_cast<int64_t>(t), k[t]);
    }
    for (size_t t = 0; t < T; ++t) {
      const size_t first = c.sliding_window > 0 && t + 1 > static_cast<size_t>(c.sliding_window)
                               ? t + 1 - static_cast<size_t>(c.sliding_window)
                               : 0;
      Vec attn(static_cast<size_t>(c.q_dim()), 0.0);
      for (size_t hq = 0; hq < static_cast<size_t>(c.n_heads); ++hq) {
        const size_t hk = hq / static_cast<size_t>(c.n_heads / c.n_kv_heads);
        Vec score;
        double mx = -1e300, z = 0.0;
        for (size_t p = first; p <= t; ++p) {
          double dot = 0.0;
          for (size_t i = 0; i < d; ++i) dot += q[t][hq * d + i] * k[p][hk * d + i];
          score.push_back(dot / std::sqrt(static_cast<double>(d)));
          mx = std::max(mx, score.back());
        }
        for (double& sc : score) z += (sc = std::exp(sc - mx));
        for (size_t p = first; p <= t; ++p) {
          for (size_t i = 0; i < d; ++i)
            attn[hq * d + i] += score[p - first] / z * v[p][hk * d + i];
        }
      }
      const Vec o = MatVecF64(w.wo, attn);
      for (size_t i = 0; i < E; ++i) x[t][i] += o[i];
      const Vec h = RmsNormF64(x[t].data(), w.ffn_norm, E, c.rms_eps);
      const Vec g = MatVecF64(w.w_gate, h), u = MatVecF64(w.w_up, h);
      Vec act(g.size());
      for (size_t i = 0; i < g.size(); ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const Vec down = MatVecF64(w.w_down, act);
      for (size_t i = 0; i < E; ++i) x[t][i] += down[i];
    }
  }
  std::vector<Vec> logits(T);
  for (size_t t = 0; t < T; ++t) {
    logits[t] =
        MatVecF64(m.weights.output, RmsNormF64(x[t].data(), m.weights.output_norm, E, c.rms_eps));
  }
  return logits;
}

// Sliding window, RoPE scaling and QK-norm through the paged backend against the float64
// formulas above (not only "the logits changed").
TEST_P(BackendParity, PagedBackendMatchesTheFloat64FormulaReference) {
  const Case& k = GetParam();
  auto m = MakeRandomModel(k.bias, k.qk_norm, k.window, k.layout, 7, k.rope);
  std::mt19937 rng(11);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(static_cast<int32_t>(rng() % 50));
  const int32_t prompt_len = 23;
  const std::vector<Vec> want = ForwardF64(*m, tokens);
  const auto got = RunBackend(*m, tokens, prompt_len, 5, 4);
  ASSERT_EQ(got.size(), tokens.size() - prompt_len + 1);
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const Vec& w = want[prompt_len - 1 + i];
    for (size_t j = 0; j < w.size(); ++j) {
      max_diff = std::max(max_diff, std::abs(w[j] - double{got[i][j]}));
    }
  }
  EXPECT_LT(max_diff, 5e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Options, BackendParity,
    ::testing::Values(Case{false, false, 0, RopeLayout::kInterleaved},
                      Case{true, false, 0, RopeLayout::kHalves},
                      Case{false, true, 0, RopeLayout::kHalves},
                      Case{false, false, 5, RopeLayout::kInterleaved},
                      Case{true, true, 7, RopeLayout::kHalves},
                      Case{false, false, 0, RopeLayout::kInterleaved, Rope::kLinear},
                      Case{true, false, 0, RopeLayout::kHalves, Rope::kLlama3},
                      Case{false, true, 5, RopeLayout::kInterleaved, Rope::kLlama3},
                      Case{false, false, 0, RopeLayout::kHalves, Rope::kFreqFactors}));

TEST(BackendParity, SlidingWindowChangesTheResult) {
  // Guards the test above: with a window the logits must differ from full attention.
  auto full = MakeRandomModel(false, false, 0, RopeLayout::kInterleaved, 7);
  auto win = MakeRandomModel(false, false, 5, RopeLayout::kInterleaved, 7);
  std::vector<int32_t> tokens(20, 3);
  for (int i = 0; i < 20; ++i) tokens[i] = (i * 7) % 50;
  cpu::LlamaForward a(full->config, full->weights, 64), b(win->config, win->weights, 64);
  auto la = a.Forward(tokens, false), lb = b.Forward(tokens, false);
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_GT(MaxAbsDiff(*la, *lb), 1e-3);
}

TEST(BackendParity, RopeScalingChangesTheResult) {
  // Guards the scaled cases above: each scaling moves the logits of the unscaled model.
  std::vector<int32_t> tokens(40);
  for (int i = 0; i < 40; ++i) tokens[i] = (i * 11) % 50;
  auto plain = MakeRandomModel(false, false, 0, RopeLayout::kHalves, 7);
  cpu::LlamaForward ref(plain->config, plain->weights, 64);
  auto want = ref.Forward(tokens, false);
  ASSERT_TRUE(want.ok());
  const std::vector<float> base(want->begin(), want->end());
  for (Rope rope : {Rope::kLinear, Rope::kLlama3, Rope::kFreqFactors}) {
    auto m = MakeRandomModel(false, false, 0, RopeLayout::kHalves, 7, rope);
    cpu::LlamaForward f(m->config, m->weights, 64);
    auto got = f.Forward(tokens, false);
    ASSERT_TRUE(got.ok());
    EXPECT_GT(MaxAbsDiff(base, *got), 1e-3) << static_cast<int>(rope);
  }
}

// 16 F32 KV blocks of 4 tokens: the validation tests' cache.
KvCacheConfig SmallF32Kv() {
  KvCacheConfig kv;
  kv.block_size = 4;
  kv.num_blocks = 16;
  kv.dtype = KvDtype::kF32;
  return kv;
}

// Re-stores the layer matrices of m in `type` (quantized from their fp32 values).
void QuantizeLayers(RandomModel& m, GgmlType type) {
  for (LayerWeights& l : m.weights.layers) {
    for (WeightView* v : l.matrices()) {
      const int64_t rb = *RowBytes(type, v->cols);
      std::vector<float>& q = m.storage.emplace_back(static_cast<size_t>(v->rows * rb + 3) / 4);
      auto* dst = reinterpret_cast<uint8_t*>(q.data());
      for (int64_t r = 0; r < v->rows; ++r) {
        QuantizeRow(type, reinterpret_cast<const float*>(v->row(r)), dst + r * rb, v->cols);
      }
      *v = WeightView{type, dst, v->rows, v->cols, rb};
    }
  }
}

// backend.pack_weights: the CPU backend packs the blocks-of-32, BF16, F16 and F32 matrices where
// its level reads them (and says how many bytes; off: none), and its logits stay as close to the
// dequantized fp32 path's as the file-row kernels' do. (Packed and file rows can differ by more
// than fp32 rounding: both quantize the activations to int8, and a last-bit difference upstream can
// move a value across a rounding boundary: Q5_1 here moved one step's logits by 2% of their range,
// with both paths at 2-3% of the fp32 path's.)
TEST(CpuBackendPackedWeights, PackedRowsStayAsCloseToFp32AsFileRows) {
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                        GgmlType::kQ8_0, GgmlType::kBF16, GgmlType::kF16, GgmlType::kF32}) {
    SCOPED_TRACE(TypeName(type));
    auto m = MakeRandomModel(false, false, 0, RopeLayout::kHalves, 11);
    if (type != GgmlType::kF32) QuantizeLayers(*m, type);
    const std::vector<int32_t> tokens = {1, 7, 3, 9, 4, 22, 5, 31, 8, 2, 17, 6};
    cpu::CpuBackendOptions on, off, fp32;
    off.pack_weights = false;
    fp32.max_simd_level = cpu::SimdLevel::kPortable;
    int64_t on_bytes = -1, off_bytes = -1;
    const auto packed = RunBackend(*m, tokens, 8, 3, 4, on, &on_bytes);
    const auto file = RunBackend(*m, tokens, 8, 3, 4, off, &off_bytes);
    const auto ref = RunBackend(*m, tokens, 8, 3, 4, fp32);
    EXPECT_EQ(on_bytes > 0, cpu::mm::ReadsPackedRows(type, cpu::DetectSimdLevel()));
    EXPECT_EQ(off_bytes, 0);
    ASSERT_EQ(packed.size(), ref.size());
    ASSERT_EQ(file.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      float scale = 0.0f;
      for (float v : ref[i]) scale = std::max(scale, std::fabs(v));
      EXPECT_LE(MaxAbsDiff(packed[i], ref[i]), 0.05 * scale) << "output " << i;
      EXPECT_LE(MaxAbsDiff(file[i], ref[i]), 0.05 * scale) << "output " << i;
    }
  }
}

// Below AVX-512 (no packed F16 or F32 kernel) F16 and F32 matrices are copied as they are (into
// huge pages): every output bit for bit what the file's rows give, and the copies' bytes those of
// the layer and output matrices. (From AVX-512 on they are packed, and BF16 ones at AVX512-BF16,
// and sum in another order: the test above.)
TEST(CpuBackendPackedWeights, F16AndF32MatricesAreCopiedAsTheyAre) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
    SCOPED_TRACE(TypeName(type));
    auto m = MakeRandomModel(false, false, 0, RopeLayout::kHalves, 13);
    if (type != GgmlType::kF32) QuantizeLayers(*m, type);
    const auto copied_bytes = [](const WeightView& v) {
      return v.type == GgmlType::kF16 || v.type == GgmlType::kF32 ? v.rows * v.row_bytes : 0;
    };
    int64_t want_bytes = copied_bytes(m->weights.output);
    for (LayerWeights& l : m->weights.layers) {
      for (WeightView* v : l.matrices()) want_bytes += copied_bytes(*v);
    }
    const std::vector<int32_t> tokens = {1, 7, 3, 9, 4, 22, 5, 31, 8, 2, 17, 6};
    cpu::CpuBackendOptions on, off;
    on.max_simd_level = off.max_simd_level = cpu::SimdLevel::kAvx2;
    off.pack_weights = false;
    int64_t on_bytes = -1, off_bytes = -1;
    const auto copied = RunBackend(*m, tokens, 8, 3, 4, on, &on_bytes);
    const auto file = RunBackend(*m, tokens, 8, 3, 4, off, &off_bytes);
    EXPECT_EQ(on_bytes, want_bytes);
    EXPECT_EQ(off_bytes, 0);
    ASSERT_EQ(copied.size(), file.size());
    for (size_t i = 0; i < file.size(); ++i) EXPECT_EQ(copied[i], file[i]) << "output " << i;
  }
}

// backend.spin_us: on the spinning thread team (the default) and in the oneTBB arena (0) every
// logit is the same bits, through prefill chunks and decode steps, for file and packed rows.
TEST(CpuBackendThreadTeam, TeamAndTbbGiveTheSameBits) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kBF16}) {
    SCOPED_TRACE(TypeName(type));
    auto m = MakeRandomModel(false, false, 0, RopeLayout::kHalves, 17);
    if (type != GgmlType::kF32) QuantizeLayers(*m, type);
    const std::vector<int32_t> tokens = {1, 7, 3, 9, 4, 22, 5, 31, 8, 2, 17, 6};
    cpu::CpuBackendOptions team, tbb;
    team.threads = tbb.threads = 2;
    tbb.spin_us = 0;
    const auto on_team = RunBackend(*m, tokens, 8, 3, 4, team);
    const auto on_tbb = RunBackend(*m, tokens, 8, 3, 4, tbb);
    ASSERT_EQ(on_team.size(), on_tbb.size());
    ASSERT_FALSE(on_tbb.empty());
    for (size_t i = 0; i < on_tbb.size(); ++i) EXPECT_EQ(on_team[i], on_tbb[i]) << "output " << i;
  }
}

// Two backends on one shared team (as a draft model's and its target's), stepping in turn: each
// gives the bits it gives alone.
TEST(CpuBackendThreadTeam, BackendsSharingATeamKeepTheirBits) {
  auto a = MakeRandomModel(false, false, 0, RopeLayout::kHalves, 19);
  auto b = MakeRandomModel(true, false, 0, RopeLayout::kHalves, 23);
  QuantizeLayers(*b, GgmlType::kQ8_0);
  const std::vector<int32_t> tokens = {1, 7, 3, 9, 4, 22, 5, 31, 8, 2, 17, 6};
  cpu::CpuBackendOptions options;
  options.threads = 2;
  const auto alone_a = RunBackend(*a, tokens, 12, 12, 4, options);
  const auto alone_b = RunBackend(*b, tokens, 12, 12, 4, options);
  const std::shared_ptr<cpu::ThreadTeam> team = cpu::MakeThreadTeam(options);
  KvCacheConfig kv = SmallF32Kv();
  std::vector<std::unique_ptr<cpu::CpuBackend>> backends;
  for (const RandomModel* m : {a.get(), b.get()}) {
    auto created =
        cpu::CpuBackend::Create(m->config, m->weights, kv, StepLimits{32, 1}, options, team);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    backends.push_back(std::move(created).value());
  }
  // Alternating steps: the whole prompt at once, as RunBackend(prompt 12, chunk 12) does.
  std::vector<int32_t> table;
  for (int32_t i = 0; i < 4; ++i) table.push_back(i);
  std::vector<int32_t> slots;
  for (int32_t i = 0; i < 12; ++i) slots.push_back(SlotForPosition(table, 4, i));
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < backends.size(); ++i) {
      const RandomModel& m = i == 0 ? *a : *b;
      std::vector<float> logits(static_cast<size_t>(m.config.vocab_size));
      StepSequence seq{0, 12, 0, table, false, true};
      StepBatch batch{tokens, slots, std::span(&seq, 1), {}};
      ASSERT_TRUE(backends[i]->Execute(batch, logits).ok());
      EXPECT_EQ(logits, (i == 0 ? alone_a : alone_b).front()) << "backend " << i;
    }
  }
}

// The CPU backend refuses every malformed batch with INVALID_ARGUMENT naming the field (the
// checks the engine tests' fake backend shares), writes nothing, and then still serves.
TEST(CpuBackendValidation, MalformedBatchesAreRejected) {
  auto m = MakeRandomModel(false, false, 0, RopeLayout::kHalves, 7);
  const KvCacheConfig kv = SmallF32Kv();
  auto backend = cpu::CpuBackend::Create(m->config, m->weights, kv, StepLimits{32, 4}, {});
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  Backend& b = **backend;
  const int32_t vocab = b.vocab_size();
  const auto cases = testing::MalformedBatches(b.capabilities(), vocab, 6);
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    std::vector<float> logits(c.logit_rows * vocab);
    const Status st = b.Execute(c.batch(), logits);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.name << ": " << st.ToString();
    EXPECT_NE(st.message().find(c.field), std::string::npos) << c.name << ": " << st.ToString();
  }
  const auto valid = testing::ValidPrefill(6, 4);
  std::vector<float> logits(vocab);
  EXPECT_TRUE(b.Execute(valid.batch(), logits).ok());
}

// Knob-sized allocations are checked first: a step budget whose buffers exceed the machine's
// memory and thousands of threads on a few cores are refused with the key's name.
TEST(CpuBackendValidation, OversizedStepBuffersAndThreadCountsAreRefused) {
  auto m = MakeRandomModel(false, false, 0, RopeLayout::kHalves, 7);
  const KvCacheConfig kv = SmallF32Kv();
  ModelConfig wide = m->config;  // dimensions only: nothing is allocated for it
  wide.n_embd = 1 << 16, wide.n_heads = 512, wide.n_kv_heads = 512, wide.head_dim = 128;
  wide.n_ff = 1 << 18;
  auto big = cpu::CpuBackend::Create(wide, m->weights, kv, StepLimits{1 << 20, 64}, {});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(big.status().message().rfind("engine.max_num_batched_tokens: 1048576 tokens", 0), 0u)
      << big.status().ToString();
  cpu::CpuBackendOptions options;
  options.threads = 4096;
  auto threads = cpu::CpuBackend::Create(m->config, m->weights, kv, StepLimits{32, 4}, options);
  ASSERT_FALSE(threads.ok());
  EXPECT_EQ(threads.status().message().rfind("backend.threads: 4096 exceeds", 0), 0u)
      << threads.status().ToString();
  options.threads = 3;  // a small oversubscription stays allowed
  EXPECT_TRUE(cpu::CpuBackend::Create(m->config, m->weights, kv, StepLimits{32, 4}, options).ok());
}

}  // namespace
}  // namespace pagoda
