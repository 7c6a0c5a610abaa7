// kernels/cpu/matmul against a reference written here (dequantize the weights, fp64 dots) for
// every weight type x SIMD level this CPU supports (each lower level forced) x batch size x
// shape (rows not a multiple of the tiles, the smallest legal cols, vector / block tails, large
// cols). Tolerances, with S = sum_c |w_rc| |x_tc|:
//   F32, F16, BF16 (fp32 path): 2e-5 * S (fp32 accumulation; the weights widen exactly).
//   BF16 at avx512bf16 (activations rounded to bf16): 2^-8 * S + 2e-5 * S.
//   Q8_0, Q4_0 (activations quantized to int8 blocks of 32): sum_blocks sum_i |w_i| amax_b / 254,
//     times 1.01, + 2e-5 * S; at the portable level (dequantize + fp32): 2e-5 * S.
//   Q4_1, Q5_0, Q5_1, IQ4_NL: as Q4_0; Q4_1 and Q5_1 + 1e-4 * S (the fp32 min term).
//   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (activations quantized to int8 blocks of 256): the same
//     with 256-element blocks, + 1e-4 * S except IQ4_XS (the fp32 min / offset correction is
//     subtracted from a larger sum).
//   Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K and IQ4_XS are tested on random blocks (every
//     code, sub-block scale and bit pattern; random fp16 scales / mins of either sign), the
//     others on quantized Gaussian rows.
//   At avx512vnni+, batches of >= Int16MinTokens tokens of the block-quantized types (not Q8_0;
//   128, from file rows only: packed rows keep their kernels) and of >= 32 tokens of F16 (the
//     default int16 path: weights and activations quantized to 13 bits per block of 32): per
//     block, (amax_w * sum |x| + amax_x * sum |w|) / 16382 + 32 amax_w amax_x / 16382^2, summed,
//     times 1.01, + 2e-5 * S (for the quantized types instead of their int8 terms above).
//     F16's opt-in bf16 path (avx512bf16): 2^-7 * S + 2e-5 * S.
// Also: the thread count does not change any output bit; level names parse.
#include "kernels/cpu/matmul/matmul.h"

#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/numerics.h"
#include "kernels/cpu/matmul/matmul_kernels.h"
#include "kernels/cpu/thread_team.h"

namespace pagoda::cpu::mm {
namespace {

struct Matrix {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;       // dequantized [rows][cols]
  std::vector<uint8_t> packed;  // PackRows' copy (Pack())
  WeightView view() const {
    const int64_t rb = *RowBytes(type, cols);
    WeightView v{type, bytes.data(), rows, cols, rb};
    if (!packed.empty()) v.packed = packed.data();
    return v;
  }
  // Makes view() carry a packed copy (types with CanPackRows).
  void Pack() {
    std::vector<uint8_t> out(static_cast<size_t>(PackedBytes(type, rows, cols)));
    PackRows(view(), out.data());
    packed = std::move(out);
  }
};

// Offsets of the fp16 fields (scales, mins) in a block of `type` (model/quants.h), for the types
// tested on random blocks; empty for the others (tested on quantized Gaussian rows).
std::vector<int> Fp16Fields(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ5_K:
      return {0, 2};
    case GgmlType::kQ2_K:
      return {80, 82};
    case GgmlType::kQ3_K:
      return {108};
    case GgmlType::kQ5_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kIQ4_XS:
      return {0};
    default:
      return {};
  }
}

// A row of random blocks: random bytes (every code, scale and bit pattern), the fp16 fields
// set to random finite values of either sign, with the magnitude `scale` / 16.
void RandomBlocks(GgmlType type, int64_t cols, float scale, std::mt19937& rng, uint8_t* dst) {
  const GgmlTypeTraits& t = TypeTraits(type);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(0.25f, 1.0f);
  for (int64_t b = 0; b < cols / t.block_size; ++b) {
    uint8_t* blk = dst + b * t.type_size;
    for (int64_t i = 0; i < t.type_size; ++i) blk[i] = static_cast<uint8_t>(byte(rng));
    for (int off : Fp16Fields(type)) {
      const float v = mag(rng) * scale / 16 * (byte(rng) % 2 ? 1.0f : -1.0f);
      const uint16_t h = Fp32ToFp16(v);
      std::memcpy(blk + off, &h, 2);
    }
  }
}

Matrix RandomMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Matrix m{type, rows, cols, {}, {}, {}};
  const int64_t rb = *RowBytes(type, cols);
  m.bytes.resize(static_cast<size_t>(rows * rb));
  m.deq.resize(static_cast<size_t>(rows * cols));
  std::vector<float> src(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    if (!Fp16Fields(type).empty()) {
      RandomBlocks(type, cols, std::ldexp(1.0f, static_cast<int>(r % 5) - 2), rng,
                   m.bytes.data() + r * rb);
      DequantizeRow(type, m.bytes.data() + r * rb, m.deq.data() + r * cols, cols);
      continue;
    }
    // Varying magnitudes per row and some exact zeros exercise scales and the sign tricks.
    const float scale = std::ldexp(1.0f, static_cast<int>(r % 5) - 2);
    for (int64_t c = 0; c < cols; ++c) src[c] = (c % 11 == 3) ? 0.0f : normal(rng) * scale;
    QuantizeRow(type, src.data(), m.bytes.data() + r * rb, cols);
    DequantizeRow(type, m.bytes.data() + r * rb, m.deq.data() + r * cols, cols);
  }
  return m;
}

std::vector<float> RandomActivations(int64_t n, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = normal(rng);
  if (!x.empty()) x[0] = 0.0f;
  return x;
}

// The types whose kernels quantize the activations in blocks of 256 (kQ8K) ...
bool IsKQuant(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}
// ... and in blocks of 32 (kQ8).
bool Is32Quant(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kIQ4_NL:
      return true;
    default:
      return false;
  }
}
// Formats with an fp32 min / offset correction subtracted from a larger sum.
bool HasFp32Correction(GgmlType type) {
  return (IsKQuant(type) && type != GgmlType::kIQ4_XS) || type == GgmlType::kQ4_1 ||
         type == GgmlType::kQ5_1;
}

