// attention_block_tkg against a naive fp64 stage-by-stage reference on randomized decode steps,
// the exact placement of the cache writes, workspace limits, and parity with one decode step of
// cpu::LlamaForward's attention sublayer.
#include "kernels/cpu/attention/attention_block_tkg.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "tests/kernels/cpu/attention/kernel_test_util.h"
#include "tests/reference/llama_forward.h"

namespace pagoda::cpu {
namespace {

using testing::BlockAllocator;
using testing::Chance;
using testing::Normal;
using testing::Pick;
using testing::TestPool;
using testing::Uniform;

// Output tolerance relative to max |ref| per KV dtype (observed worst over the 208 cases: f32
// 4.7e-7, bf16 4.5e-5, f16 2.8e-5, fp8 4.4e-7). Context K/V are the same stored values for
// kernel and reference; only the NEW tokens' K/V are rounded to the cache dtype by each side
// from its own fp32/fp64 value, and an element that rounds differently (rare) costs one storage
// ulp: that is what the bf16/f16/fp8 margins allow for.
double Tolerance(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return 5e-6;
    case KvDtype::kBf16:
    case KvDtype::kF16:
      return 3e-4;
    case KvDtype::kFp8E4m3:
      return 3e-3;
  }
  return 0;
}

WeightView F32View(const std::vector<float>& w, int64_t rows, int64_t cols) {
  WeightView v;
  v.type = GgmlType::kF32;
  v.data = reinterpret_cast<const uint8_t*>(w.data());
  v.rows = rows;
  v.cols = cols;
  v.row_bytes = cols * 4;
  return v;
}

std::vector<float> RandomVec(std::mt19937& rng, int64_t n, float stddev) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = Normal(rng, stddev);
  return v;
}

// A random decode step: config, weights, batch, pool.
struct TkgCase {
  TkgConfig cfg;
  int32_t bs = 0;
  std::vector<float> wq, wk, wv, wqkv, wo, norm, bq, bk, bv, bo, qn0, kn0, qn1, kn1, sinks;
  TkgWeights w;
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttnSeq> seqs;
  std::vector<float> x;
  std::vector<int32_t> positions, slots;
  std::optional<TestPool> pool;
  int64_t n_tokens() const { return static_cast<int64_t>(positions.size()); }
};

void MakeWeights(std::mt19937& rng, TkgCase& c) {
  const TkgConfig& k = c.cfg;
  const int64_t q_dim = int64_t{k.n_heads} * k.head_dim,
                kv_dim = int64_t{k.n_kv_heads} * k.head_dim;
  const float ws = 1.0f / std::sqrt(static_cast<float>(k.hidden));
  c.wq = RandomVec(rng, q_dim * k.hidden, ws);
  c.wk = RandomVec(rng, kv_dim * k.hidden, ws);
  c.wv = RandomVec(rng, kv_dim * k.hidden, ws);
  c.wo = RandomVec(rng, k.hidden * q_dim, 1.0f / std::sqrt(static_cast<float>(q_dim)));
  c.norm = RandomVec(rng, k.hidden, 0.3f);
  for (float& g : c.norm) g += 1.0f;
  c.w.attn_norm = c.norm;
  if (Chance(rng, 0.4)) {
    c.wqkv = c.wq;
    c.wqkv.insert(c.wqkv.end(), c.wk.begin(), c.wk.end());
    c.wqkv.insert(c.wqkv.end(), c.wv.begin(), c.wv.end());
    c.w.wqkv = F32View(c.wqkv, q_dim + 2 * kv_dim, k.hidden);
  } else {
    c.w.wq = F32View(c.wq, q_dim, k.hidden);
    c.w.wk = F32View(c.wk, kv_dim, k.hidden);
    c.w.wv = F32View(c.wv, kv_dim, k.hidden);
  }
  c.w.wo = F32View(c.wo, k.hidden, q_dim);
  if (Chance(rng, 0.3)) {
    c.bq = RandomVec(rng, q_dim, 0.5f);
    c.bk = RandomVec(rng, kv_dim, 0.5f);
    c.bv = RandomVec(rng, kv_dim, 0.5f);
    c.bo = RandomVec(rng, k.hidden, 0.5f);
    c.w.bq = c.bq, c.w.bk = c.bk, c.w.bv = c.bv, c.w.bo = c.bo;
  }
  auto gamma = [&](std::vector<float>& v, std::span<const float>& dst) {
    if (Chance(rng, 0.5)) return;  // no gamma
    v = RandomVec(rng, k.head_dim, 0.2f);
    for (float& g : v) g += 1.0f;
    dst = v;
  };
  if (c.cfg.qk_norm_pre_rope) gamma(c.qn0, c.w.q_norm_pre), gamma(c.kn0, c.w.k_norm_pre);
  if (c.cfg.qk_norm_post_rope) gamma(c.qn1, c.w.q_norm_post), gamma(c.kn1, c.w.k_norm_post);
  if (Chance(rng, 0.3)) c.sinks = RandomVec(rng, k.n_heads, 2.0f), c.w.sinks = c.sinks;
}

