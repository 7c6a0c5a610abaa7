// The SIMD tile kernels of every level the CPU supports (portable, AVX2, AVX-512) against fp64
// references: row-block and vector-width tails (rows 1..9, keys 1..64, d 8..136), the fp16-row
// kernels against the fp32 ones, the exp pass and the row max; plus the level dispatch rules.
#include "kernels/cpu/attention/attention_simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/numerics.h"
#include "kernels/cpu/attention/attention_core.h"
#include "tests/kernels/cpu/attention/kernel_test_util.h"

namespace pagoda::cpu {
namespace {

using testing::Normal;
using testing::Uniform;

std::vector<SimdLevel> SupportedLevels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel l : {SimdLevel::kPortable, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (l <= DetectSimdLevel()) levels.push_back(l);
  }
  return levels;
}

std::string Name(const ::testing::TestParamInfo<SimdLevel>& info) {
  return SimdLevelName(info.param);
}

class AttentionSimdTest : public ::testing::TestWithParam<SimdLevel> {};

// A random tile: d a multiple of the level's width up to 136, rows 1..9 of GQA group g = 3 (so
// rows straddle tokens, q_stride with padding), n keys 1..kKeyTile; q, o and the key / value
// rows random.
struct TileCase {
  int32_t d, rows, n, g = 3, ld = attn::kKeyTile;
  int64_t q_stride;
  std::vector<float> q, o;
  std::vector<float> kv;  // n key rows, then n value rows, d values each

  // The tile's query rows, writing to `out` (laid out as o).
  attn::RowBlock Block(float* out) const { return {q.data(), q_stride, out, q_stride, g, d, rows}; }
  // Row pointers into a buffer laid out as kv: its keys (first = 0) or its values (first = n).
  template <typename T>
  std::vector<const T*> Rows(const std::vector<T>& buffer, int32_t first) const {
    std::vector<const T*> rows_of(static_cast<size_t>(n));
    for (int32_t j = 0; j < n; ++j) rows_of[j] = buffer.data() + int64_t{first + j} * d;
    return rows_of;
  }
};

TileCase RandomTileCase(std::mt19937& rng, SimdLevel level) {
  const int32_t width = level == SimdLevel::kAvx512 ? 16 : 8;
  TileCase c;
  c.d = width * Uniform(rng, 1, 136 / width);
  c.rows = Uniform(rng, 1, 9);
  c.n = Uniform(rng, 1, attn::kKeyTile);
  c.q_stride = int64_t{c.g} * c.d + 5;
  c.q.resize(static_cast<size_t>((c.rows + c.g) / c.g * c.q_stride));
  c.o.resize(c.q.size());
  c.kv.resize(static_cast<size_t>(2 * c.n * c.d));
  for (std::vector<float>* values : {&c.q, &c.o, &c.kv}) {
    for (float& x : *values) x = Normal(rng);
  }
  return c;
}

TEST_P(AttentionSimdTest, ScoresAndAccumulateMatchFp64) {
  const attn::TileKernels& kern = attn::GetTileKernels(GetParam());
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    TileCase c = RandomTileCase(rng, GetParam());
    const std::vector<const float*> k = c.Rows(c.kv, 0), v = c.Rows(c.kv, c.n);
    std::vector<float> s(static_cast<size_t>(c.rows * c.ld));
    const attn::RowBlock rb = c.Block(c.o.data());
    const std::vector<float> o_before = c.o;
    kern.scores(rb, k.data(), c.n, 0.5f, s.data(), c.ld, attn::Prefetch{});
    for (int32_t r = 0; r < c.rows; ++r) {
      for (int32_t j = 0; j < c.n; ++j) {
        double ref = 0;
        for (int32_t x = 0; x < c.d; ++x) ref += double{rb.q_row(r)[x]} * k[j][x];
        ASSERT_NEAR(s[r * c.ld + j], 0.5 * ref, 1e-5 * (1 + std::abs(ref))) << r << " " << j;
      }
    }
    kern.accumulate(rb, s.data(), c.ld, v.data(), c.n, attn::Prefetch{});
    for (int32_t r = 0; r < c.rows; ++r) {
      const int64_t base = (r / c.g) * c.q_stride + (r % c.g) * c.d;
      for (int32_t x = 0; x < c.d; ++x) {
        double ref = o_before[base + x];
        for (int32_t j = 0; j < c.n; ++j) ref += double{s[r * c.ld + j]} * v[j][x];
        ASSERT_NEAR(c.o[base + x], ref, 1e-4 * (1 + std::abs(ref))) << "d " << c.d << " row " << r;
      }
    }
    for (size_t i = 0; i < c.o.size(); ++i) {  // the padding between rows is untouched
      if (static_cast<int64_t>(i % c.q_stride) >= int64_t{c.g} * c.d) {
        ASSERT_EQ(c.o[i], o_before[i]);
      }
    }
  }
}