// The int16 path's rounding bound for weight row w and token x (see the file comment).
double I16Bound(const float* w, const float* x, int64_t cols) {
  double bound = 0.0;
  for (int64_t b = 0; b < cols; b += 32) {
    double wmax = 0.0, xmax = 0.0, wsum = 0.0, xsum = 0.0;
    for (int64_t c = b; c < std::min(cols, b + 32); ++c) {
      wmax = std::max(wmax, std::fabs(static_cast<double>(w[c])));
      xmax = std::max(xmax, std::fabs(static_cast<double>(x[c])));
      wsum += std::fabs(w[c]);
      xsum += std::fabs(x[c]);
    }
    bound += (wmax * xsum + xmax * wsum) / 16382.0 + 32.0 * wmax * xmax / (16382.0 * 16382.0);
  }
  return 1.01 * bound;
}

// Whether MatMul takes F16's fast batch path `mode` for n tokens at `level`.
bool F16FastPath(F16Matmul mode, SimdLevel level, int64_t n) {
  if (n < 32) return false;
  if (mode == F16Matmul::kInt16) return level >= SimdLevel::kAvx512Vnni;
  return mode == F16Matmul::kBf16 && level >= SimdLevel::kAvx512Bf16;
}

// |y - ref| bound for element (t, r) of a MatMul call with n tokens and default options (see
// the file comment).
double Bound(const Matrix& m, const float* x, int64_t r, SimdLevel level, int64_t n,
             bool packed = false) {
  const float* w = m.deq.data() + r * m.cols;
  const int64_t act_block = IsKQuant(m.type) && !packed ? 256 : 32;  // packed: kQ8X16
  double s = 0.0, q8 = 0.0;
  for (int64_t b = 0; b < m.cols; b += act_block) {
    double amax = 0.0, wsum = 0.0;
    for (int64_t c = b; c < std::min(m.cols, b + act_block); ++c) {
      s += std::fabs(static_cast<double>(w[c]) * x[c]);
      amax = std::max(amax, static_cast<double>(std::fabs(x[c])));
      wsum += std::fabs(w[c]);
    }
    q8 += wsum * amax / 254.0;
  }
  double bound = 2e-5 * s + 1e-30;
  if (n >= Int16MinTokens(m.type, level, packed)) {
    return bound + I16Bound(w, x, m.cols);  // dequantized weights, int16 activations
  }
  if (m.type == GgmlType::kBF16 && level >= SimdLevel::kAvx512Bf16) bound += s / 256.0;
  const bool int8_acts = Is32Quant(m.type) || IsKQuant(m.type);
  if (int8_acts && level > SimdLevel::kPortable) bound += 1.01 * q8;
  if ((HasFp32Correction(m.type) || packed) && level > SimdLevel::kPortable) bound += 1e-4 * s;
  if (m.type == GgmlType::kF16 && F16FastPath(kDefaultF16Matmul, level, n)) {
    bound += kDefaultF16Matmul == F16Matmul::kInt16 ? I16Bound(w, x, m.cols) : s / 128.0;
  }
  return bound;
}

// `batch`: the n_tokens of the MatMul call that produced y (default n).
void ExpectMatches(const Matrix& m, const std::vector<float>& x, int64_t n,
                   const std::vector<float>& y, SimdLevel level, int64_t batch = -1) {
  if (batch < 0) batch = n;
  const bool packed = !m.packed.empty();
  int failures = 0;
  for (int64_t t = 0; t < n && failures < 5; ++t) {
    const float* xt = x.data() + t * m.cols;
    for (int64_t r = 0; r < m.rows && failures < 5; ++r) {
      const float* w = m.deq.data() + r * m.cols;
      double ref = 0.0;
      for (int64_t c = 0; c < m.cols; ++c) ref += static_cast<double>(w[c]) * xt[c];
      const double err = std::fabs(y[t * m.rows + r] - ref);
      if (!(err <= Bound(m, xt, r, level, batch, packed))) {
        ++failures;
        ADD_FAILURE() << "t=" << t << " r=" << r << " y=" << y[t * m.rows + r] << " ref=" << ref
                      << " bound=" << Bound(m, xt, r, level, batch, packed);
      }
    }
  }
}

std::vector<SimdLevel> Levels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel l : kAllSimdLevels) {
    if (l <= DetectSimdLevel()) levels.push_back(l);
  }
  return levels;
}

using Param = std::tuple<GgmlType, SimdLevel>;

class MatMulTest : public ::testing::TestWithParam<Param> {};

// cols per type: the smallest legal, vector / block tails, and large.
std::vector<int64_t> ColsFor(GgmlType type) {
  if (Is32Quant(type)) return {32, 64, 96, 160, 224, 1056, 4096};
  if (IsKQuant(type)) return {256, 512, 768, 2048, 4096};
  return {1, 7, 16, 33, 100, 1056, 4096};
}

TEST_P(MatMulTest, MatchesFp64Reference) {
  const auto [type, level] = GetParam();
  const MatMulOptions options{level};
  uint32_t seed = 1;
  for (int64_t cols : ColsFor(type)) {
    for (int64_t rows : {1, 3, 5, 37}) {
      if (cols >= 4096 && rows < 37) continue;
      const Matrix m = RandomMatrix(type, rows, cols, seed++);
      for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 16, 33, 64}) {
        if (cols >= 1056 && n > 8 && n != 33) continue;  // keep the fp64 reference cheap
        SCOPED_TRACE(::testing::Message() << "rows=" << rows << " cols=" << cols << " n=" << n);
        const std::vector<float> x = RandomActivations(n, cols, seed++);
        std::vector<float> y(static_cast<size_t>(n * rows), NAN);
        MatMul(m.view(), x.data(), n, y.data(), options);
        ExpectMatches(m, x, n, y, level);
        if (HasFailure()) return;
      }
    }
  }
}

