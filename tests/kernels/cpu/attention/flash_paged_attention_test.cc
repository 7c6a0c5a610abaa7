// flash_paged_attention against a naive fp64 reference on randomized varlen batches, plus the
// equivalence with the dense-mask formulation of docs/seed-kernels.md 1.3/1.4 and input errors.
#include "kernels/cpu/attention/flash_paged_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "tests/kernels/cpu/attention/kernel_test_util.h"

namespace pagoda::cpu {
namespace {

using testing::BlockAllocator;
using testing::Chance;
using testing::Normal;
using testing::Pick;
using testing::TestPool;
using testing::Uniform;

// Tolerance per KV dtype on |out - ref| / (1 + |ref|). The reference reads the same stored
// (quantized) K/V values and the new tokens' K/V are fp32 inputs, so the only difference is fp32
// vs fp64 arithmetic and the bound is the same for every dtype (observed worst over the 208
// cases: f32 7.4e-7, bf16 9.8e-7, f16 1.1e-6, fp8 1.3e-6).
double Tolerance(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
    case KvDtype::kBf16:
    case KvDtype::kF16:
      return 1e-5;
    case KvDtype::kFp8E4m3:
      return 1e-5;
  }
  return 0;
}

struct SeqSpec {
  int32_t ctx_len = 0;
  int32_t q_len = 0;
  std::vector<int32_t> table;
  std::vector<bool> hole;  // per logical block: table entry set to -1
};

struct Case {
  int32_t d = 0, g = 0, n_kv = 0, bs = 0, n_heads = 0;
  KvDtype dtype = KvDtype::kF32;
  std::vector<SeqSpec> seqs;
  std::vector<AttnSeq> attn_seqs;
  int32_t window = 0;
  std::optional<float> scale;
  std::vector<float> sinks;
  bool context_only = false;
  int32_t n_rows = 0;
  std::vector<float> q, k, v;
};

int32_t RandomCtx(std::mt19937& rng, int32_t bs) {
  switch (Uniform(rng, 0, 4)) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return bs * Uniform(rng, 1, std::max(1, 192 / bs));  // block multiple
    default:
      return Uniform(rng, 2, 200);  // ragged: the chunk starts mid-block
  }
}

// Random shapes and metadata; fills `pool` (poisoning every element no table entry reaches).
Case MakeCase(std::mt19937& rng, KvDtype dtype, std::optional<TestPool>& pool) {
  Case c;
  c.d = Pick(rng, std::vector<int32_t>{16, 64, 128});
  c.g = Pick(rng, std::vector<int32_t>{1, 2, 4, 8});
  c.n_kv = Uniform(rng, 1, 2);
  c.bs = Pick(rng, std::vector<int32_t>{1, 4, 16, 32, 128});
  c.n_heads = c.g * c.n_kv;
  c.dtype = dtype;
  const int n_seqs = Uniform(rng, 1, 4);
  const bool holes = Chance(rng, 0.2);
  int32_t total_blocks = 2;  // two spare poisoned blocks
  for (int i = 0; i < n_seqs; ++i) {
    SeqSpec s;
    s.ctx_len = RandomCtx(rng, c.bs);
    s.q_len = Chance(rng, 0.25) ? 1 : Uniform(rng, 1, 40);
    total_blocks += (s.ctx_len + c.bs - 1) / c.bs;
    c.seqs.push_back(s);
  }
  c.window = Chance(rng, 0.3) ? Uniform(rng, 1, 120) : 0;
  if (Chance(rng, 0.3)) c.scale = std::uniform_real_distribution<float>(0.02f, 0.3f)(rng);
  if (Chance(rng, 0.3)) {
    for (int h = 0; h < c.n_heads; ++h) c.sinks.push_back(Normal(rng, 2.0f));
  }
  c.context_only = Chance(rng, 0.05);
  const bool fp8 = dtype == KvDtype::kFp8E4m3;
  const float ks = fp8 ? std::uniform_real_distribution<float>(0.5f, 8.0f)(rng) : 1.0f;
  const float vs = fp8 ? std::uniform_real_distribution<float>(0.5f, 8.0f)(rng) : 1.0f;
  pool.emplace(dtype, total_blocks, c.n_kv, c.bs, c.d, ks, vs);
  BlockAllocator alloc(total_blocks, rng);
  for (int32_t b = 0; b < total_blocks; ++b) pool->PoisonBlock(b);
  int32_t row = Uniform(rng, 0, 2);  // leading rows no sequence covers
  for (SeqSpec& s : c.seqs) {
    const int32_t n_blocks = (s.ctx_len + c.bs - 1) / c.bs;
    for (int32_t j = 0; j < n_blocks; ++j) {
      const int32_t blk = alloc.Take();
      s.hole.push_back(holes && Chance(rng, 0.3));
      s.table.push_back(s.hole.back() ? -1 : blk);
      if (s.hole.back()) continue;
      const int32_t valid = std::min(c.bs, s.ctx_len - j * c.bs);  // slack stays poisoned
      for (int32_t h = 0; h < c.n_kv; ++h) {
        for (int32_t o = 0; o < valid; ++o) {
          const int64_t e = pool->view.offset(blk, h, o);
          for (int32_t x = 0; x < c.d; ++x) {
            pool->Set(false, e + x, Normal(rng));
            pool->Set(true, e + x, Normal(rng));
          }
        }
      }
    }
    if (Chance(rng, 0.5)) s.table.push_back(alloc.free.front());  // unread padding entry
    c.attn_seqs.push_back({row, s.q_len, s.ctx_len, s.table});
    row += s.q_len + (Chance(rng, 0.2) ? 1 : 0);
  }
  c.n_rows = row + Uniform(rng, 0, 1);
  for (int64_t i = 0; i < int64_t{c.n_rows} * c.n_heads * c.d; ++i) c.q.push_back(Normal(rng));
  if (!c.context_only) {
    for (int64_t i = 0; i < int64_t{c.n_rows} * c.n_kv * c.d; ++i) {
      c.k.push_back(Normal(rng));
      c.v.push_back(Normal(rng));
    }
  }
  return c;
}