TkgConfig RandomConfig(std::mt19937& rng) {
  TkgConfig k;
  k.head_dim = Pick(rng, std::vector<int32_t>{16, 64, 128});
  k.n_kv_heads = Uniform(rng, 1, 2);
  k.n_heads = k.n_kv_heads * Pick(rng, std::vector<int32_t>{1, 2, 4, 8});
  k.hidden = Pick(rng, std::vector<int32_t>{32, 64});
  k.rms_eps = Pick(rng, std::vector<float>{1e-5f, 1e-3f});
  k.qk_norm_pre_rope = Chance(rng, 0.3);
  k.qk_norm_post_rope = Chance(rng, 0.3);
  k.qk_norm_eps = 1e-6f;
  k.rope_dim = Pick(rng, std::vector<int32_t>{0, k.head_dim, k.head_dim / 2});
  k.rope_base = Pick(rng, std::vector<float>{10000.0f, 500000.0f});
  k.rope_layout = Chance(rng, 0.5) ? RopeLayout::kHalves : RopeLayout::kInterleaved;
  if (Chance(rng, 0.3)) k.softmax_scale = std::uniform_real_distribution<float>(0.05f, 0.3f)(rng);
  k.sliding_window = Chance(rng, 0.25) ? Uniform(rng, 1, 100) : 0;
  return k;
}

int32_t RandomCtx(std::mt19937& rng, int32_t bs) {
  switch (Uniform(rng, 0, 5)) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return bs * Uniform(rng, 1, std::max(1, 160 / bs));
    case 3:
      return Uniform(rng, 520, 760);  // long enough for flash-decoding splits
    default:
      return Uniform(rng, 2, 150);
  }
}

// Batch, tables, slots and the pool (context filled, everything else NaN-poisoned).
void MakeBatch(std::mt19937& rng, KvDtype dtype, TkgCase& c) {
  const TkgConfig& k = c.cfg;
  c.bs = Pick(rng, std::vector<int32_t>{1, 4, 16, 32, 128});
  const int n_seqs = Uniform(rng, 1, 4);
  std::vector<int32_t> ctx(n_seqs), len(n_seqs);
  int32_t blocks = 1;
  for (int i = 0; i < n_seqs; ++i) {
    ctx[i] = RandomCtx(rng, c.bs);
    len[i] = Uniform(rng, 1, 4);
    blocks += (ctx[i] + len[i] + c.bs - 1) / c.bs;
  }
  const bool fp8 = dtype == KvDtype::kFp8E4m3;
  const float ks = fp8 ? std::uniform_real_distribution<float>(0.5f, 8.0f)(rng) : 1.0f;
  const float vs = fp8 ? std::uniform_real_distribution<float>(0.5f, 8.0f)(rng) : 1.0f;
  c.pool.emplace(dtype, blocks, k.n_kv_heads, c.bs, k.head_dim, ks, vs);
  for (int32_t b = 0; b < blocks; ++b) c.pool->PoisonBlock(b);
  BlockAllocator alloc(blocks, rng);
  const bool holes = Chance(rng, 0.15);
  c.tables.resize(n_seqs);
  int32_t row = 0;
  for (int i = 0; i < n_seqs; ++i) {
    for (int32_t j = 0; j < (ctx[i] + len[i] + c.bs - 1) / c.bs; ++j) {
      const int32_t blk = alloc.Take();
      c.tables[i].push_back(holes && Chance(rng, 0.3) ? -1 : blk);
      for (int32_t o = 0; o < c.bs && c.tables[i].back() >= 0 && j * c.bs + o < ctx[i]; ++o) {
        for (int32_t h = 0; h < k.n_kv_heads; ++h) {
          const int64_t e = c.pool->view.offset(blk, h, o);
          for (int32_t x = 0; x < k.head_dim; ++x) {
            c.pool->Set(false, e + x, Normal(rng));
            c.pool->Set(true, e + x, Normal(rng));
          }
        }
      }
    }
    if (Chance(rng, 0.3)) c.tables[i].push_back(-1);  // inactive tail entry
    for (int32_t s = 0; s < len[i]; ++s) {
      const int32_t pos = ctx[i] + s;
      const int32_t blk = c.tables[i][pos / c.bs];
      int32_t slot = blk < 0 ? -1 : blk * c.bs + pos % c.bs;
      if (Chance(rng, 0.1)) slot = Chance(rng, 0.5) ? -1 : blocks * c.bs;  // skipped writes
      c.positions.push_back(pos);
      c.slots.push_back(slot);
    }
    c.seqs.push_back({row, len[i], ctx[i], c.tables[i]});
    row += len[i];
  }
  c.x = RandomVec(rng, row * k.hidden, 1.0f);
}

