// Batches of F16 weights (and of the other block-quantized types, dequantized first) at
// AVX512-VNNI: block-scaled int16 products with vpdpwssd (the rate of vdpbf16ps, twice the fp32 FMA
// rate), at close to F16's own precision. Layouts in matmul_kernels.h (kI16 activations, I16 lane
// tiles).
//
// Method: each row tile is converted once per call to 13-bit codes with one fp32 scale per 32
// columns (d = amax / 8191, round to nearest even), 16 rows per group packed so that one zmm
// holds one column pair of 16 rows. The activations are quantized the same way per token.
// vpdpwssd adds the pair products of the 16 rows for a broadcast activation pair into int32:
// 16 instructions sum a 32-column block exactly (|sum| <= 32 * 8191^2 < 2^31), and one
// convert + multiply + FMA applies the two scales per block. Error per block: at most
// (amax_w * sum |x| + amax_x * sum |w|) / 16382 (plus the product of the two roundings) and
// fp32 rounding, i.e. about 2^-13 of the block's largest terms (bf16: 2^-8 of every term).
#include "kernels/cpu/matmul/matmul_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)

// GCC 12's AVX-512 intrinsic headers self-initialise placeholder operands (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul/matmul_tiles.h"

#define PAGODA_MM_VNNI \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace pagoda::cpu::mm::internal {
namespace {

constexpr float kI16Max = 8191.0f;

// One 32-column block of one row (lo: columns 0-15, hi: 16-31) to 13-bit codes and its scale
// d; codes[i] = round(v[i] / d). A non-finite value gives a NaN scale (and zero codes), so the
// outputs that use the block are NaN, as with exact products.
PAGODA_MM_VNNI inline float QuantizeBlock(__m512 lo, __m512 hi, int16_t* codes) {
  constexpr int kNonFinite = 0x01 | 0x08 | 0x10 | 0x80;  // vfpclassps: NaN, +inf, -inf
  if ((_mm512_fpclass_ps_mask(lo, kNonFinite) | _mm512_fpclass_ps_mask(hi, kNonFinite)) != 0) {
    std::memset(codes, 0, 64);
    return __builtin_nanf("");
  }
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
  const float d = amax / kI16Max;
  const __m512 vid = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f), lim = _mm512_set1_ps(kI16Max);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 ql = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(lo, vid), -lim), lim);
  const __m512 qh = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(hi, vid), -lim), lim);
  const __m256i cl = _mm512_cvtsepi32_epi16(_mm512_cvt_roundps_epi32(ql, kRound));
  const __m256i ch = _mm512_cvtsepi32_epi16(_mm512_cvt_roundps_epi32(qh, kRound));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), cl);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 16), ch);
  return d;
}

PAGODA_MM_VNNI inline __mmask32 TailMask(int64_t n) {
  return n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1);
}

// One token of fp32 activations to kI16 (cols values, zero padded to ld, a multiple of 32).
PAGODA_MM_VNNI void QuantizeI16Row(const float* x, int64_t cols, int64_t ld, int16_t* xi,
                                   float* xd) {
  for (int64_t b = 0; b < ld / 32; ++b) {
    const int64_t n = std::clamp<int64_t>(cols - 32 * b, 0, 32);
    const __mmask32 m = TailMask(n);
    const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), x + 32 * b);
    const __m512 hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), x + 32 * b + 16);
    xd[b] = QuantizeBlock(lo, hi, xi + 32 * b);
  }
}

