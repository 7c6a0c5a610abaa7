// Quantized weight formats and `pagoda quantize`:
//  - bit-exact dequantization of hand-built blocks;
//  - quantize -> dequantize round trips on random data, and re-quantization stability;
//  - dequantized llama.cpp Q4_K/Q6_K tensors against their F32 originals; our quantizers
//    against llama.cpp's blocks for every type both have;
//  - llama.cpp's synth-gqa files of every type: logits against llama.cpp's, greedy prefix;
//  - `pagoda quantize` / `make-model --dtype` output: loads, follows the mix, equals llama.cpp's
//    file of that mix, logits in tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include "common/numerics.h"
#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/packed_weights.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/quants.h"
#include "model/tensor_types.h"
#include "tests/reference/llama_forward.h"
#include "tests/reference/synth_reference.h"
#include "tests/run_pagoda.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

using testing::LoadModelOrFail;
using testing::RunPagoda;
using testing::SharedPath;

void PutFp16(uint8_t* p, float f) {
  const uint16_t h = Fp32ToFp16(f);
  std::memcpy(p, &h, 2);
}

// ---- hand-built blocks --------------------------------------------------------------------

// A row length from a file can be anything: the byte count must not overflow (found by
// fuzz_gguf: ne[0] = 6365935209744957696 F32 elements; input in tests/fuzz/regressions/gguf/).
TEST(QuantBlocks, RowBytesRefusesOverflow) {
  EXPECT_EQ(RowBytes(GgmlType::kF32, 1024), 4096);
  EXPECT_EQ(RowBytes(GgmlType::kQ8_0, 64), 68);
  EXPECT_FALSE(RowBytes(GgmlType::kQ8_0, 33));
  EXPECT_FALSE(RowBytes(GgmlType::kF32, -4));
  EXPECT_FALSE(RowBytes(GgmlType::kF32, 6365935209744957696));
  EXPECT_FALSE(RowBytes(GgmlType::kF32, std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(RowBytes(GgmlType::kF32, std::numeric_limits<int64_t>::max() / 4),
            std::numeric_limits<int64_t>::max() / 4 * 4);
}

TEST(QuantBlocks, Q4_0HandBuilt) {
  std::array<uint8_t, 18> block{};
  PutFp16(block.data(), 0.5f);
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float out[32];
  DequantizeRow(GgmlType::kQ4_0, block.data(), out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * (j - 8)) << j;
    EXPECT_EQ(out[j + 16], 0.5f * (7 - j)) << j;
  }
}

TEST(QuantBlocks, Q4_KHandBuilt) {
  const uint8_t ls[8] = {1, 2, 3, 4, 17, 33, 48, 63}, lm[8] = {0, 5, 10, 15, 20, 40, 50, 63};
  std::array<uint8_t, 144> block{};
  PutFp16(block.data(), 1.0f);
  PutFp16(block.data() + 2, 0.5f);
  uint8_t* s = block.data() + 4;
  for (int j = 0; j < 4; ++j) {  // ggml's 12-byte packing, written out by hand
    s[j] = static_cast<uint8_t>(ls[j] | (ls[j + 4] >> 4) << 6);
    s[j + 4] = static_cast<uint8_t>(lm[j] | (lm[j + 4] >> 4) << 6);
    s[j + 8] = static_cast<uint8_t>((ls[j + 4] & 15) | (lm[j + 4] & 15) << 4);
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    quants::GetScaleMinK4(j, s, &sc, &m);
    EXPECT_EQ(sc, ls[j]);
    EXPECT_EQ(m, lm[j]);
  }
  for (int i = 0; i < 128; ++i) block[16 + i] = static_cast<uint8_t>((i % 16) | (15 - i % 16) << 4);
  float out[256];
  DequantizeRow(GgmlType::kQ4_K, block.data(), out, 256);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      EXPECT_EQ(out[64 * c + l], ls[2 * c] * (l % 16) - 0.5f * lm[2 * c]) << c << " " << l;
      EXPECT_EQ(out[64 * c + 32 + l], ls[2 * c + 1] * (15 - l % 16) - 0.5f * lm[2 * c + 1]);
    }
  }
}

TEST(QuantBlocks, Q6_KHandBuilt) {
  std::array<uint8_t, 210> block{};
  PutFp16(block.data() + 208, 0.25f);
  for (int i = 0; i < 16; ++i) block[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 8));
  for (int e = 0; e < 256; ++e) {  // level of element e is e % 64
    const int q = e % 64, h = e / 128, g = (e % 128) / 32, l = e % 32;
    uint8_t& low = block[64 * h + l + (g & 1) * 32];
    low |= static_cast<uint8_t>((q & 15) << (g >= 2 ? 4 : 0));
    block[128 + 32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * g));
  }
  float out[256];
  DequantizeRow(GgmlType::kQ6_K, block.data(), out, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(out[e], 0.25f * (e / 16 - 8) * (e % 64 - 32)) << e;
}