// Batches of up to 8 tokens (the speculative verification sizes) give each token bit for bit what
// it gets alone: F32 / F16 / BF16 (the tiles) at every level, and at avx512vnni+ Q8_0 (below its
// token-lane kernel), the K-quants (RowK; Q6_K's tiles) and the packed rows (every
// block-quantized type; Q8_0 and the K-quants also from the file's rows).
TEST(MatMulApiTest, RowKernelsDoNotDependOnTheBatch) {
  struct Case {
    GgmlType type;
    std::vector<int64_t> cols;
    bool vnni_only;  // the quantized types' row kernels are AVX512-VNNI's
  };
  const std::vector<int64_t> k_cols = {256, 768, 2304};
  const bool vnni = DetectSimdLevel() >= SimdLevel::kAvx512Vnni;
  for (const Case& c :
       {Case{GgmlType::kQ8_0, {32, 96, 224, 2080}, true}, Case{GgmlType::kQ2_K, k_cols, true},
        Case{GgmlType::kQ3_K, k_cols, true}, Case{GgmlType::kQ4_K, k_cols, true},
        Case{GgmlType::kQ5_K, k_cols, true}, Case{GgmlType::kIQ4_XS, k_cols, true},
        Case{GgmlType::kQ6_K, k_cols, true}, Case{GgmlType::kQ4_0, {32, 96, 2080}, true},
        // Float columns: a tail alone (7), tails after an even (100) and an odd (117) count of
        // 16-column vectors, which end different FMA chains (TileFp512), and none (2080).
        Case{GgmlType::kF16, {7, 100, 117, 2080}, false},
        Case{GgmlType::kBF16, {7, 100, 117, 2080}, false},
        Case{GgmlType::kF32, {7, 100, 117, 2080}, false}}) {
    if (c.vnni_only && !vnni) continue;
    for (int64_t cols : c.cols) {
      for (bool pack : {false, true}) {
        // Packed rows where the type has them; file rows too for all but Q4_0 (as before).
        if (pack ? !CanPackRows(c.type) : c.type == GgmlType::kQ4_0) continue;
        const int64_t rows = 19;
        Matrix m = RandomMatrix(c.type, rows, cols, 5);
        if (pack) m.Pack();
        const std::vector<float> x = RandomActivations(8, cols, 6);
        for (int64_t n = 2; n <= 8; ++n) {
          std::vector<float> y(static_cast<size_t>(n * rows));
          MatMul(m.view(), x.data(), n, y.data());
          for (int64_t t = 0; t < n; ++t) {
            std::vector<float> alone(static_cast<size_t>(rows));
            MatMul(m.view(), x.data() + t * cols, 1, alone.data());
            for (int64_t r = 0; r < rows; ++r) {
              ASSERT_EQ(y[t * rows + r], alone[r]) << TypeName(c.type) << " cols " << cols << " n "
                                                   << n << " t " << t << " packed " << pack;
            }
          }
        }
      }
    }
  }
}

// With MatMulOptions::batch_invariant, every token of a batch of each size in `batches` gets bit
// for bit what it gets alone (rows x cols, matrix seed `seed`, activations seed + 1), from file
// rows and, where the type has them, packed rows.
void ExpectBatchesMatchAlone(GgmlType type, SimdLevel level, int64_t rows, int64_t cols,
                             std::initializer_list<int64_t> batches, uint32_t seed) {
  const MatMulOptions options{level, kDefaultF16Matmul, /*batch_invariant=*/true};
  const int64_t max_n = std::max(batches);
  for (bool pack : {false, true}) {
    if (pack && !CanPackRows(type)) continue;
    Matrix m = RandomMatrix(type, rows, cols, seed);
    if (pack) m.Pack();
    const std::vector<float> x = RandomActivations(max_n, cols, seed + 1);
    std::vector<float> alone(static_cast<size_t>(max_n * rows));
    for (int64_t t = 0; t < max_n; ++t) {
      MatMul(m.view(), x.data() + t * cols, 1, alone.data() + t * rows, options);
    }
    for (int64_t n : batches) {
      std::vector<float> y(static_cast<size_t>(n * rows));
      MatMul(m.view(), x.data(), n, y.data(), options);
      for (int64_t i = 0; i < n * rows; ++i) {
        ASSERT_EQ(y[i], alone[i]) << "n " << n << " token " << i / rows << " row " << i % rows
                                  << " packed " << pack;
      }
    }
  }
}

// Batches of any size: past the Q8_0 token-lane, F16 and int16 thresholds, several token chunks;
// every type at every level.
TEST_P(MatMulTest, BatchInvariantPlansDoNotDependOnTheBatch) {
  const auto [type, level] = GetParam();
  const int64_t cols = IsKQuant(type) ? 512 : Is32Quant(type) ? 96 : 100;
  ExpectBatchesMatchAlone(type, level, 21, cols, {2, 8, 9, 12, 13, 17, 33, 64, 129, 140}, 9);
}

// A GEMV whose row tiles are 16 rows or more (157 rows: tiles of 20; the packed GEMVs reduce 16
// rows together) gives bit for bit what a batch gives (each (row, token) reduced alone). So do
// batches of 16 and 17 over row tiles of more than 8 groups of 16 rows (1203 rows: tiles of 160;
// packed Q8_0 goes by chunks of 8 row groups) and 19 blocks of 32 (its spans of 8 and a partial
// one). Batches of 2-8 over tiles of 160 rows: the packed types' GEMV streams (4 per thread, every
// token of the call in each row's tiles).
TEST_P(MatMulTest, GemvOfWholeRowGroupsMatchesTheBatch) {
  const auto [type, level] = GetParam();
  ExpectBatchesMatchAlone(type, level, 8 * 20 - 3, IsKQuant(type) ? 1024 : 608, {3}, 91);
  ExpectBatchesMatchAlone(type, level, 8 * 150 + 3, IsKQuant(type) ? 1024 : 608, {16, 17}, 92);
  ExpectBatchesMatchAlone(type, level, 8 * 150 + 3, IsKQuant(type) ? 1024 : 608, {2, 4, 6, 8}, 93);
}

// Many token chunks and row tiles (large n and rows), checked on a sample of outputs.
TEST_P(MatMulTest, LargeBatchManyTiles) {
  const auto [type, level] = GetParam();
  const int64_t rows = 301, cols = 2048, n = 130;  // >= 128: every type's converted path
  const Matrix m = RandomMatrix(type, rows, cols, 77);
  const std::vector<float> x = RandomActivations(n, cols, 78);
  std::vector<float> y(static_cast<size_t>(n * rows), NAN);
  MatMul(m.view(), x.data(), n, y.data(), MatMulOptions{level});
  for (int64_t t : {0, 31, 32, 63, 64, 129}) {
    const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
    std::vector<float> yt(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) yt[r] = y[t * rows + r];
    SCOPED_TRACE(::testing::Message() << "t=" << t);
    ExpectMatches(m, xt, 1, yt, level, n);
  }
}