// ---- fp64 reference -------------------------------------------------------------------------

using Vec = std::vector<double>;

Vec MatVec(const std::vector<float>& w, int64_t rows, int64_t cols, const Vec& x,
           std::span<const float> bias) {
  Vec y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < cols; ++i) y[r] += double{w[r * cols + i]} * x[i];
    if (!bias.empty()) y[r] += bias[r];
  }
  return y;
}

void NormHeads(Vec& v, int32_t n_heads, int32_t d, std::span<const float> gamma, double eps) {
  for (int32_t h = 0; h < n_heads; ++h) {
    double ss = 0;
    for (int32_t i = 0; i < d; ++i) ss += v[h * d + i] * v[h * d + i];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int32_t i = 0; i < d; ++i) v[h * d + i] *= inv * (gamma.empty() ? 1.0 : gamma[i]);
  }
}

void Rope(Vec& v, int32_t n_heads, const TkgConfig& k, int64_t pos) {
  const int32_t half = k.rope_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    const double theta = pos * std::pow(double{k.rope_base}, -2.0 * i / k.rope_dim);
    const double cs = std::cos(theta), sn = std::sin(theta);
    for (int32_t h = 0; h < n_heads; ++h) {
      const int64_t a = h * k.head_dim + (k.rope_layout == RopeLayout::kInterleaved ? 2 * i : i);
      const int64_t b =
          h * k.head_dim + (k.rope_layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half);
      const double x0 = v[a], x1 = v[b];
      v[a] = x0 * cs - x1 * sn;
      v[b] = x0 * sn + x1 * cs;
    }
  }
}

struct RefStep {
  std::vector<Vec> q, k, v;  // per token; k, v rounded to the cache dtype
  std::vector<Vec> out;      // per token [hidden]
};

void RefProject(const TkgCase& c, RefStep& r) {
  const TkgConfig& k = c.cfg;
  const int64_t q_dim = int64_t{k.n_heads} * k.head_dim,
                kv_dim = int64_t{k.n_kv_heads} * k.head_dim;
  for (int64_t t = 0; t < c.n_tokens(); ++t) {
    Vec xn(k.hidden);
    double ss = 0;
    for (int32_t i = 0; i < k.hidden; ++i)
      ss += double{c.x[t * k.hidden + i]} * c.x[t * k.hidden + i];
    const double inv = 1.0 / std::sqrt(ss / k.hidden + k.rms_eps);
    for (int32_t i = 0; i < k.hidden; ++i) xn[i] = c.x[t * k.hidden + i] * inv * c.norm[i];
    Vec q = MatVec(c.wq, q_dim, k.hidden, xn, c.w.bq);
    Vec kk = MatVec(c.wk, kv_dim, k.hidden, xn, c.w.bk);
    Vec v = MatVec(c.wv, kv_dim, k.hidden, xn, c.w.bv);
    if (k.qk_norm_pre_rope) {
      NormHeads(q, k.n_heads, k.head_dim, c.w.q_norm_pre, k.qk_norm_eps);
      NormHeads(kk, k.n_kv_heads, k.head_dim, c.w.k_norm_pre, k.qk_norm_eps);
    }
    Rope(q, k.n_heads, k, c.positions[t]);
    Rope(kk, k.n_kv_heads, k, c.positions[t]);
    if (k.qk_norm_post_rope) {
      NormHeads(q, k.n_heads, k.head_dim, c.w.q_norm_post, k.qk_norm_eps);
      NormHeads(kk, k.n_kv_heads, k.head_dim, c.w.k_norm_post, k.qk_norm_eps);
    }
    for (int64_t i = 0; i < kv_dim; ++i) {
      float a = static_cast<float>(kk[i]), b = static_cast<float>(v[i]);
      kv::RoundTripRow(c.pool->view.dtype, c.pool->view.k_scale, &a, 1);
      kv::RoundTripRow(c.pool->view.dtype, c.pool->view.v_scale, &b, 1);
      kk[i] = a, v[i] = b;
    }
    r.q.push_back(q), r.k.push_back(kk), r.v.push_back(v);
  }
}