// The further formats, each block written field by field from model/quants.h's layout.
TEST(QuantBlocks, Q5_0AndQ5_1HandBuilt) {
  const uint32_t qh = 0xA5C3F00Fu;  // element e's 5th bit is bit e
  std::array<uint8_t, 22> b50{};
  std::array<uint8_t, 24> b51{};
  PutFp16(b50.data(), 0.5f);
  PutFp16(b51.data(), 0.5f);
  PutFp16(b51.data() + 2, -3.0f);
  std::memcpy(b50.data() + 2, &qh, 4);
  std::memcpy(b51.data() + 4, &qh, 4);
  for (int j = 0; j < 16; ++j) b50[6 + j] = b51[8 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float y50[32], y51[32];
  DequantizeRow(GgmlType::kQ5_0, b50.data(), y50, 32);
  DequantizeRow(GgmlType::kQ5_1, b51.data(), y51, 32);
  for (int e = 0; e < 32; ++e) {
    const int q = (e < 16 ? e : 31 - e) | static_cast<int>((qh >> e) & 1) << 4;
    EXPECT_EQ(y50[e], 0.5f * (q - 16)) << e;
    EXPECT_EQ(y51[e], 0.5f * q - 3.0f) << e;
  }
}

TEST(QuantBlocks, IQ4_NLAndIQ4_XSHandBuilt) {
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::array<uint8_t, 18> nl{};
  PutFp16(nl.data(), 0.25f);
  for (int j = 0; j < 16; ++j) nl[2 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  float y[256];
  DequantizeRow(GgmlType::kIQ4_NL, nl.data(), y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * levels[j]) << j;
    EXPECT_EQ(y[j + 16], 0.25f * levels[15 - j]) << j;
  }
  std::array<uint8_t, 136> xs{};
  PutFp16(xs.data(), 0.5f);
  int ls[8];
  uint16_t scales_h = 0;
  for (int ib = 0; ib < 8; ++ib) {
    ls[ib] = (ib * 23 + 5) % 64;  // 6-bit scale of sub-block ib
    xs[4 + ib / 2] |= static_cast<uint8_t>((ls[ib] & 15) << (4 * (ib % 2)));
    scales_h |= static_cast<uint16_t>((ls[ib] >> 4) << (2 * ib));
  }
  std::memcpy(xs.data() + 2, &scales_h, 2);
  for (int i = 0; i < 128; ++i) xs[8 + i] = static_cast<uint8_t>((i % 16) | ((i + 3) % 16) << 4);
  DequantizeRow(GgmlType::kIQ4_XS, xs.data(), y, 256);
  for (int e = 0; e < 256; ++e) {
    const int ib = e / 32, l = e % 32, byte = 16 * ib + l % 16;
    const int nib = l < 16 ? byte % 16 : (byte + 3) % 16;
    EXPECT_EQ(y[e], 0.5f * (ls[ib] - 32) * levels[nib]) << e;
  }
}

TEST(QuantBlocks, Q2_KAndQ3_KHandBuilt) {
  float y[256];
  std::array<uint8_t, 84> q2{};
  for (int s = 0; s < 16; ++s) q2[s] = static_cast<uint8_t>(s | (15 - s) << 4);  // sc | m << 4
  for (int e = 0; e < 256; ++e) {  // level of element e: (e / 7) % 4
    const int h = e / 128, jj = (e % 128) / 32, l = e % 32;
    q2[16 + 32 * h + l] |= static_cast<uint8_t>(((e / 7) % 4) << (2 * jj));
  }
  PutFp16(q2.data() + 80, 0.5f);
  PutFp16(q2.data() + 82, 0.25f);
  DequantizeRow(GgmlType::kQ2_K, q2.data(), y, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 0.5f * (e / 16) * ((e / 7) % 4) - 0.25f * (15 - e / 16)) << e;
  }
  std::array<uint8_t, 110> q3{};
  int sv[16];
  for (int s = 0; s < 16; ++s) {
    sv[s] = (s * 13 + 7) % 64;  // stored 6-bit scale (value sv - 32)
    q3[96 + s % 8] |= static_cast<uint8_t>((sv[s] & 15) << (s < 8 ? 0 : 4));
    q3[96 + 8 + s % 4] |= static_cast<uint8_t>((sv[s] >> 4) << (2 * (s / 4)));
  }
  for (int e = 0; e < 256; ++e) {  // low bits e % 4, high bit when e % 3 == 0
    const int h = e / 128, jj = (e % 128) / 32, l = e % 32;
    q3[32 + 32 * h + l] |= static_cast<uint8_t>((e % 4) << (2 * jj));
    if (e % 3 == 0) q3[l] |= static_cast<uint8_t>(1 << (4 * h + jj));
  }
  PutFp16(q3.data() + 108, 0.125f);
  DequantizeRow(GgmlType::kQ3_K, q3.data(), y, 256);
  for (int e = 0; e < 256; ++e) {
    const int q = (e % 4) | (e % 3 == 0 ? 4 : 0);
    EXPECT_EQ(y[e], 0.125f * (sv[e / 16] - 32) * (q - 4)) << e;
  }
}