// The fp16-row kernels (a kF16 cache read in place) against the fp32 kernels on the same rows
// converted: bit for bit (the conversion is exact and the sums run in the same order).
TEST_P(AttentionSimdTest, F16RowKernelsEqualF32OnConvertedRows) {
  const attn::TileKernels& kern = attn::GetTileKernels(GetParam());
  if (GetParam() == SimdLevel::kPortable) {  // the caller converts there
    EXPECT_EQ(kern.scores_f16, nullptr);
    EXPECT_EQ(kern.accumulate_f16, nullptr);
    return;
  }
  ASSERT_NE(kern.scores_f16, nullptr);
  ASSERT_NE(kern.accumulate_f16, nullptr);
  std::mt19937 rng(11);
  for (int iter = 0; iter < 200; ++iter) {
    TileCase c = RandomTileCase(rng, GetParam());
    std::vector<uint16_t> half(c.kv.size());
    std::vector<float> full(c.kv.size());
    for (size_t i = 0; i < half.size(); ++i) {
      half[i] = Fp32ToFp16(c.kv[i]);
      full[i] = Fp16ToFp32(half[i]);
    }
    std::vector<float> o16 = c.o, s(static_cast<size_t>(c.rows * c.ld)), s16(s.size());
    const attn::RowBlock rb = c.Block(c.o.data()), rb16 = c.Block(o16.data());
    kern.scores(rb, c.Rows(full, 0).data(), c.n, 0.5f, s.data(), c.ld, attn::Prefetch{});
    kern.scores_f16(rb16, c.Rows(half, 0).data(), c.n, 0.5f, s16.data(), c.ld, attn::Prefetch{});
    ASSERT_EQ(s16, s) << "d " << c.d << " rows " << c.rows << " n " << c.n;
    kern.accumulate(rb, s.data(), c.ld, c.Rows(full, c.n).data(), c.n, attn::Prefetch{});
    kern.accumulate_f16(rb16, s.data(), c.ld, c.Rows(half, c.n).data(), c.n, attn::Prefetch{});
    ASSERT_EQ(o16, c.o) << "d " << c.d << " rows " << c.rows << " n " << c.n;
  }
}

TEST_P(AttentionSimdTest, ExpSumRowMaxAndScale) {
  const attn::TileKernels& kern = attn::GetTileKernels(GetParam());
  std::vector<float> x;
  for (float v = -90.0f; v <= 0.0f; v += 0.001953125f) x.push_back(v);
  x.push_back(-std::numeric_limits<float>::infinity());
  while (x.size() % 16 != 0) x.push_back(-std::numeric_limits<float>::infinity());
  std::vector<float> y = x;
  EXPECT_EQ(kern.row_max(y.data(), static_cast<int32_t>(y.size())), 0.0f);
  const float sum = kern.exp_sum(y.data(), static_cast<int32_t>(y.size()), 0.0f);
  double ref_sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(static_cast<double>(x[i]));
    if (x[i] < -87.0f) {
      ASSERT_EQ(y[i], 0.0f) << x[i];
    } else {
      ASSERT_NEAR(y[i], ref, 4e-7 * ref) << x[i];
      ref_sum += ref;
    }
  }
  EXPECT_NEAR(sum, ref_sum, 1e-5 * ref_sum);
  std::vector<float> o(48, 2.0f);
  kern.scale(o.data(), 48, 0.25f);
  for (float v : o) EXPECT_EQ(v, 0.5f);
}

INSTANTIATE_TEST_SUITE_P(Levels, AttentionSimdTest, ::testing::ValuesIn(SupportedLevels()), Name);

TEST(AttentionSimdDispatchTest, EffectiveLevelHonoursCapAndHeadDim) {
  // The attention kernels' best: the CPU's level, every level from kAvx512 on as kAvx512.
  const SimdLevel best = std::min(DetectSimdLevel(), SimdLevel::kAvx512);
  EXPECT_EQ(attn::EffectiveSimdLevel(SimdLevel::kPortable, 128), SimdLevel::kPortable);
  EXPECT_EQ(attn::EffectiveSimdLevel(SimdLevel::kAvx512, 128), best);
  EXPECT_EQ(attn::EffectiveSimdLevel(kMaxSimdLevel, 128), best);
  EXPECT_LE(attn::EffectiveSimdLevel(SimdLevel::kAvx512, 72), SimdLevel::kAvx2);  // 72 % 16 != 0
  EXPECT_EQ(attn::EffectiveSimdLevel(SimdLevel::kAvx512, 100), SimdLevel::kPortable);
  for (SimdLevel level : SupportedLevels()) {  // a cap at or below the CPU's level is honoured
    EXPECT_EQ(attn::EffectiveSimdLevel(level, 128), std::min(level, SimdLevel::kAvx512));
  }
  // Above kAvx512 the AVX-512 tile kernels run.
  if (DetectSimdLevel() >= SimdLevel::kAvx512) {
    EXPECT_EQ(&attn::GetTileKernels(kMaxSimdLevel), &attn::GetTileKernels(SimdLevel::kAvx512));
  }
}

}  // namespace
}  // namespace pagoda::cpu