// Same bits with 1 and 2 threads (each output computed by one task in a fixed order).
TEST_P(MatMulTest, DeterministicAcrossThreadCounts) {
  const auto [type, level] = GetParam();
  const int64_t rows = 517, cols = 1024, n = 9;
  const Matrix m = RandomMatrix(type, rows, cols, 5);
  const std::vector<float> x = RandomActivations(n, cols, 6);
  std::vector<float> y1(static_cast<size_t>(n * rows)), y2(y1.size());
  tbb::task_arena(1).execute([&] { MatMul(m.view(), x.data(), n, y1.data(), {level}); });
  tbb::task_arena(2).execute([&] { MatMul(m.view(), x.data(), n, y2.data(), {level}); });
  EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)));
  for (int size : {2, 3}) {  // on a ThreadTeam: its claims join tiles, the same bits
    ThreadTeam team(size);
    for (int64_t tokens : {int64_t{1}, n}) {
      std::vector<float> yt(static_cast<size_t>(tokens * rows));
      MatMul(m.view(), x.data(), tokens, yt.data(), {level, kDefaultF16Matmul, false, &team});
      tbb::task_arena(1).execute([&] { MatMul(m.view(), x.data(), tokens, y1.data(), {level}); });
      EXPECT_EQ(0, std::memcmp(y1.data(), yt.data(), yt.size() * sizeof(float))) << size;
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(TypeName(std::get<0>(info.param))) + "_" +
         SimdLevelName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    AllTypesAndLevels, MatMulTest,
    ::testing::Combine(::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                         GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                         GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kIQ4_NL,
                                         GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
                                         GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_XS),
                       ::testing::ValuesIn(Levels())),
    ParamName);

// Packed rows (PackRows) of the blocks-of-32 types, the K-quants, BF16, F16 and F32: their
// kernels take every batch (no int16 path, Int16MinTokens), within the same bounds (+ 1e-4 * S,
// the offset or min is applied in fp32; the K-quants with the activation blocks of 32 they are
// packed for; cols with partial groups of 16 blocks, K-quants odd super-block counts), and each
// token's outputs bit-identical to those of a call with that token alone and of the same call
// with 1 thread.
class PackedMatMulTest : public ::testing::TestWithParam<Param> {};