TEST(QuantBlocks, Q5_KHandBuilt) {
  const uint8_t ls[8] = {1, 2, 3, 4, 17, 33, 48, 63}, lm[8] = {0, 5, 10, 15, 20, 40, 50, 63};
  std::array<uint8_t, 176> b{};
  PutFp16(b.data(), 1.0f);
  PutFp16(b.data() + 2, 0.5f);
  quants::PackScaleMinK4(ls, lm, b.data() + 4);
  for (int e = 0; e < 256; ++e) {  // level of element e: e % 32
    const int c = e / 64, half = (e % 64) / 32, l = e % 32, q = (e * 5) % 32;
    b[48 + 32 * c + l] |= static_cast<uint8_t>((q & 15) << (4 * half));
    b[16 + l] |= static_cast<uint8_t>((q >> 4) << (2 * c + half));
  }
  float y[256];
  DequantizeRow(GgmlType::kQ5_K, b.data(), y, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 1.0f * ls[e / 32] * ((e * 5) % 32) - 0.5f * lm[e / 32]) << e;
  }
}

// ---- round trips on random data -----------------------------------------------------------

struct RoundTripCase {
  GgmlType type;
  double max_rel_rms;   // RMS error / RMS of the data (Gaussian rows with a few outliers)
  double min_same = 0;  // fraction of blocks re-quantized identically (1: all of them)
};

std::vector<float> RandomRows(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  for (int64_t i = 0; i < n; i += 997) x[i] *= 8;  // outliers
  for (int64_t i = 512; i < 544; ++i) x[i] = 0;    // an all-zero block
  return x;
}

class RoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTrip, BoundedErrorAndStable) {
  const auto [type, bound, min_same] = GetParam();
  const int64_t n = 256 * 64;
  const std::vector<float> x = RandomRows(n, 7);
  std::vector<uint8_t> q(static_cast<size_t>(*RowBytes(type, n)));
  QuantizeRow(type, x.data(), q.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  DequantizeRow(type, q.data(), y.data(), n);
  double err2 = 0, x2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    err2 += (x[i] - y[i]) * (x[i] - y[i]);
    x2 += x[i] * x[i];
  }
  for (int64_t i = 512; i < 544; ++i) EXPECT_EQ(y[i], 0.0f);
  const double rel = std::sqrt(err2 / x2);
  EXPECT_LE(rel, bound) << TypeName(type);
  // Re-quantizing the dequantized values must give the same blocks back (exactly for the types
  // scaled by their block's extremes; mostly for the K-quants, whose scale search may land
  // elsewhere).
  std::vector<uint8_t> q2(q.size());
  QuantizeRow(type, y.data(), q2.data(), n);
  const int64_t bs = TypeTraits(type).type_size;
  int64_t same = 0;
  for (size_t b = 0; b < q.size(); b += bs) same += std::memcmp(&q[b], &q2[b], bs) == 0;
  const double same_frac = static_cast<double>(same) / (q.size() / bs);
  EXPECT_GE(same_frac, min_same) << TypeName(type);
  std::printf("%s: relative rms error %.4f (bound %.3f), re-quantization identical %.1f%%\n",
              TypeName(type), rel, bound, 100 * same_frac);
}

INSTANTIATE_TEST_SUITE_P(
    Types, RoundTrip,
    ::testing::Values(RoundTripCase{GgmlType::kQ8_0, 0.01}, RoundTripCase{GgmlType::kQ4_0, 0.13},
                      RoundTripCase{GgmlType::kQ4_1, 0.13}, RoundTripCase{GgmlType::kQ5_0, 0.07},
                      RoundTripCase{GgmlType::kQ5_1, 0.07}, RoundTripCase{GgmlType::kQ2_K, 0.45},
                      RoundTripCase{GgmlType::kQ3_K, 0.25}, RoundTripCase{GgmlType::kQ4_K, 0.11},
                      RoundTripCase{GgmlType::kQ5_K, 0.06}, RoundTripCase{GgmlType::kQ6_K, 0.03},
                      RoundTripCase{GgmlType::kIQ4_NL, 0.11},
                      RoundTripCase{GgmlType::kIQ4_XS, 0.11}),
    [](const auto& info) { return std::string(TypeName(info.param.type)); });