// Attention of token (seq b, new index s) head h over context + new tokens <= s.
Vec RefAttend(const TkgCase& c, const TestPool& pool, const RefStep& r, const AttnSeq& a, int32_t s,
              int32_t h) {
  const TkgConfig& k = c.cfg;
  const int32_t d = k.head_dim, kvh = h / (k.n_heads / k.n_kv_heads);
  const double scale = k.softmax_scale ? *k.softmax_scale : 1.0 / std::sqrt(static_cast<double>(d));
  const Vec& q = r.q[a.q_start + s];
  const int64_t qpos = int64_t{a.ctx_len} + s;
  auto visible = [&](int64_t kp) { return k.sliding_window == 0 || kp > qpos - k.sliding_window; };
  std::vector<double> sc;
  std::vector<Vec> vals;
  for (int32_t p = 0; p < a.ctx_len; ++p) {
    if (a.block_table[p / c.bs] < 0 || !visible(p)) continue;
    const int64_t e = pool.view.offset(a.block_table[p / c.bs], kvh, p % c.bs);
    double dot = 0;
    Vec vv(d);
    for (int32_t x = 0; x < d; ++x)
      dot += q[h * d + x] * pool.Get(false, e + x), vv[x] = pool.Get(true, e + x);
    sc.push_back(dot * scale), vals.push_back(vv);
  }
  for (int32_t j = 0; j <= s; ++j) {
    if (!visible(int64_t{a.ctx_len} + j)) continue;
    const Vec& kk = r.k[a.q_start + j];
    double dot = 0;
    for (int32_t x = 0; x < d; ++x) dot += q[h * d + x] * kk[kvh * d + x];
    sc.push_back(dot * scale);
    vals.emplace_back(r.v[a.q_start + j].begin() + kvh * d,
                      r.v[a.q_start + j].begin() + (kvh + 1) * d);
  }
  double m = c.sinks.empty() ? -INFINITY : c.sinks[h];
  for (double x : sc) m = std::max(m, x);
  Vec o(d, 0.0);
  if (m == -INFINITY) return o;
  double den = c.sinks.empty() ? 0.0 : std::exp(c.sinks[h] - m);
  for (double x : sc) den += std::exp(x - m);
  for (size_t i = 0; i < sc.size(); ++i) {
    for (int32_t x = 0; x < d; ++x) o[x] += std::exp(sc[i] - m) / den * vals[i][x];
  }
  return o;
}

// `pool` must be the cache as it was BEFORE the step.
RefStep Reference(const TkgCase& c, const TestPool& pool) {
  RefStep r;
  RefProject(c, r);
  const TkgConfig& k = c.cfg;
  const int64_t q_dim = int64_t{k.n_heads} * k.head_dim;
  r.out.resize(c.n_tokens());
  for (const AttnSeq& a : c.seqs) {
    for (int32_t s = 0; s < a.q_len; ++s) {
      Vec attn(q_dim);
      for (int32_t h = 0; h < k.n_heads; ++h) {
        const Vec o = RefAttend(c, pool, r, a, s, h);
        std::copy(o.begin(), o.end(), attn.begin() + int64_t{h} * k.head_dim);
      }
      r.out[a.q_start + s] = MatVec(c.wo, k.hidden, q_dim, attn, c.w.bo);
    }
  }
  return r;
}

TkgWorkspace MakeWorkspace(const TkgConfig& k, int32_t max_tokens, int32_t max_seqs,
                           int32_t max_per_seq, ThreadTeam* team = nullptr) {
  TkgWorkspaceDims dims;
  dims.team = team;
  dims.max_tokens = max_tokens;
  dims.max_seqs = max_seqs;
  dims.max_tokens_per_seq = max_per_seq;
  dims.hidden = k.hidden;
  dims.n_heads = k.n_heads;
  dims.n_kv_heads = k.n_kv_heads;
  dims.head_dim = k.head_dim;
  auto ws = TkgWorkspace::Create(dims);
  EXPECT_TRUE(ws.ok()) << ws.status().ToString();
  return std::move(ws).value();
}

TkgArgs MakeArgs(TkgCase& c, std::vector<float>& out) {
  TkgArgs a;
  a.seqs = c.seqs;
  a.x = c.x;
  a.positions = c.positions;
  a.slots = c.slots;
  a.kv = c.pool->view;
  a.out = out;
  return a;
}