struct Ref {
  std::vector<double> out, lse, max;
};

// Naive fp64 attention of every (token, head) of every sequence.
Ref Reference(const Case& c, const TestPool& pool) {
  Ref r;
  r.out.assign(static_cast<size_t>(c.n_rows) * c.n_heads * c.d, 0.0);
  r.lse.assign(static_cast<size_t>(c.n_rows) * c.n_heads, -INFINITY);
  r.max = r.lse;
  const double scale = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(c.d));
  for (size_t si = 0; si < c.seqs.size(); ++si) {
    const SeqSpec& s = c.seqs[si];
    const AttnSeq& a = c.attn_seqs[si];
    for (int32_t i = 0; i < s.q_len; ++i) {
      const int64_t qpos = s.ctx_len + i;
      const int64_t row = a.q_start + i;
      for (int32_t h = 0; h < c.n_heads; ++h) {
        const int32_t kvh = h / c.g;
        const float* q = c.q.data() + (row * c.n_heads + h) * c.d;
        std::vector<double> scores;
        std::vector<std::vector<double>> values;
        auto visible = [&](int64_t kp) { return c.window == 0 || kp > qpos - c.window; };
        for (int32_t p = 0; p < s.ctx_len; ++p) {
          if (s.table[p / c.bs] < 0 || !visible(p)) continue;
          const int64_t e = pool.view.offset(s.table[p / c.bs], kvh, p % c.bs);
          double dot = 0;
          std::vector<double> vv(c.d);
          for (int32_t x = 0; x < c.d; ++x) {
            dot += q[x] * pool.Get(false, e + x);
            vv[x] = pool.Get(true, e + x);
          }
          scores.push_back(dot * scale);
          values.push_back(vv);
        }
        for (int32_t j = 0; j <= i && !c.context_only; ++j) {
          if (!visible(s.ctx_len + j)) continue;
          const float* kk = c.k.data() + ((a.q_start + j) * c.n_kv + kvh) * c.d;
          const float* vk = c.v.data() + ((a.q_start + j) * c.n_kv + kvh) * c.d;
          double dot = 0;
          for (int32_t x = 0; x < c.d; ++x) dot += double{q[x]} * kk[x];
          scores.push_back(dot * scale);
          values.emplace_back(vk, vk + c.d);
        }
        double m = c.sinks.empty() ? -INFINITY : c.sinks[h];
        for (double sc : scores) m = std::max(m, sc);
        if (m == -INFINITY) continue;
        double denom = c.sinks.empty() ? 0.0 : std::exp(c.sinks[h] - m);
        for (double sc : scores) denom += std::exp(sc - m);
        double* o = r.out.data() + (row * c.n_heads + h) * c.d;
        for (size_t k = 0; k < scores.size(); ++k) {
          const double p = std::exp(scores[k] - m) / denom;
          for (int32_t x = 0; x < c.d; ++x) o[x] += p * values[k][x];
        }
        r.max[row * c.n_heads + h] = m;
        r.lse[row * c.n_heads + h] = m + std::log(denom);
      }
    }
  }
  return r;
}