// ---- llama.cpp-quantized data ------------------------------------------------------------

std::unique_ptr<GgufFile> OpenShared(const std::string& rel) {
  auto f = GgufFile::Open(SharedPath(rel));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(f).value() : nullptr;
}

// Step (one quantization level) of each sub-block of a super-block: d * scale.
std::vector<float> SubBlockSteps(GgmlType type, const uint8_t* block) {
  std::vector<float> steps;
  uint16_t h;
  if (type == GgmlType::kQ4_K) {
    std::memcpy(&h, block, 2);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      quants::GetScaleMinK4(j, block + 4, &sc, &m);
      steps.push_back(Fp16ToFp32(h) * sc);
    }
  } else {
    std::memcpy(&h, block + 208, 2);
    for (int j = 0; j < 16; ++j) {
      steps.push_back(Fp16ToFp32(h) *
                      std::fabs(static_cast<float>(static_cast<int8_t>(block[192 + j]))));
    }
  }
  return steps;
}

// Dequantized llama.cpp Q4_K / Q6_K tensors vs the F32 weights they were made from: every
// element within 1.5 quantization steps (d * sub-block scale) of its sub-block: half a step of
// rounding plus the clamping at the range ends after the scales are rounded to 6/8 bits
// (measured worst: 1.05 steps). And our quantizer reproduces llama.cpp's blocks bit for bit
// (same reference algorithm; measured 100 % of 12800 blocks).
TEST(LlamaCppQuantized, DequantizesCloseToF32AndMatchesOurQuantizer) {
  auto f32 = OpenShared("models/synth-gqa/llama-gqa-f32.gguf");
  auto q = OpenShared("models/synth-gqa/llama-gqa-q4_k_m.gguf");
  ASSERT_TRUE(f32 && q);
  int checked = 0;
  int64_t blocks = 0, same_blocks = 0;
  for (const GgufTensor& t : q->tensors()) {
    if (t.type != GgmlType::kQ4_K && t.type != GgmlType::kQ6_K) continue;
    const GgufTensor* ref = f32->FindTensor(t.name);
    ASSERT_TRUE(ref && ref->type == GgmlType::kF32 && ref->ne == t.ne) << t.name;
    const int64_t cols = t.ne[0], rows = t.num_elements() / cols,
                  row_bytes = *RowBytes(t.type, cols);
    const int64_t sub = t.type == GgmlType::kQ4_K ? 32 : 16, bs = TypeTraits(t.type).type_size;
    std::vector<float> y(static_cast<size_t>(cols));
    std::vector<uint8_t> ours(static_cast<size_t>(row_bytes));
    double worst = 0;  // max |error| / step
    std::vector<float> zero_step_bound(static_cast<size_t>(cols / 256));
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = t.data + r * row_bytes;
      const float* x = reinterpret_cast<const float*>(ref->data) + r * cols;
      DequantizeRow(t.type, src, y.data(), cols);
      for (int64_t b = 0; b < cols / 256; ++b) {
        const std::vector<float> steps = SubBlockSteps(t.type, src + b * bs);
        // A Q6_K sub-block whose int8 scale rounds to 0 (|scale| < d / 2, so every |x| in it
        // is below about 32 * d / 2) dequantizes to 0: bound its error by 16 d.
        uint16_t d16;
        std::memcpy(&d16, src + b * bs + 208, 2);
        zero_step_bound[b] = t.type == GgmlType::kQ6_K ? 16 * Fp16ToFp32(d16) : 0.0f;
        for (int64_t i = 0; i < 256; ++i) {
          const double e = std::fabs(y[b * 256 + i] - x[b * 256 + i]);
          worst = std::max(worst, e / std::max(steps[i / sub], zero_step_bound[b]));
        }
      }
      QuantizeRow(t.type, x, ours.data(), cols);
      for (int64_t b = 0; b < cols / 256; ++b) {
        same_blocks += std::memcmp(ours.data() + b * bs, src + b * bs, bs) == 0;
        ++blocks;
      }
    }
    EXPECT_LE(worst, 1.5) << t.name << " (" << TypeName(t.type) << ")";
    ++checked;
  }
  EXPECT_EQ(checked, 30);  // 25 Q4_K + 5 Q6_K
  const double same = static_cast<double>(same_blocks) / blocks;
  EXPECT_GE(same, 0.99);
  std::printf("our Q4_K/Q6_K quantization reproduces %.3f%% of llama.cpp's %lld blocks\n",
              100 * same, static_cast<long long>(blocks));
}