TEST_P(PackedMatMulTest, MatchesReferenceAndDoesNotDependOnTheBatch) {
  const auto [type, level] = GetParam();
  ASSERT_TRUE(CanPackRows(type));
  EXPECT_EQ(Int16MinTokens(type, level, /*packed=*/true), std::numeric_limits<int64_t>::max());
  const bool k_quant = IsKQuant(type);
  // BF16, F16, F32: odd counts too (BF16: a last pair with one column).
  const bool float_type =
      type == GgmlType::kBF16 || type == GgmlType::kF16 || type == GgmlType::kF32;
  const std::vector<int64_t> col_list = k_quant ? std::vector<int64_t>{256, 512, 768, 1280, 4352}
                                        : float_type
                                            ? std::vector<int64_t>{7, 32, 117, 544, 1056, 4096}
                                            : std::vector<int64_t>{32, 64, 96, 544, 1056, 4096};
  uint32_t seed = 100;
  ThreadTeam team(2);
  for (int64_t cols : col_list) {
    // 300 rows: tiles of several row groups (packed Q8_0 batches pair them, every GEMV walks
    // 4 side by side).
    for (int64_t rows : {1, 3, 5, 37, 300}) {
      if (cols >= 4096 && rows < 37) continue;
      if (rows == 300 && cols > 96) continue;
      Matrix m = RandomMatrix(type, rows, cols, seed++);
      m.Pack();
      for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 12, 33, 130}) {
        if (cols >= 1056 && n > 8 && n != 33) continue;
        SCOPED_TRACE(::testing::Message() << "rows=" << rows << " cols=" << cols << " n=" << n);
        const std::vector<float> x = RandomActivations(n, cols, seed++);
        std::vector<float> y(static_cast<size_t>(n * rows), NAN);
        MatMul(m.view(), x.data(), n, y.data(), MatMulOptions{level});
        ExpectMatches(m, x, n, y, level);
        // F16 batches of 32+ take the int16 path (MatMulOptions::f16): its tiles converted from
        // the packed copy are those of the file's rows, so the same bits.
        if (type == GgmlType::kF16 && F16FastPath(kDefaultF16Matmul, level, n)) {
          Matrix file = m;
          file.packed.clear();
          std::vector<float> yf(y.size());
          MatMul(file.view(), x.data(), n, yf.data(), MatMulOptions{level});
          EXPECT_EQ(0, std::memcmp(y.data(), yf.data(), y.size() * 4));
          continue;
        }
        // The same int8 activations as the file-row kernel (not the K-quants', whose activation
        // blocks are 256 long): equal up to fp32 rounding, where the file rows take no int16 path.
        if (!k_quant && n < Int16MinTokens(type, level, /*packed=*/false)) {
          Matrix file = m;
          file.packed.clear();
          std::vector<float> yf(y.size());
          MatMul(file.view(), x.data(), n, yf.data(), MatMulOptions{level});
          // Q8_0 from 9 tokens: the file rows' token lanes sum as the packed rows do.
          if (type == GgmlType::kQ8_0 && level >= SimdLevel::kAvx512Vnni && n >= 9) {
            EXPECT_EQ(0, std::memcmp(y.data(), yf.data(), y.size() * 4));
          }
          for (int64_t t = 0; t < n; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              double s = 0.0;
              for (int64_t c = 0; c < cols; ++c) {
                s += std::fabs(static_cast<double>(m.deq[r * cols + c]) * x[t * cols + c]);
              }
              ASSERT_LE(std::fabs(y[t * rows + r] - yf[t * rows + r]), 1e-5 * s + 1e-30)
                  << "t=" << t << " r=" << r << " packed " << y[t * rows + r] << " file "
                  << yf[t * rows + r];
            }
          }
        }
        std::vector<float> one(static_cast<size_t>(rows)), serial(y.size());
        for (int64_t t = 0; t < n; ++t) {
          MatMul(m.view(), x.data() + t * cols, 1, one.data(), MatMulOptions{level});
          EXPECT_EQ(0, std::memcmp(one.data(), y.data() + t * rows, one.size() * 4)) << t;
        }
        tbb::task_arena(1).execute(
            [&] { MatMul(m.view(), x.data(), n, serial.data(), MatMulOptions{level}); });
        EXPECT_EQ(0, std::memcmp(serial.data(), y.data(), y.size() * 4));
        // On a ThreadTeam (the GEMV in 64-row tiles whose claims join into longer calls).
        MatMul(m.view(), x.data(), n, serial.data(),
               MatMulOptions{level, kDefaultF16Matmul, false, &team});
        EXPECT_EQ(0, std::memcmp(serial.data(), y.data(), y.size() * 4)) << "on a team";
        if (HasFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    PackableTypesAndLevels, PackedMatMulTest,
    ::testing::Combine(::testing::Values(GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                         GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kIQ4_NL,
                                         GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kIQ4_XS,
                                         GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ6_K,
                                         GgmlType::kBF16, GgmlType::kF16, GgmlType::kF32),
                       ::testing::ValuesIn(Levels())),
    ParamName);

// Each F16 batch mode: within its bound where it applies, and exactly the exact path below 32
// tokens or below its level.
TEST(MatMulApiTest, F16BatchModesStayWithinTheirBounds) {
  const Matrix m = RandomMatrix(GgmlType::kF16, 37, 1056, 21);
  for (F16Matmul mode : {F16Matmul::kInt16, F16Matmul::kBf16}) {
    for (SimdLevel level : Levels()) {
      for (int64_t n : {3, 16, 33}) {
        SCOPED_TRACE(::testing::Message()
                     << F16MatmulName(mode) << " " << SimdLevelName(level) << " n=" << n);
        const std::vector<float> x = RandomActivations(n, m.cols, 22);
        std::vector<float> fast(static_cast<size_t>(n * m.rows)), exact(fast.size());
        MatMul(m.view(), x.data(), n, fast.data(), MatMulOptions{level, mode});
        MatMul(m.view(), x.data(), n, exact.data(), MatMulOptions{level, F16Matmul::kExact});
        if (!F16FastPath(mode, level, n)) {
          EXPECT_EQ(0, std::memcmp(fast.data(), exact.data(), fast.size() * sizeof(float)));
          continue;
        }
        for (int64_t t = 0; t < n; ++t) {
          const float* xt = x.data() + t * m.cols;
          for (int64_t r = 0; r < m.rows; ++r) {
            const float* w = m.deq.data() + r * m.cols;
            double ref = 0.0, s = 0.0;
            for (int64_t c = 0; c < m.cols; ++c) {
              ref += static_cast<double>(w[c]) * xt[c];
              s += std::fabs(static_cast<double>(w[c]) * xt[c]);
            }
            const double bound =
                2e-5 * s + (mode == F16Matmul::kInt16 ? I16Bound(w, xt, m.cols) : s / 128.0);
            ASSERT_LE(std::fabs(fast[t * m.rows + r] - ref), bound) << "t=" << t << " r=" << r;
          }
        }
      }
    }
  }
}

// Non-finite values reach the outputs on the int16 path as with exact products (the path at
// avx512vnni+, exact products below): a weight row or a token with an inf / NaN gives
// non-finite outputs there and leaves the others finite.
TEST(MatMulApiTest, F16Int16PropagatesNonFinite) {
  Matrix m = RandomMatrix(GgmlType::kF16, 40, 100, 31);
  const uint16_t kInfF16 = 0x7c00;
  std::memcpy(m.bytes.data() + 7 * m.view().row_bytes + 2 * 50, &kInfF16, 2);  // row 7
  const int64_t n = 33;  // >= 32: the int16 path where the level has it
  std::vector<float> x = RandomActivations(n, m.cols, 32);
  x[5 * m.cols + 99] = NAN;  // token 5
  for (SimdLevel level : Levels()) {
    SCOPED_TRACE(SimdLevelName(level));
    std::vector<float> y(static_cast<size_t>(n * m.rows));
    MatMul(m.view(), x.data(), n, y.data(), MatMulOptions{level, F16Matmul::kInt16});
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < m.rows; ++r) {
        EXPECT_EQ(std::isfinite(y[t * m.rows + r]), t != 5 && r != 7) << "t=" << t << " r=" << r;
      }
    }
  }
}

// The AMX Q8_0 kernel (batches from 13 tokens, packed rows) gives the VNNI kernels' outputs (the
// packed rows; the token lanes sum alike) bit for bit: partial token groups (n % 16), partial
// row groups (rows % 16), odd and short block counts, token chunks split by the driver (cols
// 4096: 16 tokens a call). Instantiated only where this CPU has the kAmx level (as the per-level
// tests are).
class AmxQ8Test : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(AmxQ8Test, MatchesTheVnniKernelsBitForBit) {
  uint32_t seed = 900;
  for (int64_t cols : {32, 64, 96, 160, 2048, 4096}) {
    for (int64_t rows : {1, 16, 17, 45}) {
      Matrix m = RandomMatrix(GgmlType::kQ8_0, rows, cols, seed++);
      m.Pack();
      for (int64_t n : {13, 16, 17, 31, 48, 70}) {
        SCOPED_TRACE(::testing::Message() << "rows=" << rows << " cols=" << cols << " n=" << n);
        const std::vector<float> x = RandomActivations(n, cols, seed++);
        std::vector<float> amx(static_cast<size_t>(n * rows), NAN), vnni(amx.size(), NAN);
        MatMul(m.view(), x.data(), n, amx.data(), MatMulOptions{GetParam()});
        MatMul(m.view(), x.data(), n, vnni.data(), MatMulOptions{SimdLevel::kAvx512Bf16});
        ASSERT_EQ(0, std::memcmp(amx.data(), vnni.data(), amx.size() * 4));
      }
    }
  }
}

std::vector<SimdLevel> AmxLevels() {
  std::vector<SimdLevel> levels = Levels();
  std::erase_if(levels, [](SimdLevel l) { return l < SimdLevel::kAmx; });
  return levels;
}

INSTANTIATE_TEST_SUITE_P(AmxLevel, AmxQ8Test, ::testing::ValuesIn(AmxLevels()),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AmxQ8Test);