// Checks the bytes of every cache slot: written slots hold the reference K/V (to one storage
// ulp), every other byte is unchanged.
void CheckCacheWrites(const TkgCase& c, const TestPool& before, const RefStep& r) {
  const TestPool& after = *c.pool;
  const int32_t d = c.cfg.head_dim, n_kv = c.cfg.n_kv_heads;
  const int64_t slots = after.view.num_slots();
  std::vector<int64_t> writer(slots, -1);
  for (int64_t t = 0; t < c.n_tokens(); ++t) {
    if (c.slots[t] >= 0 && c.slots[t] < slots) writer[c.slots[t]] = t;
  }
  // One storage ulp (relative), plus the fp8 subnormal spacing / scale (absolute).
  const KvDtype dt = after.view.dtype;
  const double ulp = dt == KvDtype::kF32    ? 1e-5
                     : dt == KvDtype::kBf16 ? 1.0 / 128
                     : dt == KvDtype::kF16  ? 1.0 / 1024
                                            : 1.0 / 8;
  const double abs_slack = dt == KvDtype::kFp8E4m3 ? 1.0 / 512 / 0.5 : 1e-6;
  for (int64_t slot = 0; slot < slots; ++slot) {
    for (int32_t h = 0; h < n_kv; ++h) {
      const int64_t e = after.view.offset(slot / c.bs, h, static_cast<int32_t>(slot % c.bs));
      for (int32_t x = 0; x < d; ++x) {
        for (bool is_v : {false, true}) {
          const double got = after.Get(is_v, e + x), old = before.Get(is_v, e + x);
          if (writer[slot] < 0) {
            ASSERT_TRUE(got == old || (std::isnan(got) && std::isnan(old))) << "slot " << slot;
            continue;
          }
          const double want = (is_v ? r.v : r.k)[writer[slot]][h * d + x];
          ASSERT_NEAR(got, want, ulp * std::abs(want) + abs_slack) << "slot " << slot;
        }
      }
    }
  }
}

class AttentionBlockTkgRandomTest : public ::testing::TestWithParam<KvDtype> {};