// Our reference quantizers reproduce llama-quantize's blocks for every type they share with the
// llama.cpp files of ../shared (made without an importance matrix from llama-gqa-f32.gguf): each
// tensor of those types, quantized from the F32 original, equals llama.cpp's bytes (at least
// 99.9 % of the blocks of each file, 100 % measured).
TEST(LlamaCppQuantized, OurQuantizersReproduceLlamaCppBlocks) {
  auto f32 = OpenShared("models/synth-gqa/llama-gqa-f32.gguf");
  ASSERT_TRUE(f32);
  int64_t total_checked = 0;
  for (const char* file : {"q4_0", "q4_1", "q5_0", "q5_1", "q5_k_m", "q5_k_s", "q3_k_m", "q3_k_s",
                           "q2_k", "q6_k", "iq4_nl", "iq4_xs"}) {
    auto q = OpenShared(std::string("models/synth-gqa/llama-gqa-") + file + ".gguf");
    ASSERT_TRUE(q);
    int64_t blocks = 0, same = 0;
    for (const GgufTensor& t : q->tensors()) {
      if (t.ne.size() != 2 || !CanQuantize(t.type)) continue;
      const GgufTensor* ref = f32->FindTensor(t.name);
      ASSERT_TRUE(ref && ref->type == GgmlType::kF32 && ref->ne == t.ne) << t.name;
      const int64_t cols = t.ne[0], rows = t.ne[1], row_bytes = *RowBytes(t.type, cols);
      const int64_t bs = TypeTraits(t.type).type_size;
      std::vector<uint8_t> ours(static_cast<size_t>(row_bytes));
      for (int64_t r = 0; r < rows; ++r) {
        QuantizeRow(t.type, reinterpret_cast<const float*>(ref->data) + r * cols, ours.data(),
                    cols);
        for (int64_t b = 0; b < row_bytes; b += bs) {
          same += std::memcmp(ours.data() + b, t.data + r * row_bytes + b, bs) == 0;
          ++blocks;
        }
      }
    }
    EXPECT_GT(blocks, 0) << file;
    EXPECT_GE(static_cast<double>(same), 0.999 * static_cast<double>(blocks)) << file;
    std::printf("llama-gqa-%s: our quantizers reproduce %lld of %lld blocks\n", file,
                static_cast<long long>(same), static_cast<long long>(blocks));
    total_checked += blocks;
  }
  EXPECT_GT(total_checked, 0);
}

// Acceptance: llama.cpp's own Q4_K_M and Q8_0 files match llama.cpp's logits within the
// README's tolerances. CTest also runs this suite once per kernel level (PAGODA_KERNELS, see
// tests/model/CMakeLists.txt): the test reads the variable and caps the forward's matmuls at
// that level; the level in use is printed and checked.
cpu::mm::MatMulOptions KernelOptions() {
  cpu::mm::MatMulOptions options;
  if (const char* env = std::getenv("PAGODA_KERNELS")) {
    const auto want = cpu::ParseSimdLevel(env);
    EXPECT_TRUE(want.has_value()) << env;
    if (want) {
      options.max_level = *want;
      EXPECT_EQ(cpu::mm::EffectiveSimdLevel(options), std::min(*want, cpu::DetectSimdLevel()));
    }
  }
  return options;
}

std::string KernelLevelInUse(const cpu::mm::MatMulOptions& options) {
  const cpu::SimdLevel level = cpu::mm::EffectiveSimdLevel(options);
  return std::string(" at ") + cpu::SimdLevelName(level) + " (" +
         cpu::mm::KernelName(GgmlType::kQ4_K, level) + ", " +
         cpu::mm::KernelName(GgmlType::kQ6_K, level) + ", " +
         cpu::mm::KernelName(GgmlType::kQ8_0, level) + ")";
}

TEST(LlamaCppQuantized, Q4KMModelMatchesLlamaCppLogits) {
  auto model = LoadModelOrFail(SharedPath("models/synth-gqa/llama-gqa-q4_k_m.gguf"));
  ASSERT_TRUE(model);
  const cpu::mm::MatMulOptions options = KernelOptions();
  testing::ExpectWithinSynthReference(
      *model, "models/synth-gqa/llama-gqa-q4_k_m.reference.json", 0.8, 0.16,
      "llama-gqa-q4_k_m (llama.cpp file)" + KernelLevelInUse(options), options);
}