// The SIMD activation quantizer writes QuantizeQ8Portable's bytes: random lengths (tails and
// padding blocks), scales from 1e-30 to 1e30, zero blocks and exact ties (amax 127: d = 1, so
// +-k.5 rounds to the even neighbour).
TEST(MatMulApiTest, Q8QuantizerMatchesPortableBitForBit) {
  const internal::QuantizeQ8Fn simd = internal::X86Q8Quantizer(DetectSimdLevel());
  if (simd == nullptr)
    GTEST_SKIP() << "no SIMD Q8 quantizer at " << SimdLevelName(DetectSimdLevel());
  EXPECT_EQ(internal::X86Q8Quantizer(SimdLevel::kAvx2), nullptr);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t cols = 1 + static_cast<int64_t>(rng() % 700);
    const int64_t ld = (cols + 31) / 32 * 32 + 32 * static_cast<int64_t>(rng() % 3);
    const float scale = std::pow(10.0f, static_cast<float>(static_cast<int>(rng() % 61) - 30));
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> x(static_cast<size_t>(cols));
    for (float& v : x) v = normal(rng);
    if (trial % 5 == 0) {  // ties: each block's first value 127, the others k + 0.5
      for (int64_t c = 0; c < cols; ++c) {
        x[c] =
            c % 32 == 0 ? 127.0f : static_cast<float>(static_cast<int>(rng() % 253) - 126) + 0.5f;
      }
    }
    if (trial % 7 == 0) std::fill(x.begin(), x.begin() + std::min<int64_t>(cols, 40), 0.0f);
    std::vector<int8_t> q_ref(static_cast<size_t>(ld), 99), q_simd(static_cast<size_t>(ld), 42);
    std::vector<float> d_ref(static_cast<size_t>(ld / 32)), d_simd(static_cast<size_t>(ld / 32));
    internal::QuantizeQ8Portable(x.data(), cols, ld, q_ref.data(), d_ref.data());
    simd(x.data(), cols, ld, q_simd.data(), d_simd.data());
    ASSERT_EQ(q_simd, q_ref) << "cols " << cols << " ld " << ld << " scale " << scale;
    ASSERT_EQ(0, std::memcmp(d_simd.data(), d_ref.data(), d_ref.size() * sizeof(float)));
  }
}

// The SIMD kQ8X16 interleave writes InterleaveX16Portable's codes, xs and xsum: random codes
// (extremes -128 / 127 included) over 1 to 12 groups of 512, random scales.
TEST(MatMulApiTest, InterleaveX16MatchesPortableBitForBit) {
  const internal::InterleaveX16Fn simd = internal::X86InterleaveX16(DetectSimdLevel());
  if (simd == nullptr)
    GTEST_SKIP() << "no SIMD kQ8X16 interleave at " << SimdLevelName(DetectSimdLevel());
  EXPECT_EQ(internal::X86InterleaveX16(SimdLevel::kAvx2), nullptr);
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t ld = 512 * (1 + static_cast<int64_t>(rng() % 12));
    std::vector<int8_t> q_ref(static_cast<size_t>(ld));
    for (int8_t& c : q_ref) {
      const uint32_t r = rng();
      c = trial % 4 == 0 ? static_cast<int8_t>(r % 2 == 0 ? -128 : 127) : static_cast<int8_t>(r);
    }
    std::vector<int8_t> q_simd = q_ref;
    std::vector<float> xd(static_cast<size_t>(ld / 32));
    std::normal_distribution<float> normal(0.0f, 0.01f);
    for (float& d : xd) d = normal(rng);
    std::vector<float> xs_ref(xd.size(), 1.0f), xs_simd(xd.size(), 2.0f);
    std::vector<int16_t> sum_ref(static_cast<size_t>(ld / 16), 1), sum_simd(sum_ref.size(), 2);
    internal::InterleaveX16Portable(q_ref.data(), xd.data(), ld, xs_ref.data(), sum_ref.data());
    simd(q_simd.data(), xd.data(), ld, xs_simd.data(), sum_simd.data());
    ASSERT_EQ(q_simd, q_ref) << "ld " << ld;
    ASSERT_EQ(sum_simd, sum_ref) << "ld " << ld;
    ASSERT_EQ(0, std::memcmp(xs_simd.data(), xs_ref.data(), xs_ref.size() * sizeof(float)));
  }
}

// The SIMD kBf16Pairs writer gives Bf16PairsPortable's bits (Fp32ToBf16: ties to even, NaN
// quiet, denormals and infinities kept) at the stride, and writes nothing else: random values
// with those specials mixed in, 1 to 70 columns (odd counts: a last pair with one value).
TEST(MatMulApiTest, Bf16PairsMatchPortableBitForBit) {
  const internal::Bf16PairsFn simd = internal::X86Bf16Pairs(DetectSimdLevel());
  if (simd == nullptr) GTEST_SKIP() << "no SIMD bf16 pairs at " << SimdLevelName(DetectSimdLevel());
  EXPECT_EQ(internal::X86Bf16Pairs(SimdLevel::kAvx2), nullptr);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::signaling_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::denorm_min(),
                            1e-40f,
                            std::bit_cast<float>(0x3f808000u),  // a tie: rounds to even
                            std::bit_cast<float>(0x3f818000u),
                            0.0f,
                            -0.0f};
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t cols = 1 + static_cast<int64_t>(rng() % 70), stride = 1 + trial % 16;
    std::vector<float> x(static_cast<size_t>(cols));
    for (float& v : x) v = rng() % 5 == 0 ? specials[rng() % std::size(specials)] : normal(rng);
    const size_t n = static_cast<size_t>((cols + 1) / 2 * stride);
    std::vector<uint32_t> ref(n, 7u), got(n, 7u);
    internal::Bf16PairsPortable(x.data(), cols, ref.data(), stride);
    simd(x.data(), cols, got.data(), stride);
    ASSERT_EQ(got, ref) << "cols " << cols << " stride " << stride;
    EXPECT_EQ(ref[0] & 0xffffu, Fp32ToBf16(x[0]));
  }
}

TEST(MatMulApiTest, F16MatmulNamesParse) {
  for (F16Matmul mode : {F16Matmul::kExact, F16Matmul::kInt16, F16Matmul::kBf16}) {
    EXPECT_EQ(ParseF16Matmul(F16MatmulName(mode)), mode);
  }
  EXPECT_FALSE(ParseF16Matmul("fast").has_value());
}