bool Covered(const Case& c, int64_t row) {
  for (const AttnSeq& a : c.attn_seqs) {
    if (row >= a.q_start && row < a.q_start + a.q_len) return true;
  }
  return false;
}

class FlashPagedAttentionRandomTest : public ::testing::TestWithParam<KvDtype> {};

TEST_P(FlashPagedAttentionRandomTest, MatchesFp64Reference) {
  const KvDtype dtype = GetParam();
  const double tol = Tolerance(dtype);
  for (int seed = 0; seed < 52; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(1000 + seed * 7 + static_cast<int>(dtype));
    std::optional<TestPool> pool;
    const Case c = MakeCase(rng, dtype, pool);
    const size_t n_out = static_cast<size_t>(c.n_rows) * c.n_heads * c.d;
    std::vector<float> out(n_out, 12345.0f), lse(c.n_rows * c.n_heads), mx(lse.size());
    FlashPagedAttentionArgs args;
    args.seqs = c.attn_seqs;
    args.q = c.q;
    args.k = c.k;
    args.v = c.v;
    args.kv = pool->view;
    args.n_heads = c.n_heads;
    args.softmax_scale = c.scale;
    args.sliding_window = c.window;
    args.sinks = c.sinks;
    args.out = out;
    args.lse = lse;
    args.max = mx;
    ASSERT_TRUE(FlashPagedAttention(args).ok());
    const Ref ref = Reference(c, *pool);
    double worst = 0;
    for (int64_t row = 0; row < c.n_rows; ++row) {
      for (int64_t i = row * c.n_heads * c.d; i < (row + 1) * c.n_heads * c.d; ++i) {
        if (!Covered(c, row)) {
          ASSERT_EQ(out[i], 12345.0f) << "row " << row << " not covered but written";
          continue;
        }
        ASSERT_TRUE(std::isfinite(out[i])) << "row " << row;
        const double err = std::abs(out[i] - ref.out[i]) / (1.0 + std::abs(ref.out[i]));
        if (err > tol && worst <= tol) {
          ADD_FAILURE() << "first bad: row " << row << " head " << (i / c.d) % c.n_heads << " dim "
                        << i % c.d << " got " << out[i] << " want " << ref.out[i];
        }
        worst = std::max(worst, err);
      }
      for (int64_t i = row * c.n_heads; i < (row + 1) * c.n_heads && Covered(c, row); ++i) {
        if (std::isinf(ref.lse[i])) {
          EXPECT_TRUE(std::isinf(lse[i]) && std::isinf(mx[i]));
        } else {
          EXPECT_NEAR(lse[i], ref.lse[i], 1e-4 * (1 + std::abs(ref.lse[i])));
          EXPECT_NEAR(mx[i], ref.max[i], 1e-4 * (1 + std::abs(ref.max[i])));
        }
      }
    }
    EXPECT_LE(worst, tol) << "d " << c.d << " g " << c.g << " bs " << c.bs << " window " << c.window
                          << " sinks " << c.sinks.size() << " ctx_only " << c.context_only
                          << " seqs " << c.seqs.size() << " ctx0 " << c.seqs[0].ctx_len << " hole0 "
                          << c.seqs[0].hole.size();
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, FlashPagedAttentionRandomTest,
                         ::testing::ValuesIn(testing::AllDtypes()),
                         [](const auto& info) { return std::string(KvDtypeName(info.param)); });

// The same 208 random prefill cases with the attention kernels capped at each SIMD level below
// the CPU's best (the uncapped run above covers the best).
class FlashPagedAttentionSimdLevelTest
    : public ::testing::TestWithParam<std::tuple<KvDtype, SimdLevel>> {};

TEST_P(FlashPagedAttentionSimdLevelTest, MatchesFp64Reference) {
  const auto [dtype, level] = GetParam();
  if (level >= DetectSimdLevel()) GTEST_SKIP() << "covered by the uncapped test";
  for (int seed = 0; seed < 52; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(1000 + seed * 7 + static_cast<int>(dtype));
    std::optional<TestPool> pool;
    const Case c = MakeCase(rng, dtype, pool);
    std::vector<float> out(static_cast<size_t>(c.n_rows) * c.n_heads * c.d, 0.0f);
    FlashPagedAttentionArgs args;
    args.seqs = c.attn_seqs;
    args.q = c.q;
    args.k = c.k;
    args.v = c.v;
    args.kv = pool->view;
    args.n_heads = c.n_heads;
    args.softmax_scale = c.scale;
    args.sliding_window = c.window;
    args.sinks = c.sinks;
    args.out = out;
    args.max_simd = level;
    ASSERT_TRUE(FlashPagedAttention(args).ok());
    const Ref ref = Reference(c, *pool);
    double worst = 0;
    for (int64_t row = 0; row < c.n_rows; ++row) {
      if (!Covered(c, row)) continue;
      for (int64_t i = row * c.n_heads * c.d; i < (row + 1) * c.n_heads * c.d; ++i) {
        ASSERT_TRUE(std::isfinite(out[i])) << "row " << row;
        worst = std::max(worst, std::abs(out[i] - ref.out[i]) / (1.0 + std::abs(ref.out[i])));
      }
    }
    EXPECT_LE(worst, Tolerance(dtype)) << "d " << c.d << " g " << c.g;
  }
}

INSTANTIATE_TEST_SUITE_P(LowerLevels, FlashPagedAttentionSimdLevelTest,
                         ::testing::Combine(::testing::ValuesIn(testing::AllDtypes()),
                                            ::testing::Values(SimdLevel::kPortable,
                                                              SimdLevel::kAvx2)),
                         [](const auto& info) {
                           return std::string(KvDtypeName(std::get<0>(info.param))) + "_" +
                                  SimdLevelName(std::get<1>(info.param));
                         });

// docs/seed-kernels.md 1.4: the [S1] inputs -- one flat block table (each sequence's context blocks
// concatenated, then all-masked padding blocks pointing at block 0) and a dense mask -- with
// masked scores = -9984 over ALL columns give the same result as the structured metadata.
TEST(FlashPagedAttentionTest, EquivalentToDenseMaskFormulation) {
  for (int seed = 0; seed < 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(555 + seed);
    const int32_t d = 16, g = Pick(rng, std::vector<int32_t>{1, 2, 4}), n_kv = 2;
    const int32_t bs = Pick(rng, std::vector<int32_t>{1, 4, 16});
    const int32_t n_heads = g * n_kv;
    const int n_seqs = Uniform(rng, 1, 3);
    std::vector<int32_t> ctx(n_seqs), qlen(n_seqs);
    int32_t total_blocks = 0, n_rows = 0;
    for (int i = 0; i < n_seqs; ++i) {
      ctx[i] = Uniform(rng, 0, 40);
      qlen[i] = Uniform(rng, 1, 9);
      total_blocks += (ctx[i] + bs - 1) / bs;
      n_rows += qlen[i];
    }
    TestPool pool(KvDtype::kF32, total_blocks + 1, n_kv, bs, d);
    for (int32_t b = 0; b <= total_blocks; ++b) pool.FillBlock(b, rng, 1.0f);  // finite garbage
    BlockAllocator alloc(total_blocks + 1, rng);
    std::vector<std::vector<int32_t>> tables(n_seqs);
    std::vector<int32_t> flat;  // [S1] block_tables
    std::vector<int64_t> col0(n_seqs);
    std::vector<AttnSeq> seqs;
    int32_t row = 0;
    for (int i = 0; i < n_seqs; ++i) {
      col0[i] = static_cast<int64_t>(flat.size()) * bs;
      for (int32_t j = 0; j < (ctx[i] + bs - 1) / bs; ++j) tables[i].push_back(alloc.Take());
      flat.insert(flat.end(), tables[i].begin(), tables[i].end());
      seqs.push_back({row, qlen[i], ctx[i], tables[i]});
      row += qlen[i];
    }
    flat.push_back(0);  // LARGE_TILE padding: all-masked block 0 with garbage
    flat.push_back(0);
    const int64_t big_c = static_cast<int64_t>(flat.size()) * bs;
    std::vector<float> q(n_rows * n_heads * d), k(n_rows * n_kv * d), v(k.size());
    for (float& x : q) x = Normal(rng);
    for (float& x : k) x = Normal(rng);
    for (float& x : v) x = Normal(rng);
    std::vector<float> out(q.size());
    FlashPagedAttentionArgs args;
    args.seqs = seqs;
    args.q = q;
    args.k = k;
    args.v = v;
    args.kv = pool.view;
    args.n_heads = n_heads;
    args.out = out;
    ASSERT_TRUE(FlashPagedAttention(args).ok());

    std::vector<int> seq_of(n_rows);
    for (int i = 0; i < n_seqs; ++i) {
      for (int32_t t = 0; t < qlen[i]; ++t) seq_of[seqs[i].q_start + t] = i;
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (int32_t qi = 0; qi < n_rows; ++qi) {
      const int si = seq_of[qi];
      for (int32_t h = 0; h < n_heads; ++h) {
        const int32_t kvh = h / g;
        std::vector<double> s(big_c + n_rows);
        std::vector<const float*> vals(s.size());
        std::vector<std::vector<float>> ctx_vals(big_c);
        for (int64_t t = 0; t < big_c + n_rows; ++t) {
          const float* kk;
          if (t < big_c) {
            const int64_t e = pool.view.offset(flat[t / bs], kvh, t % bs);
            kk = static_cast<const float*>(pool.view.k) + e;
            vals[t] = static_cast<const float*>(pool.view.v) + e;
          } else {
            kk = k.data() + ((t - big_c) * n_kv + kvh) * d;
            vals[t] = v.data() + ((t - big_c) * n_kv + kvh) * d;
          }
          const bool mask = t < big_c ? (t >= col0[si] && t < col0[si] + ctx[si])
                                      : (seq_of[t - big_c] == si && t - big_c <= qi);
          double dot = 0;
          for (int32_t x = 0; x < d; ++x) dot += double{q[(qi * n_heads + h) * d + x]} * kk[x];
          s[t] = mask ? dot * scale : kMaskedScore;
        }
        double m = -INFINITY, denom = 0;
        for (double x : s) m = std::max(m, x);
        for (double x : s) denom += std::exp(x - m);
        for (int32_t x = 0; x < d; ++x) {
          double o = 0;
          for (size_t t = 0; t < s.size(); ++t) o += std::exp(s[t] - m) / denom * vals[t][x];
          EXPECT_NEAR(out[(qi * n_heads + h) * d + x], o, 3e-5);
        }
      }
    }
  }
}

class FlashPagedAttentionErrorTest : public ::testing::Test {
 protected:
  FlashPagedAttentionErrorTest() : pool_(KvDtype::kF32, 4, 2, 4, 8) {
    table_ = {1, 3};
    seqs_ = {{0, 2, 5, table_}};
    q_.assign(2 * 4 * 8, 0.5f);
    k_.assign(2 * 2 * 8, 0.5f);
    v_ = k_;
    out_.assign(q_.size(), 7.0f);
    args_.seqs = seqs_;
    args_.q = q_;
    args_.k = k_;
    args_.v = v_;
    args_.kv = pool_.view;
    args_.n_heads = 4;
    args_.out = out_;
  }
  void ExpectInvalid() {
    EXPECT_EQ(FlashPagedAttention(args_).code(), StatusCode::kInvalidArgument);
    for (float x : out_) ASSERT_EQ(x, 7.0f);
  }
  TestPool pool_;
  std::vector<int32_t> table_;
  std::vector<AttnSeq> seqs_;
  std::vector<float> q_, k_, v_, out_;
  FlashPagedAttentionArgs args_;
};

TEST_F(FlashPagedAttentionErrorTest, ValidCallSucceeds) {
  EXPECT_TRUE(FlashPagedAttention(args_).ok());
}
TEST_F(FlashPagedAttentionErrorTest, RejectsHeadsNotMultipleOfKvHeads) {
  args_.n_heads = 3;
  args_.q = std::span<const float>(q_.data(), 2 * 3 * 8);
  ExpectInvalid();
}
TEST_F(FlashPagedAttentionErrorTest, RejectsZeroOrNegativeScale) {
  args_.softmax_scale = 0.0f;
  ExpectInvalid();
  args_.softmax_scale = -1.0f;
  ExpectInvalid();
}
TEST_F(FlashPagedAttentionErrorTest, RejectsShortBlockTable) {
  seqs_[0].ctx_len = 9;  // needs 3 blocks
  ExpectInvalid();
}
TEST_F(FlashPagedAttentionErrorTest, RejectsBlockPastThePool) {
  table_[1] = 4;
  ExpectInvalid();
}
TEST_F(FlashPagedAttentionErrorTest, RejectsRowsOutOfRange) {
  seqs_[0].q_start = 1;
  ExpectInvalid();
}
TEST_F(FlashPagedAttentionErrorTest, RejectsWrongOutputSize) {
  args_.out = std::span<float>(out_.data(), out_.size() - 1);
  ExpectInvalid();
}
TEST_F(FlashPagedAttentionErrorTest, RejectsScalesOnNonFp8Cache) {
  args_.kv.k_scale = 2.0f;
  ExpectInvalid();
}

}  // namespace
}  // namespace pagoda::cpu