// out[k] lane j = in[j] lane k: the transpose of 16 x 16 int32 (column pairs of 16 rows).
PAGODA_MM_VNNI inline void Transpose16x16(const __m512i (&in)[16], __m512i (&out)[16]) {
  __m512i t[16], u[4][4];
  PAGODA_UNROLL for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  // u[q][c], 128-bit lane L: column 4 L + c of rows 4 q .. 4 q + 3.
  PAGODA_UNROLL for (int q = 0; q < 4; ++q) {
    u[q][0] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
    u[q][1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
    u[q][2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
    u[q][3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
  }
  // A 4 x 4 transpose of the 128-bit lanes for each c.
  PAGODA_UNROLL for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[0][c], u[1][c], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(u[0][c], u[1][c], 0xee);
    const __m512i v2 = _mm512_shuffle_i32x4(u[2][c], u[3][c], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[2][c], u[3][c], 0xee);
    out[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    out[4 + c] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
    out[8 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    out[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
  }
}

// Lane j of p holds two F16 values (columns 2k, 2k + 1 of row j): widened to fp32.
PAGODA_MM_VNNI inline void WidenPairs(__m512i p, __m512& even, __m512& odd) {
  even = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(p));
  odd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(p, 16)));
}

// One 32-column block of 16 F16 rows (row j at w + j * ws, `rows` of them valid, columns
// masked by m) into one I16 lane block at blk. Transposed first (as column pairs), so the 16
// rows' scales come from vertical maxima and one vector division. A row with a NaN or inf gets a
// NaN or inf scale (a NaN weight: NaN; inf: its code is 0 and the scale inf).
PAGODA_MM_VNNI void PairsToI16Lanes(const __m512i (&pairs)[16], uint8_t* blk);

PAGODA_MM_VNNI void F16BlockToI16Lanes(const uint8_t* w, int64_t ws, int64_t rows, __mmask32 m,
                                       uint8_t* blk) {
  __m512i in[16], pairs[16];
  PAGODA_UNROLL for (int j = 0; j < 16; ++j) {
    in[j] = j < rows ? _mm512_maskz_loadu_epi16(m, w + j * ws) : _mm512_setzero_si512();
  }
  Transpose16x16(in, pairs);
  PairsToI16Lanes(pairs, blk);
}

// The column pairs of 16 rows (pairs[k] lane j: columns 2k, 2k + 1 of row j) quantized into one
// I16 lane block at blk.
PAGODA_MM_VNNI void PairsToI16Lanes(const __m512i (&pairs)[16], uint8_t* blk) {
  __m512 amax = _mm512_setzero_ps();
  __mmask16 nan = 0;
  PAGODA_UNROLL for (int k = 0; k < 16; ++k) {
    __m512 even, odd;
    WidenPairs(pairs[k], even, odd);
    amax = _mm512_max_ps(amax, _mm512_max_ps(_mm512_abs_ps(even), _mm512_abs_ps(odd)));
    nan |= _mm512_cmp_ps_mask(even, odd, _CMP_UNORD_Q);
  }
  const __mmask16 nonzero = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  const __m512 inv = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(kI16Max), amax);
  const __m512 d = _mm512_mask_mov_ps(_mm512_mul_ps(amax, _mm512_set1_ps(1.0f / kI16Max)), nan,
                                      _mm512_set1_ps(__builtin_nanf("")));
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  PAGODA_UNROLL for (int k = 0; k < 16; ++k) {
    __m512 even, odd;
    WidenPairs(pairs[k], even, odd);
    // |x * inv| <= 8191 after rounding; NaN (x * 0 for inf) converts to 0x80000000: code 0.
    const __m512i qe = _mm512_cvt_roundps_epi32(_mm512_mul_ps(even, inv), kRound);
    const __m512i qo = _mm512_cvt_roundps_epi32(_mm512_mul_ps(odd, inv), kRound);
    const __m512i q = _mm512_mask_blend_epi16(0xaaaaaaaa, qe, _mm512_slli_epi32(qo, 16));
    _mm512_storeu_si512(blk + 64 * k, q);
  }
  _mm512_storeu_ps(blk + 1024, d);
}

// Rows [0, nr) of F16 weights (row stride ws bytes) into groups of 16 rows (see the I16 lane
// tiles in matmul_kernels.h); rows past nr in the last group are zero.
PAGODA_MM_VNNI void F16ToI16Lanes(const uint8_t* w, int64_t ws, int64_t nr, int64_t cols,
                                  uint8_t* dst) {
  const int64_t nb = (cols + 31) / 32, groups = (nr + 15) / 16;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      F16BlockToI16Lanes(w + 16 * g * ws + 64 * b, ws, nr - 16 * g, TailMask(cols - 32 * b),
                         dst + (g * nb + b) * kI16BlockBytes);
    }
  }
}

// Column c of 16 packed F16 rows (32 bytes at col + 32 c) zero-extended to 32-bit lanes; zero
// from column n on.
PAGODA_MM_VNNI inline __m512i PackedF16Column(const uint8_t* col, int64_t c, int64_t n) {
  if (c >= n) return _mm512_setzero_si512();
  return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(col + 32 * c)));
}