TEST(LlamaCppQuantized, Q8_0ModelMatchesLlamaCppLogits) {
  auto model = LoadModelOrFail(SharedPath("models/synth-gqa/llama-gqa-q8_0.gguf"));
  ASSERT_TRUE(model);
  const cpu::mm::MatMulOptions options = KernelOptions();
  testing::ExpectWithinSynthReference(
      *model, "models/synth-gqa/llama-gqa-q8_0.reference.json", 0.6, 0.12,
      "llama-gqa-q8_0 (llama.cpp file)" + KernelLevelInUse(options), options);
  // Again with the CPU backend's packed copies where the level reads them (AVX512-VNNI). The
  // teacher-forced pass above takes the token lanes (file rows) either way, so the packed rows
  // are checked by free-running greedy decoding, whose 1-token steps read them.
  cpu::PackedWeights packed;
  model->weights = packed.Pack(model->weights, cpu::mm::EffectiveSimdLevel(options));
  if (packed.bytes() == 0) return;
  const int greedy = testing::ExpectGreedyRobustPrefix(
      *model, "models/synth-gqa/llama-gqa-q8_0.reference.json", options);
  EXPECT_GT(greedy, 0);
  std::printf("  packed: greedy tokens equal over the robust prefixes: %d\n", greedy);
}

// Every llama.cpp-quantized synth-gqa file (the further types of the synth-gqa README) against
// llama.cpp's logits within the file's suggested tolerance (its meta.suggested_tolerance), and
// free-running greedy decoding equal over each case's robust prefix; at each kernel level as the
// two tests above (PAGODA_KERNELS); files with packable types again with packed copies.
class LlamaCppQuantizedFile : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppQuantizedFile, ModelMatchesLlamaCppLogits) {
  const std::string base = std::string("models/synth-gqa/llama-gqa-") + GetParam();
  auto model = LoadModelOrFail(SharedPath(base + ".gguf"));
  ASSERT_TRUE(model);
  const auto meta = testing::LoadJson(SharedPath(base + ".reference.json"))["meta"];
  // The file holds the types its reference lists, so each of them is exercised.
  for (const GgufTensor& t : model->file->tensors()) {
    EXPECT_EQ(TypeName(t.type), meta["tensor_types"][t.name].get<std::string>()) << t.name;
  }
  const cpu::mm::MatMulOptions options = KernelOptions();
  const double max_abs = meta["suggested_tolerance"]["max_abs_logit"].get<double>();
  const double rms = meta["suggested_tolerance"]["rms_logit"].get<double>();
  // The logits and greedy checks, labelled with the kernels of the file's types.
  const auto check = [&](bool packed) {
    std::string level = KernelLevelInUse(options);
    for (const auto& [name, type] : meta["tensor_types"].items()) {
      const auto parsed = ParseTypeName(type.get<std::string>());
      ASSERT_TRUE(parsed) << type;
      const std::string kernel =
          cpu::mm::KernelName(*parsed, cpu::mm::EffectiveSimdLevel(options), packed);
      if (level.find(kernel) == std::string::npos) level += " " + kernel;
    }
    const std::string what = std::string("llama-gqa-") + GetParam() + " (llama.cpp file)" +
                             (packed ? " packed" : "") + level;
    testing::ExpectWithinSynthReference(*model, base + ".reference.json", max_abs, rms, what,
                                        options);
    const int greedy = testing::ExpectGreedyRobustPrefix(*model, base + ".reference.json", options);
    std::printf("  greedy tokens equal over the robust prefixes: %d\n", greedy);
  };
  check(false);
  // Again with the CPU backend's packed copies (cpu::PackedWeights) where the types have them.
  cpu::PackedWeights packed;
  model->weights = packed.Pack(model->weights, cpu::mm::EffectiveSimdLevel(options));
  if (packed.bytes() > 0) check(true);
}

INSTANTIATE_TEST_SUITE_P(Types, LlamaCppQuantizedFile,
                         ::testing::Values("q4_0", "q4_1", "q5_0", "q5_1", "q5_k_m", "q5_k_s",
                                           "q3_k_m", "q3_k_s", "q2_k", "q6_k", "iq4_nl", "iq4_xs"),
                         [](const auto& info) { return std::string(info.param); });

// ---- pagoda quantize / make-model ---------------------------------------------------------

struct CliCase {
  const char* type;
  int64_t file_type;
  const char* ref;        // reference json to compare logits with (synth-gqa/<ref>)
  double max_abs, rms;    // its tolerance
  const char* llama_cpp;  // llama.cpp's file of this type, whose tensors ours must equal
};

class QuantizeCli : public ::testing::TestWithParam<CliCase> {};