TEST(MatMulApiTest, LevelNamesParse) {
  for (SimdLevel l : Levels()) EXPECT_EQ(ParseSimdLevel(SimdLevelName(l)), l);
  EXPECT_EQ(ParseSimdLevel("auto"), DetectSimdLevel());
  EXPECT_FALSE(ParseSimdLevel("sse9").has_value());
  EXPECT_EQ(EffectiveSimdLevel(MatMulOptions{}), DetectSimdLevel());  // default: the best
  EXPECT_EQ(EffectiveSimdLevel(MatMulOptions{SimdLevel::kPortable}), SimdLevel::kPortable);
  EXPECT_STREQ(KernelName(GgmlType::kF32, SimdLevel::kPortable), "portable/f32");
  EXPECT_STREQ(KernelName(GgmlType::kQ4_K, SimdLevel::kPortable), "portable/dequant+f32");
  if (DetectSimdLevel() >= SimdLevel::kAvx2) {
    EXPECT_STREQ(KernelName(GgmlType::kQ4_K, SimdLevel::kAvx2), "avx2/q4_k");
    EXPECT_STREQ(KernelName(GgmlType::kQ6_K, SimdLevel::kAvx2), "avx2/q6_k");
    EXPECT_STREQ(KernelName(GgmlType::kQ4_0, SimdLevel::kAvx2), "avx2/q4_0");
    for (GgmlType t : {GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kIQ4_NL,
                       GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ5_K, GgmlType::kIQ4_XS}) {
      std::string want = std::string("avx2/") + TypeName(t);
      for (char& c : want) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      EXPECT_EQ(KernelName(t, SimdLevel::kAvx2), want);
    }
  }
  if (DetectSimdLevel() >= SimdLevel::kAvx512Vnni) {
    EXPECT_STREQ(KernelName(GgmlType::kQ4_K, SimdLevel::kAvx512Vnni), "avx512vnni/q4_k");
    EXPECT_STREQ(KernelName(GgmlType::kQ4_K, SimdLevel::kAvx512Bf16), "avx512vnni/q4_k");
    EXPECT_STREQ(KernelName(GgmlType::kQ4_K, SimdLevel::kAvx512Vnni, true), "avx512vnni/q4_kx16");
    EXPECT_STREQ(KernelName(GgmlType::kIQ4_XS, SimdLevel::kAvx512Vnni, true),
                 "avx512vnni/iq4_xsx16");
    EXPECT_STREQ(KernelName(GgmlType::kQ5_1, SimdLevel::kAvx512Vnni, true), "avx512vnni/q5_1x16");
  }
  EXPECT_STREQ(KernelName(GgmlType::kQ4_0, SimdLevel::kPortable, true), "portable/dequant+f32");
  EXPECT_TRUE(CanPackRows(GgmlType::kQ8_0));
  EXPECT_EQ(PackedRowBytes(GgmlType::kQ8_0, 64), 2 * 34);
  EXPECT_EQ(PackedBytes(GgmlType::kQ8_0, 17, 64), 32 * 68);
  // F16: groups of 16 rows, 2 bytes per row and column.
  EXPECT_TRUE(CanPackRows(GgmlType::kF16));
  EXPECT_EQ(PackedRowBytes(GgmlType::kF16, 7), 14);
  EXPECT_EQ(PackedBytes(GgmlType::kF16, 17, 64), 32 * 128);
  if (DetectSimdLevel() >= SimdLevel::kAvx512) {
    EXPECT_STREQ(KernelName(GgmlType::kF16, SimdLevel::kAvx512, true), "avx512/f16x16");
  }
  // F32: groups of 16 rows, 4 bytes per row and column.
  EXPECT_TRUE(CanPackRows(GgmlType::kF32));
  EXPECT_EQ(PackedRowBytes(GgmlType::kF32, 7), 28);
  EXPECT_EQ(PackedBytes(GgmlType::kF32, 17, 64), 32 * 256);
  if (DetectSimdLevel() >= SimdLevel::kAvx512) {
    EXPECT_STREQ(KernelName(GgmlType::kF32, SimdLevel::kAvx512, true), "avx512/f32x16");
  }
  // BF16: groups of 16 rows, 4 bytes (a pair of columns) per row and pair.
  EXPECT_TRUE(CanPackRows(GgmlType::kBF16));
  EXPECT_EQ(PackedRowBytes(GgmlType::kBF16, 7), 16);
  EXPECT_EQ(PackedBytes(GgmlType::kBF16, 17, 64), 32 * 128);
  if (DetectSimdLevel() >= SimdLevel::kAvx512Bf16) {
    EXPECT_STREQ(KernelName(GgmlType::kBF16, SimdLevel::kAvx512Bf16, true), "avx512bf16/bf16x16");
  }
  EXPECT_EQ(PackedRowBytes(GgmlType::kQ5_0, 544), 2 * 16 * 22);
  // Two super-blocks per group: fp16 d and dmin x 2, 16 scale and 16 min bytes, (qh,) qs.
  EXPECT_EQ(PackedRowBytes(GgmlType::kQ4_K, 768), 2 * (8 + 32 + 256));
  EXPECT_EQ(PackedRowBytes(GgmlType::kQ5_K, 512), 8 + 32 + 64 + 256);
  EXPECT_EQ(PackedRowBytes(GgmlType::kIQ4_XS, 256), 4 + 16 + 256);
  // Sub-blocks of 16: fp16 d (and dmin) x 2, 32 scale bytes, (nibbles,) 2-bit planes, (qh).
  EXPECT_EQ(PackedRowBytes(GgmlType::kQ2_K, 512), 8 + 32 + 128);
  EXPECT_EQ(PackedRowBytes(GgmlType::kQ3_K, 512), 4 + 32 + 128 + 64);
  EXPECT_EQ(PackedRowBytes(GgmlType::kQ6_K, 512), 4 + 32 + 256 + 128);
}