// Rows [0, nr) of packed F16 weights (PackRows: groups of 16 rows, column c of a group's rows
// at 32 c; w at a group start, ws = PackedRowBytes) into I16 lane tiles: the same tiles as
// F16ToI16Lanes makes from the file's rows (the pairs need no transpose: a column of 16 rows is
// one 32-byte load).
PAGODA_MM_VNNI void F16PackedToI16Lanes(const uint8_t* w, int64_t ws, int64_t nr, int64_t cols,
                                        uint8_t* dst) {
  const int64_t nb = (cols + 31) / 32, groups = (nr + 15) / 16;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* col = w + 16 * g * ws + 1024 * b;
      const int64_t n = std::min<int64_t>(32, cols - 32 * b);
      __m512i pairs[16];
      PAGODA_UNROLL for (int k = 0; k < 16; ++k) {
        pairs[k] = _mm512_or_si512(PackedF16Column(col, 2 * k, n),
                                   _mm512_slli_epi32(PackedF16Column(col, 2 * k + 1, n), 16));
      }
      PairsToI16Lanes(pairs, dst + (g * nb + b) * kI16BlockBytes);
    }
  }
}

// Rows [0, nr) of fp32 weights (row stride ws bytes; the dequantized rows of the other types)
// into groups of 16 rows, as F16ToI16Lanes: each row's block quantized, then the 16 rows' codes
// transposed as column pairs.
PAGODA_MM_VNNI void F32ToI16Lanes(const uint8_t* w, int64_t ws, int64_t nr, int64_t cols,
                                  uint8_t* dst) {
  const int64_t nb = (cols + 31) / 32, groups = (nr + 15) / 16;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      alignas(64) int16_t codes[16][32];
      alignas(64) float scales[16];
      const __mmask32 m = TailMask(cols - 32 * b);
      for (int64_t j = 0; j < 16; ++j) {
        const int64_t r = 16 * g + j;
        const float* x = reinterpret_cast<const float*>(w + r * ws) + 32 * b;
        const __m512 lo =
            r < nr ? _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), x) : _mm512_setzero_ps();
        const __m512 hi = r < nr ? _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), x + 16)
                                 : _mm512_setzero_ps();
        scales[j] = QuantizeBlock(lo, hi, codes[j]);
      }
      __m512i rows[16], pairs[16];
      PAGODA_UNROLL for (int j = 0; j < 16; ++j) rows[j] = _mm512_load_si512(codes[j]);
      Transpose16x16(rows, pairs);
      uint8_t* blk = dst + (g * nb + b) * kI16BlockBytes;
      PAGODA_UNROLL for (int k = 0; k < 16; ++k) _mm512_storeu_si512(blk + 64 * k, pairs[k]);
      std::memcpy(blk + 1024, scales, sizeof(scales));
    }
  }
}

// G groups of 16 rows x T tokens. acc[g][t] lane j = y[t][16 g + j]. Per block: 16 pair steps
// into int32 (one weight vector load per group, one activation pair broadcast per token), then
// the two scales.
template <int G, int T>
PAGODA_MM_VNNI void TileI16(const uint8_t* w, int64_t gs, const Activations& a, int64_t t0,
                            float* y, int64_t ldy, int64_t nr) {
  const int64_t nb = a.ld / 32;
  __m512 acc[G][T];
  PAGODA_UNROLL for (int g = 0; g < G; ++g) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) acc[g][t] = _mm512_setzero_ps();
  }
  const int16_t* x = a.xi + t0 * a.ld;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * kI16BlockBytes;
    __m512i dot[G][T];
    PAGODA_UNROLL for (int g = 0; g < G; ++g) {
      PAGODA_UNROLL for (int t = 0; t < T; ++t) dot[g][t] = _mm512_setzero_si512();
    }
    PAGODA_UNROLL for (int k = 0; k < 16; ++k) {
      __m512i wv[G];
      PAGODA_UNROLL for (int g = 0; g < G; ++g) wv[g] = _mm512_loadu_si512(wb + g * gs + 64 * k);
      PAGODA_UNROLL for (int t = 0; t < T; ++t) {
        int32_t pair;
        std::memcpy(&pair, x + t * a.ld + 32 * b + 2 * k, 4);
        const __m512i xv = _mm512_set1_epi32(pair);
        PAGODA_UNROLL for (int g = 0; g < G; ++g) dot[g][t] =
            _mm512_dpwssd_epi32(dot[g][t], wv[g], xv);
      }
    }
    PAGODA_UNROLL for (int g = 0; g < G; ++g) {
      const __m512 dw = _mm512_loadu_ps(reinterpret_cast<const float*>(wb + g * gs + 1024));
      PAGODA_UNROLL for (int t = 0; t < T; ++t) {
        const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(a.xd[(t0 + t) * nb + b]));
        acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[g][t]), s, acc[g][t]);
      }
    }
  }
  PAGODA_UNROLL for (int g = 0; g < G; ++g) {
    const int64_t rows = std::clamp<int64_t>(nr - 16 * g, 0, 16);
    const __mmask16 m = static_cast<__mmask16>((1u << rows) - 1);
    PAGODA_UNROLL for (int t = 0; t < T; ++t)
        _mm512_mask_storeu_ps(y + t * ldy + 16 * g, m, acc[g][t]);
  }
}