TEST_P(AttentionBlockTkgRandomTest, MatchesFp64ReferenceAndWritesSlots) {
  const KvDtype dtype = GetParam();
  ThreadTeam team(Concurrency(nullptr));
  for (int seed = 0; seed < 52; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(2000 + seed * 13 + static_cast<int>(dtype));
    TkgCase c;
    c.cfg = RandomConfig(rng);
    MakeWeights(rng, c);
    MakeBatch(rng, dtype, c);
    const TestPool before = *c.pool;
    TkgWorkspace ws = MakeWorkspace(c.cfg, 16, 4, 4);
    std::vector<float> out(c.x.size(), 0.0f);
    const Status st = AttentionBlockTkg(c.cfg, c.w, MakeArgs(c, out), ws);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const RefStep r = Reference(c, before);
    double scale = 1e-6, worst = 0;
    for (const Vec& o : r.out) {
      for (double v : o) scale = std::max(scale, std::abs(v));
    }
    for (int64_t t = 0; t < c.n_tokens(); ++t) {
      for (int32_t i = 0; i < c.cfg.hidden; ++i) {
        ASSERT_TRUE(std::isfinite(out[t * c.cfg.hidden + i]));
        worst = std::max(worst, std::abs(out[t * c.cfg.hidden + i] - r.out[t][i]) / scale);
      }
    }
    EXPECT_LE(worst, Tolerance(dtype))
        << "d " << c.cfg.head_dim << " heads " << c.cfg.n_heads << "/" << c.cfg.n_kv_heads << " bs "
        << c.bs << " window " << c.cfg.sliding_window << " rope " << c.cfg.rope_dim;
    CheckCacheWrites(c, before, r);
    // The same step on a ThreadTeam as large as the arena (the same task plan): the same bits.
    std::copy(before.k.begin(), before.k.end(), c.pool->k.begin());  // the view keeps its buffers
    std::copy(before.v.begin(), before.v.end(), c.pool->v.begin());
    TkgWorkspace team_ws = MakeWorkspace(c.cfg, 16, 4, 4, &team);
    std::vector<float> team_out(c.x.size(), 0.0f);
    ASSERT_TRUE(AttentionBlockTkg(c.cfg, c.w, MakeArgs(c, team_out), team_ws).ok());
    EXPECT_EQ(0, std::memcmp(out.data(), team_out.data(), out.size() * sizeof(float)));
    CheckCacheWrites(c, before, r);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, AttentionBlockTkgRandomTest,
                         ::testing::ValuesIn(testing::AllDtypes()),
                         [](const auto& info) { return std::string(KvDtypeName(info.param)); });

// The same 208 random decode steps with the attention kernels capped at each SIMD level below
// the CPU's best (the uncapped run above covers the best): every level against the reference.
class AttentionBlockTkgSimdLevelTest
    : public ::testing::TestWithParam<std::tuple<KvDtype, SimdLevel>> {};

TEST_P(AttentionBlockTkgSimdLevelTest, MatchesFp64Reference) {
  const auto [dtype, level] = GetParam();
  if (level >= DetectSimdLevel()) GTEST_SKIP() << "covered by the uncapped test";
  for (int seed = 0; seed < 52; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(2000 + seed * 13 + static_cast<int>(dtype));
    TkgCase c;
    c.cfg = RandomConfig(rng);
    MakeWeights(rng, c);
    MakeBatch(rng, dtype, c);
    const TestPool before = *c.pool;
    TkgWorkspaceDims dims;
    dims.max_tokens = 16;
    dims.max_seqs = 4;
    dims.max_tokens_per_seq = 4;
    dims.hidden = c.cfg.hidden;
    dims.n_heads = c.cfg.n_heads;
    dims.n_kv_heads = c.cfg.n_kv_heads;
    dims.head_dim = c.cfg.head_dim;
    dims.max_simd = level;
    auto ws = TkgWorkspace::Create(dims);
    ASSERT_TRUE(ws.ok());
    std::vector<float> out(c.x.size(), 0.0f);
    ASSERT_TRUE(AttentionBlockTkg(c.cfg, c.w, MakeArgs(c, out), *ws).ok());
    const RefStep r = Reference(c, before);
    double scale = 1e-6, worst = 0;
    for (const Vec& o : r.out) {
      for (double v : o) scale = std::max(scale, std::abs(v));
    }
    for (int64_t t = 0; t < c.n_tokens(); ++t) {
      for (int32_t i = 0; i < c.cfg.hidden; ++i) {
        ASSERT_TRUE(std::isfinite(out[t * c.cfg.hidden + i]));
        worst = std::max(worst, std::abs(out[t * c.cfg.hidden + i] - r.out[t][i]) / scale);
      }
    }
    EXPECT_LE(worst, Tolerance(dtype)) << "d " << c.cfg.head_dim;
  }
}

INSTANTIATE_TEST_SUITE_P(LowerLevels, AttentionBlockTkgSimdLevelTest,
                         ::testing::Combine(::testing::ValuesIn(testing::AllDtypes()),
                                            ::testing::Values(SimdLevel::kPortable,
                                                              SimdLevel::kAvx2)),
                         [](const auto& info) {
                           return std::string(KvDtypeName(std::get<0>(info.param))) + "_" +
                                  SimdLevelName(std::get<1>(info.param));
                         });

// A tiny fixed step: f32 cache, 2 kv heads, block size 4, two sequences of two tokens with slots
// {5, -1} and {9, num_slots}: exactly slots 5 and 9 change, in K and V of both heads.
TEST(AttentionBlockTkgTest, CacheWriteLandsExactlyAtSlotMapping) {
  std::mt19937 rng(42);
  TkgCase c;
  c.cfg.hidden = 32;
  c.cfg.n_heads = 4;
  c.cfg.n_kv_heads = 2;
  c.cfg.head_dim = 16;
  c.cfg.rms_eps = 1e-5f;
  c.cfg.rope_dim = 16;
  MakeWeights(rng, c);
  c.bs = 4;
  c.pool.emplace(KvDtype::kF32, 4, 2, 4, 16);
  for (int32_t b = 0; b < 4; ++b) c.pool->FillBlock(b, rng, 1.0f);
  c.tables = {{0, 1}, {3, 2}};
  c.seqs = {{0, 2, 5, c.tables[0]}, {2, 2, 1, c.tables[1]}};
  c.positions = {5, 6, 1, 2};
  c.slots = {5, -1, 9, 16};
  c.x = RandomVec(rng, 4 * 32, 1.0f);
  const TestPool before = *c.pool;
  TkgWorkspace ws = MakeWorkspace(c.cfg, 4, 2, 2);
  std::vector<float> out(c.x.size());
  ASSERT_TRUE(AttentionBlockTkg(c.cfg, c.w, MakeArgs(c, out), ws).ok());
  const RefStep r = Reference(c, before);
  int changed = 0;
  for (int64_t slot = 0; slot < 16; ++slot) {
    for (int32_t h = 0; h < 2; ++h) {
      const int64_t e = c.pool->view.offset(slot / 4, h, static_cast<int32_t>(slot % 4));
      for (int32_t x = 0; x < 16; ++x) {
        for (bool is_v : {false, true}) {
          const double got = c.pool->Get(is_v, e + x);
          if (slot != 5 && slot != 9) {
            ASSERT_EQ(got, before.Get(is_v, e + x)) << "slot " << slot;
            continue;
          }
          ++changed;
          const int64_t t = slot == 5 ? 0 : 2;
          EXPECT_NEAR(got, (is_v ? r.v : r.k)[t][h * 16 + x], 1e-5);
        }
      }
    }
  }
  EXPECT_EQ(changed, 2 * 2 * 16 * 2);
}

TEST(AttentionBlockTkgTest, RejectsWhatTheWorkspaceCannotHoldAndWritesNothing) {
  std::mt19937 rng(9);
  TkgCase c;
  c.cfg = RandomConfig(rng);
  c.cfg.sliding_window = 0;
  MakeWeights(rng, c);
  MakeBatch(rng, KvDtype::kF32, c);
  const TestPool before = *c.pool;
  TkgWorkspace small = MakeWorkspace(c.cfg, 1, 1, 1);
  std::vector<float> out(c.x.size(), 3.0f);
  const Status st = AttentionBlockTkg(c.cfg, c.w, MakeArgs(c, out), small);
  if (c.n_tokens() > 1) {
    EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
    for (float x : out) ASSERT_EQ(x, 3.0f);
    EXPECT_EQ(c.pool->k, before.k);
    EXPECT_EQ(c.pool->v, before.v);
  }
  TkgWorkspace ws = MakeWorkspace(c.cfg, 16, 4, 4);
  TkgConfig bad = c.cfg;
  bad.rms_eps = 0.0f;
  EXPECT_EQ(AttentionBlockTkg(bad, c.w, MakeArgs(c, out), ws).code(), StatusCode::kInvalidArgument);
  TkgWeights no_wo = c.w;
  no_wo.wo = WeightView{};
  EXPECT_EQ(AttentionBlockTkg(c.cfg, no_wo, MakeArgs(c, out), ws).code(),
            StatusCode::kInvalidArgument);
}

// ---- parity with LlamaForward ---------------------------------------------------------------

// A one-layer model whose MLP adds exactly 0 (w_down = 0) and whose LM head is the identity
// (vocab = n_embd, output_norm = 1): LlamaForward's logits are RmsNorm(x + attention(x)), with
// x the token embedding, which we rebuild from the TKG kernel's output.
struct TinyModel {
  ModelConfig cfg;
  std::vector<float> embd, wq, wk, wv, wo, gate, up, down, identity;
  ModelWeights weights;
};

void MakeTinyModel(std::mt19937& rng, TinyModel& m) {
  ModelConfig& c = m.cfg;
  c.architecture = "llama";
  c.n_embd = 64;
  c.n_layers = 1;
  c.head_dim = 16;
  c.n_kv_heads = 2;
  c.n_heads = 8;
  c.n_ff = 32;
  c.vocab_size = 64;
  c.context_length = 128;
  c.rms_eps = 1e-5f;
  c.rope_dim = 16;
  c.rope_theta = 10000.0f;
  c.rope_layout = Chance(rng, 0.5) ? RopeLayout::kHalves : RopeLayout::kInterleaved;
  m.embd = RandomVec(rng, 64 * 64, 1.0f);
  m.wq = RandomVec(rng, c.q_dim() * 64, 0.3f);
  m.wk = RandomVec(rng, c.kv_dim() * 64, 0.3f);
  m.wv = RandomVec(rng, c.kv_dim() * 64, 0.3f);
  m.wo = RandomVec(rng, 64 * c.q_dim(), 0.1f);
  m.gate = RandomVec(rng, 32 * 64, 0.1f);
  m.up = m.gate;
  m.down.assign(64 * 32, 0.0f);
  m.identity.assign(64 * 64, 0.0f);
  for (int i = 0; i < 64; ++i) m.identity[i * 64 + i] = 1.0f;
  m.weights.token_embd = F32View(m.embd, 64, 64);
  m.weights.output = F32View(m.identity, 64, 64);
  m.weights.output_norm.assign(64, 1.0f);
  LayerWeights l;
  l.attn_norm = RandomVec(rng, 64, 0.2f);
  for (float& g : l.attn_norm) g += 1.0f;
  l.wq = F32View(m.wq, c.q_dim(), 64);
  l.wk = F32View(m.wk, c.kv_dim(), 64);
  l.wv = F32View(m.wv, c.kv_dim(), 64);
  l.wo = F32View(m.wo, 64, c.q_dim());
  l.ffn_norm.assign(64, 1.0f);
  l.w_gate = F32View(m.gate, 32, 64);
  l.w_up = F32View(m.up, 32, 64);
  l.w_down = F32View(m.down, 64, 32);
  m.weights.layers.push_back(l);
}

TkgConfig TkgConfigFor(const ModelConfig& mc) {
  TkgConfig k;
  k.hidden = mc.n_embd;
  k.n_heads = mc.n_heads;
  k.n_kv_heads = mc.n_kv_heads;
  k.head_dim = mc.head_dim;
  k.rms_eps = mc.rms_eps;
  k.rope_dim = mc.rope_dim;
  k.rope_base = mc.rope_theta;
  k.rope_layout = mc.rope_layout;
  return k;
}

// The TKG block against LlamaForward on a one-layer model; `scaled` adds Llama 3 RoPE scaling,
// passed to the kernel as the model's RopeInvFreq table.
void ExpectLlamaForwardDecodeSteps(bool scaled) {
  std::mt19937 rng(77);
  TinyModel m;
  MakeTinyModel(rng, m);
  if (scaled) {
    m.cfg.rope_scaling = RopeScaling::kLlama3;
    m.cfg.rope_scaling_factor = 8.0f;
    m.cfg.rope_original_context = 32;
  }
  const ModelConfig& mc = m.cfg;
  LlamaForward fwd(mc, m.weights, 128);
  const std::vector<double> inv_freq = RopeInvFreq(mc);
  TkgConfig k = TkgConfigFor(mc);
  if (scaled) k.rope_inv_freq = inv_freq;
  const LayerWeights& l = m.weights.layers[0];
  TkgWeights w;
  w.attn_norm = l.attn_norm;
  w.wq = l.wq, w.wk = l.wk, w.wv = l.wv, w.wo = l.wo;
  TestPool pool(KvDtype::kF32, 12, mc.n_kv_heads, 4, mc.head_dim);
  const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 1, 3, 10, 4};  // shuffled
  TkgWorkspace ws = MakeWorkspace(k, 4, 1, 4);
  int32_t ctx = 0;
  // 30 single-token decode steps, then steps of 3 and 4 tokens.
  std::vector<int32_t> step_sizes(30, 1);
  step_sizes.push_back(3);
  step_sizes.push_back(4);
  for (int32_t n : step_sizes) {
    std::vector<int32_t> tokens, positions, slots;
    std::vector<float> x;
    for (int32_t s = 0; s < n; ++s) {
      tokens.push_back(Uniform(rng, 0, 63));
      positions.push_back(ctx + s);
      slots.push_back(table[(ctx + s) / 4] * 4 + (ctx + s) % 4);
      x.insert(x.end(), m.embd.begin() + tokens.back() * 64,
               m.embd.begin() + tokens.back() * 64 + 64);
    }
    auto logits = fwd.Forward(tokens, /*all_logits=*/true);
    ASSERT_TRUE(logits.ok());
    const std::vector<AttnSeq> seqs = {{0, n, ctx, table}};
    std::vector<float> out(x.size());
    TkgArgs a{seqs, x, positions, slots, pool.view, out};
    ASSERT_TRUE(AttentionBlockTkg(k, w, a, ws).ok());
    for (int32_t s = 0; s < n; ++s) {
      double ss = 0;
      std::vector<double> y(64);
      for (int i = 0; i < 64; ++i)
        y[i] = double{x[s * 64 + i]} + out[s * 64 + i], ss += y[i] * y[i];
      const double inv = 1.0 / std::sqrt(ss / 64 + mc.rms_eps);
      for (int i = 0; i < 64; ++i) {
        ASSERT_NEAR((*logits)[s * 64 + i], y[i] * inv, 2e-5) << "ctx " << ctx << " s " << s;
      }
    }
    ctx += n;
  }
}