TEST_P(QuantizeCli, SynthGqaLoadsFollowsMixAndStaysInTolerance) {
  const CliCase& cc = GetParam();
  testing::TempDir dir;
  const std::string out = dir.File(std::string("synth-") + cc.type + ".gguf");
  ASSERT_EQ(RunPagoda("quantize " + SharedPath("models/synth-gqa/llama-gqa-f32.gguf") + " " + out +
                      " --type " + cc.type + " --json")
                .exit_code,
            0);
  auto model = LoadModelOrFail(out);
  ASSERT_TRUE(model);
  EXPECT_EQ(*model->file->GetInt("general.file_type"), cc.file_type);
  // The mix: Q8_0 everywhere for q8_0; for the others llama.cpp's exact types for this model
  // (the tensor_types of the llama.cpp file's reference json); 1-D tensors F32.
  const auto ref_json = testing::LoadJson(SharedPath(std::string("models/synth-gqa/") + cc.ref));
  for (const GgufTensor& t : model->file->tensors()) {
    std::string want = t.ne.size() == 1 ? "F32" : "Q8_0";
    if (std::string(cc.type) != "q8_0") want = ref_json["meta"]["tensor_types"][t.name];
    EXPECT_EQ(TypeName(t.type), want) << t.name;
  }
  const std::string what = std::string("pagoda quantize --type ") + cc.type + " vs ";
  testing::ExpectWithinSynthReference(*model, std::string("models/synth-gqa/") + cc.ref, cc.max_abs,
                                      cc.rms, what + cc.ref);
  if (std::string(cc.ref) != "llama-gqa-f32.reference.json") {  // printed, not a check
    const auto d =
        testing::CompareWithSynthReference(*model, "models/synth-gqa/llama-gqa-f32.reference.json");
    std::printf("%sf32 reference (the quantization error itself): prompt max %.3g rms %.3g\n",
                what.c_str(), d.prompt.max_abs, d.prompt.rms());
  }
  if (cc.llama_cpp) {  // our quantizer reproduces llama-quantize's tensors bit for bit
    auto theirs = OpenShared(std::string("models/synth-gqa/") + cc.llama_cpp);
    ASSERT_TRUE(theirs);
    for (const GgufTensor& t : model->file->tensors()) {
      const GgufTensor* u = theirs->FindTensor(t.name);
      ASSERT_TRUE(u) << t.name;
      EXPECT_TRUE(u->type == t.type && u->nbytes == t.nbytes &&
                  std::memcmp(u->data, t.data, t.nbytes) == 0)
          << t.name << " differs from " << cc.llama_cpp;
    }
  }
}

// The quantized mixes are compared with llama.cpp's logits for its own file of that mix (our
// tensors equal its bytes) within the synth-gqa README's tolerance for that file: vs the F32
// reference even llama.cpp's Q4_K_M is 3.2 / 0.70 off, beyond 0.8 / 0.16.
INSTANTIATE_TEST_SUITE_P(
    Types, QuantizeCli,
    ::testing::Values(
        CliCase{"q8_0", 7, "llama-gqa-f32.reference.json", 0.6, 0.12, "llama-gqa-q8_0.gguf"},
        CliCase{"q4_k_m", 15, "llama-gqa-q4_k_m.reference.json", 0.8, 0.16,
                "llama-gqa-q4_k_m.gguf"},
        CliCase{"q4_0", 2, "llama-gqa-q4_0.reference.json", 0.6, 0.11, "llama-gqa-q4_0.gguf"},
        CliCase{"q5_0", 8, "llama-gqa-q5_0.reference.json", 0.6, 0.12, "llama-gqa-q5_0.gguf"},
        CliCase{"q5_k_m", 17, "llama-gqa-q5_k_m.reference.json", 0.8, 0.16,
                "llama-gqa-q5_k_m.gguf"},
        CliCase{"q3_k_m", 12, "llama-gqa-q3_k_m.reference.json", 0.8, 0.16,
                "llama-gqa-q3_k_m.gguf"},
        CliCase{"q2_k", 10, "llama-gqa-q2_k.reference.json", 1.0, 0.16, "llama-gqa-q2_k.gguf"},
        CliCase{"iq4_nl", 25, "llama-gqa-iq4_nl.reference.json", 0.7, 0.12,
                "llama-gqa-iq4_nl.gguf"},
        CliCase{"iq4_xs", 30, "llama-gqa-iq4_xs.reference.json", 0.8, 0.16,
                "llama-gqa-iq4_xs.gguf"}),
    [](const auto& info) { return std::string(info.param.type); });