// w: the converted tile (group stride gs bytes); nr rows, nt tokens from t0. Tiles of 2 groups
// x 6 tokens (12 int32 and 12 fp32 accumulators, 27 zmm in all); every output is the same for
// any tile. Against 2 x 4 on a Zen 5 host (pagoda_bench_matmul F16, GFLOP/s, median of 3, four
// interleaved rounds, 2 x 4 / 2 x 6): q_o 2048 x 2048 64 tokens 491-530 / 539-549, 512 tokens
// 570-619 / 602-629; gate_up 5632 x 2048 64 tokens 447-483 / 491-523, 512 tokens 610-638 /
// 619-630; down 2048 x 5632 64 tokens 470-502 / 472-516, 512 tokens 573-592 / 592-612. bench
// model medium32k-f16 --prompt-len 512, prefill tok/s, six interleaved runs: 225.5-255.2
// (median 239.4, computed) / 239.9-271.5 (247.3). 2 x 5, 2 x 7 and 3 x 4 were within the noise of
// 2 x 6, 1 x 8 no faster than 2 x 4, 4 x 3 a quarter slower.
PAGODA_MM_VNNI void BlockI16(const uint8_t* w, int64_t gs, int64_t nr, const Activations& a,
                             int64_t t0, int64_t nt, float* y, int64_t ldy) {
  constexpr int kG = 2, kT = 6;
  const int64_t groups = (nr + 15) / 16;
  for (int64_t g = 0; g < groups; g += kG) {
    const int64_t gg = std::min<int64_t>(kG, groups - g);
    for (int64_t t = 0; t < nt; t += kT) {
      ForTile<kG, kT>(gg, std::min<int64_t>(kT, nt - t), [&]<int G, int T>() {
        TileI16<G, T>(w + g * gs, gs, a, t0 + t, y + t * ldy + 16 * g, ldy, nr - 16 * g);
      });
    }
  }
}

}  // namespace

Kernel X86I16Kernel() { return {BlockI16, ActFormat::kI16, "avx512vnni/f16-i16"}; }
ToI16LanesFn X86I16Converter(GgmlType type) {
  if (type == GgmlType::kF16) return F16ToI16Lanes;
  return type == GgmlType::kF32 ? F32ToI16Lanes : nullptr;
}

ToI16LanesFn X86I16PackedConverter(GgmlType type) {
  return type == GgmlType::kF16 ? F16PackedToI16Lanes : nullptr;
}
QuantizeI16Fn X86I16Quantizer() { return QuantizeI16Row; }

}  // namespace pagoda::cpu::mm::internal

#pragma GCC diagnostic pop

#else  // not x86-64 GCC

namespace pagoda::cpu::mm::internal {
Kernel X86I16Kernel() { return {}; }
ToI16LanesFn X86I16Converter(GgmlType) { return nullptr; }
ToI16LanesFn X86I16PackedConverter(GgmlType) { return nullptr; }
QuantizeI16Fn X86I16Quantizer() { return nullptr; }
}  // namespace pagoda::cpu::mm::internal

#endif