// MatMulSameInput gives MatMul's bits for every matrix, also when their types differ and for an
// empty matrix: from the file's rows (a Q4_K_M layer's q / k in Q4_K and v in Q6_K) and from
// packed rows (a Q2_K layer's q / k in Q2_K and v in Q3_K, which share their activations and
// parallel loop, beside a Q8_0 matrix, whose kernel reads other activations).
void ExpectSameInputMatchesMatMul(std::vector<Matrix> ms, bool pack) {
  std::vector<WeightView> views;
  for (Matrix& m : ms) {
    if (pack && m.rows > 0) m.Pack();
    views.push_back(m.view());
  }
  std::vector<const WeightView*> ws;
  for (const WeightView& v : views) ws.push_back(&v);
  ThreadTeam team(3);
  for (SimdLevel level : Levels()) {
    for (int64_t n : {1, 2, 33, 130}) {
      SCOPED_TRACE(::testing::Message() << SimdLevelName(level) << " n=" << n << " pack " << pack);
      const std::vector<float> x = RandomActivations(n, 512, 45);
      std::vector<std::vector<float>> shared(ms.size()), single(ms.size());
      std::vector<float*> ys;
      for (size_t i = 0; i < ms.size(); ++i) {
        shared[i].assign(static_cast<size_t>(n * ms[i].rows) + 1, NAN);
        single[i].assign(shared[i].size(), NAN);
        ys.push_back(shared[i].data());
        MatMul(views[i], x.data(), n, single[i].data(), MatMulOptions{level});
      }
      MatMulSameInput(ws, x.data(), n, ys, MatMulOptions{level});
      for (size_t i = 0; i < ms.size(); ++i) {
        EXPECT_EQ(0, std::memcmp(shared[i].data(), single[i].data(), shared[i].size() * 4)) << i;
        EXPECT_FALSE(std::isnan(shared[i].front()) && ms[i].rows > 0) << i;
      }
      // On a ThreadTeam: claims end at each matrix's last row, the same bits.
      for (std::vector<float>& y : shared) std::fill(y.begin(), y.end(), NAN);
      MatMulSameInput(ws, x.data(), n, ys, MatMulOptions{level, kDefaultF16Matmul, false, &team});
      for (size_t i = 0; i < ms.size(); ++i) {
        EXPECT_EQ(0, std::memcmp(shared[i].data(), single[i].data(), shared[i].size() * 4))
            << i << " on a team";
      }
    }
  }
}

TEST(MatMulApiTest, SameInputMatchesMatMulBitForBit) {
  ExpectSameInputMatchesMatMul(
      {RandomMatrix(GgmlType::kQ4_K, 70, 512, 41), RandomMatrix(GgmlType::kQ4_K, 33, 512, 42),
       RandomMatrix(GgmlType::kQ6_K, 17, 512, 43), RandomMatrix(GgmlType::kQ4_K, 0, 512, 44)},
      false);
}

TEST(MatMulApiTest, SameInputMatchesMatMulBitForBitFromPackedRows) {
  ExpectSameInputMatchesMatMul(
      {RandomMatrix(GgmlType::kQ2_K, 70, 512, 51), RandomMatrix(GgmlType::kQ8_0, 40, 512, 52),
       RandomMatrix(GgmlType::kQ2_K, 33, 512, 53), RandomMatrix(GgmlType::kQ3_K, 17, 512, 54),
       RandomMatrix(GgmlType::kQ3_K, 0, 512, 55)},
      true);
}

// Tall enough that a team's claims join several 64-row GEMV tiles and meet the ends of the
// matrices (claims of ceil(remaining / 6) over 5 + 4 + 3 + 2 tiles).
TEST(MatMulApiTest, SameInputMatchesMatMulBitForBitInJoinedClaims) {
  ExpectSameInputMatchesMatMul(
      {RandomMatrix(GgmlType::kQ4_K, 300, 512, 61), RandomMatrix(GgmlType::kQ4_K, 200, 512, 62),
       RandomMatrix(GgmlType::kQ6_K, 130, 512, 63), RandomMatrix(GgmlType::kQ4_K, 70, 512, 64)},
      true);
}

// MatMulOptions::prefetch_next: each team member is handed the rows of its first claim in the
// next call's loop (the GEMV's 64-row tiles numbered across q, k, v: 5 + 4 + 3 tiles, so member
// 0 claims q's first 3 tiles and member 1 q's last 2 and k's first), and the call's own results
// keep their bits.
TEST(MatMulApiTest, PrefetchNextHandsEachMemberItsFirstClaim) {
  const SimdLevel level = DetectSimdLevel();
  if (!ReadsPackedRows(GgmlType::kQ4_K, level)) GTEST_SKIP() << "no packed Q4_K kernel here";
  Matrix current = RandomMatrix(GgmlType::kQ4_K, 100, 512, 71);
  Matrix q = RandomMatrix(GgmlType::kQ4_K, 300, 512, 72);
  Matrix k = RandomMatrix(GgmlType::kQ4_K, 200, 512, 73);
  Matrix v = RandomMatrix(GgmlType::kQ4_K, 130, 512, 74);
  for (Matrix* m : {&current, &q, &k, &v}) m->Pack();
  const WeightView qv = q.view(), kv = k.view(), vv = v.view();
  const WeightView* next[] = {&qv, &kv, &vv};
  ThreadTeam team(2);
  const std::vector<float> x = RandomActivations(1, 512, 75);
  std::vector<float> y(100), y_plain(100);
  MatMul(current.view(), x.data(), 1, y_plain.data(),
         MatMulOptions{level, kDefaultF16Matmul, false, &team, {}});
  MatMul(current.view(), x.data(), 1, y.data(),
         MatMulOptions{level, kDefaultF16Matmul, false, &team, next});
  EXPECT_EQ(0, std::memcmp(y.data(), y_plain.data(), y.size() * 4));
  const int64_t stride = PackedRowBytes(GgmlType::kQ4_K, 512);
  const std::vector<ThreadTeam::ByteRange> first = team.PrefetchRanges(0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].data, qv.packed);
  EXPECT_EQ(first[0].bytes, 192 * stride);
  const std::vector<ThreadTeam::ByteRange> second = team.PrefetchRanges(1);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].data, qv.packed + 192 * stride);
  EXPECT_EQ(second[0].bytes, 108 * stride);
  EXPECT_EQ(second[1].data, kv.packed);
  EXPECT_EQ(second[1].bytes, 64 * stride);
}

}  // namespace
}  // namespace pagoda::cpu::mm