// An unknown --type is refused with the list of mixes (exit code 2, nothing written).
TEST(QuantizeCliErrors, UnknownTypeListsTheMixes) {
  testing::TempDir dir;
  const std::string out = dir.File("never.gguf");
  const auto r = testing::RunPagodaRedirected(
      "quantize " + SharedPath("models/synth-gqa/llama-gqa-f32.gguf") + " " + out + " --type q9_k",
      "2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--type: 'q9_k' (expected one of q8_0, q4_0, q4_k_m, q5_0, q5_k_m, "
                       "q3_k_m, q2_k, iq4_nl, iq4_xs)"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(std::ifstream(out).good());
}

// The IQ4 mixes on a 32-layer model (the synth files have 4 layers, too few for the ffn_down rule):
// output Q6_K, attn_v Q5_K only with GQA, ffn_down Q5_K in the first eighth of the layers, rows
// that do not fit the blocks fall back to Q8_0.
TEST(QuantMixes, IQ4MixesFollowLlamaCppRules) {
  for (const QuantMix mix : {QuantMix::kIQ4_NL, QuantMix::kIQ4_XS}) {
    const GgmlType base = QuantMixBaseType(mix);
    const MixContext gqa{32, true, 8}, mha{32, true, 1};
    const std::vector<int64_t> ne = {4096, 4096};
    EXPECT_EQ(TensorTypeForMix(mix, "output.weight", ne, gqa), GgmlType::kQ6_K);
    EXPECT_EQ(TensorTypeForMix(mix, "token_embd.weight", ne, gqa), base);
    EXPECT_EQ(TensorTypeForMix(mix, "blk.7.attn_v.weight", ne, gqa), GgmlType::kQ5_K);
    EXPECT_EQ(TensorTypeForMix(mix, "blk.7.attn_v.weight", ne, mha), base);
    EXPECT_EQ(TensorTypeForMix(mix, "blk.3.ffn_down.weight", ne, gqa), GgmlType::kQ5_K);
    EXPECT_EQ(TensorTypeForMix(mix, "blk.4.ffn_down.weight", ne, gqa), base);
    EXPECT_EQ(TensorTypeForMix(mix, "blk.0.attn_output.weight", ne, gqa), base);
    EXPECT_EQ(TensorTypeForMix(mix, "blk.0.attn_norm.weight", {4096}, gqa), GgmlType::kF32);
    EXPECT_EQ(TensorTypeForMix(mix, "blk.9.ffn_up.weight", {4128, 64}, gqa),
              mix == QuantMix::kIQ4_NL ? base : GgmlType::kQ8_0);
    EXPECT_EQ(MixForDtype(base), mix);
    EXPECT_EQ(ParseQuantMix(mix == QuantMix::kIQ4_NL ? "IQ4_NL" : "iq4_xs"), mix);
  }
}

TEST(MakeModelCli, Q4KMAndQ4_0DtypesFollowTheMix) {
  testing::TempDir dir;
  for (const std::string dtype : {"q4_k_m", "q4_0"}) {
    const std::string out = dir.File(dtype + ".gguf");
    ASSERT_EQ(
        RunPagoda("make-model --quiet --preset tiny --dtype " + dtype + " -o " + out).exit_code, 0);
    auto model = LoadModelOrFail(out);
    ASSERT_TRUE(model);
    const GgufFile& f = *model->file;
    EXPECT_EQ(*f.GetInt("general.file_type"), dtype == "q4_0" ? 2 : 15);
    EXPECT_EQ(f.FindTensor("output.weight")->type, GgmlType::kQ6_K);
    EXPECT_EQ(f.FindTensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
    if (dtype == "q4_k_m") {  // tiny: 4 layers -> Q6_K attn_v / ffn_down in layers 2 and 3
      for (int l = 0; l < 4; ++l) {
        const auto want = l >= 2 ? GgmlType::kQ6_K : GgmlType::kQ4_K;
        const std::string p = "blk." + std::to_string(l) + ".";
        EXPECT_EQ(f.FindTensor(p + "attn_v.weight")->type, want) << l;
        EXPECT_EQ(f.FindTensor(p + "ffn_down.weight")->type, want) << l;
        EXPECT_EQ(f.FindTensor(p + "attn_q.weight")->type, GgmlType::kQ4_K) << l;
      }
    } else {
      EXPECT_EQ(f.FindTensor("blk.1.ffn_down.weight")->type, GgmlType::kQ4_0);
    }
    cpu::LlamaForward fwd(model->config, model->weights, model->config.context_length);
    const std::vector<int32_t> tokens = {1, 5, 9};
    auto logits = fwd.Forward(tokens, true);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    for (float v : *logits) ASSERT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace pagoda