TEST(AttentionBlockTkgTest, ReproducesLlamaForwardDecodeSteps) {
  ExpectLlamaForwardDecodeSteps(false);
}

TEST(AttentionBlockTkgTest, ReproducesLlamaForwardDecodeStepsWithRopeScaling) {
  ExpectLlamaForwardDecodeSteps(true);
}

TEST(AttentionBlockTkgTest, RejectsARopeTableOfTheWrongSize) {
  std::mt19937 rng(78);
  TinyModel m;
  MakeTinyModel(rng, m);
  TkgConfig k = TkgConfigFor(m.cfg);
  const std::vector<double> table(7, 1.0);  // rope_dim / 2 is 8
  k.rope_inv_freq = table;
  const LayerWeights& l = m.weights.layers[0];
  TkgWeights w;
  w.attn_norm = l.attn_norm;
  w.wq = l.wq, w.wk = l.wk, w.wv = l.wv, w.wo = l.wo;
  TestPool pool(KvDtype::kF32, 4, 2, 4, 16);
  TkgWorkspace ws = MakeWorkspace(k, 4, 1, 4);
  const std::vector<int32_t> table_ids = {0}, positions = {0}, slots = {0};
  const std::vector<AttnSeq> seqs = {{0, 1, 0, table_ids}};
  std::vector<float> x(64, 0.5f), out(64);
  TkgArgs a{seqs, x, positions, slots, pool.view, out};
  const Status st = AttentionBlockTkg(k, w, a, ws);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("rope_inv_freq"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::cpu
