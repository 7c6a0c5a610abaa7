// AVX2 and AVX-512 MatMul kernels (layouts in matmul_kernels.h). Every function carries a GCC
// target attribute, so the rest of the build stays at the baseline ISA; the driver only hands
// these out at levels the CPU supports.
//
// Register blocking: a tile of R weight rows x T tokens keeps R * T vector accumulators while
// it walks the columns once, so each weight vector is loaded (and widened / sign-split) once per
// T tokens and each activation vector once per R rows. Each accumulator is reduced to a scalar
// in a fixed order at the end: the result of (r, t) does not depend on R, T or the tiling.
// Tiles: AVX-512 4 x 4 (fp, q8), AVX2 4 x 2 (fp), 2 x 2 (q8). A block (matmul_kernels.h BlockFn)
// walks its rows in groups of R (outer) and, for each, its tokens in groups of T (inner).
#include "kernels/cpu/matmul/matmul_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)

// GCC 12's AVX-512 intrinsic headers self-initialise placeholder operands (`__Y = __Y`), which
// -Wuninitialized reports once they are inlined here (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/matmul/matmul_tiles.h"

#define PAGODA_MM_AVX2 __attribute__((target("avx2,fma,f16c")))
#define PAGODA_MM_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define PAGODA_MM_VNNI \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define PAGODA_MM_BF16 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace pagoda::cpu::mm::internal {
namespace {

constexpr int64_t kQ8Bytes = 34;  // Q8_0 block: fp16 scale + 32 int8

// The float kernels' tiles read R rows as R streams of a few KiB each (one row of F16 2048 is a
// 4 KiB page), and the hardware prefetcher stops at every page and is slow to start again: so
// each tile prefetches, at the byte it is at, the rows of the tile kFpTilesAhead tiles on (rows
// past the matrix are prefetched harmlessly). On a 17-26 GB/s host (bench model medium F16 /
// BF16 decode, fraction of the interleaved read bandwidth): none 0.74-0.76 / 0.78-0.83; 1 tile
// ahead 0.92-0.95 / 0.98-0.99; 2 tiles 0.93-0.97 / 0.975-0.986; 4: 0.91 / 0.96-0.97. On a Zen 5
// host reading 55-75 GB/s, with the F16 weights in huge pages (PackedWeights) and a four-chain
// trial of TileFp512, `bench verify --tokens 1` F16 steps took 36.0-38.7 ms with 8 tiles,
// 36.5-38.8 with 16, 37.4-39.4 with 32 and 40-48 with 2.
constexpr int kFpTilesAhead = 8;
// Calls of more than kPrefetchAllTokens tokens prefetch only in their first token pass (of the
// first token chunk): the later passes over a row tile read it from cache, and their prefetches
// of the rows 8 tiles ahead can push the tile's rows and activations out of L1.
// pagoda_bench_matmul 512 tokens, GFLOP/s every pass / first pass only, 3-4 interleaved runs:
// BF16 (avx512bf16) gate_up 5632 x 2048 328-364 / 385-430, q_o 2048 x 2048 284-394 / 340-417,
// down 2048 x 5632 283-369 / 258-379 (no clear change); F32 gate_up 117-142 / 167-177, down
// 112-139 / 109-130. bench model medium32k-bf16 --prompt-len 512: prefill 137, 143, 162 / 157,
// 151, 173 tok/s. Up to 16 tokens (decode and verification steps, weights from DRAM) every pass
// still prefetches: F16 steps of 4-9 tokens looked 8-10% longer without (bench verify, noisy).
constexpr int64_t kPrefetchAllTokens = 16;

template <int R>
inline void PrefetchTileRows(const uint8_t* w, int64_t ws, int64_t byte) {
  const uint8_t* ahead = w + kFpTilesAhead * R * ws + byte;
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead + r * ws), _MM_HINT_T0);
  }
}

enum class Wf { kF32, kF16, kBf16 };  // float weight formats widened in registers

PAGODA_MM_AVX2 inline float Fp16Scale(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

template <Wf F>
PAGODA_MM_AVX2 inline float ScalarW(const uint8_t* row, int64_t c) {
  if constexpr (F == Wf::kF32) {
    return reinterpret_cast<const float*>(row)[c];
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    if constexpr (F == Wf::kF16) return _cvtsh_ss(h);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
}

// ---------------------------------------------------------------------------- AVX2 fp ----

template <Wf F>
PAGODA_MM_AVX2 inline __m256 LoadW8(const uint8_t* row, int64_t c) {
  if constexpr (F == Wf::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
    if constexpr (F == Wf::kF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

PAGODA_MM_AVX2 inline float Sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Vector part over cols rounded down to 8, then the remaining columns in scalar.
template <Wf F, int R, int T>
PAGODA_MM_AVX2 void TileFp256(const uint8_t* w, int64_t ws, const float* x, int64_t cols, float* y,
                              int64_t ldy, bool prefetch) {
  __m256 acc[R][T];
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  const int64_t c8 = cols / 8 * 8;
  constexpr int64_t kBytes = F == Wf::kF32 ? 4 : 2;
  for (int64_t c = 0; c < c8; c += 8) {
    if (prefetch && (c * kBytes) % 64 == 0) PrefetchTileRows<R>(w, ws, c * kBytes);
    __m256 wv[R];
    PAGODA_UNROLL for (int r = 0; r < R; ++r) wv[r] = LoadW8<F>(w + r * ws, c);
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * cols + c);
      PAGODA_UNROLL for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      float s = Sum8(acc[r][t]);
      for (int64_t c = c8; c < cols; ++c) s += ScalarW<F>(w + r * ws, c) * x[t * cols + c];
      y[t * ldy + r] = s;
    }
  }
}

template <Wf F>
PAGODA_MM_AVX2 void BlockFp256(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                               int64_t t0, int64_t nt, float* y, int64_t ldy) {
  ForEachTile<4, 2>(nr, nt, [&]<int R, int T>(int64_t r, int64_t t) {
    TileFp256<F, R, T>(w + r * ws, ws, a.x + (t0 + t) * a.cols, a.cols, y + t * ldy + r, ldy,
                       nt <= kPrefetchAllTokens || t0 + t == 0);
  });
}

// ---------------------------------------------------------------------------- AVX2 q8 ----

// Sign trick: |w| (unsigned) x (x * sign(w)) (signed) with vpmaddubsw, pairs summed by vpmaddwd.
template <int R, int T>
PAGODA_MM_AVX2 void TileQ8Avx2(const uint8_t* w, int64_t ws, const Activations& a, int64_t t0,
                               float* y, int64_t ldy) {
  const int64_t nb = a.cols / 32;
  const int64_t nbx = a.ld / 32;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][T];
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wq[R], aw[R];
    float wd[R];
    PAGODA_UNROLL for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * ws + b * kQ8Bytes;
      wq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
      aw[r] = _mm256_abs_epi8(wq[r]);
      wd[r] = Fp16Scale(blk);
    }
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      const int8_t* xq = a.xq + (t0 + t) * a.ld + b * 32;
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
      const float xd = a.xd[(t0 + t) * nbx + b];
      PAGODA_UNROLL for (int r = 0; r < R; ++r) {
        const __m256i p = _mm256_maddubs_epi16(aw[r], _mm256_sign_epi8(xv, wq[r]));
        const __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
        acc[r][t] = _mm256_fmadd_ps(s, _mm256_set1_ps(wd[r] * xd), acc[r][t]);
      }
    }
  }
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) y[t * ldy + r] = Sum8(acc[r][t]);
  }
}

PAGODA_MM_AVX2 void BlockQ8Avx2(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                                int64_t t0, int64_t nt, float* y, int64_t ldy) {
  ForEachTile<2, 2>(nr, nt, [&]<int R, int T>(int64_t r, int64_t t) {
    TileQ8Avx2<R, T>(w + r * ws, ws, a, t0 + t, y + t * ldy + r, ldy);
  });
}

// -------------------------------------------------------------------------- AVX-512 fp ----

template <Wf F>
PAGODA_MM_AVX512 inline __m512 LoadW16(const uint8_t* row, int64_t c, __mmask16 m) {
  if constexpr (F == Wf::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + c);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, row + 2 * c);
    if constexpr (F == Wf::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <Wf F, int R, int T>
PAGODA_MM_AVX512 inline void StepFp512(const uint8_t* w, int64_t ws, const float* x, int64_t ldx,
                                       int64_t c, __mmask16 m, __m512 (&acc)[R][T]) {
  __m512 wv[R];
  PAGODA_UNROLL for (int r = 0; r < R; ++r) wv[r] = LoadW16<F>(w + r * ws, c, m);
  PAGODA_UNROLL for (int t = 0; t < T; ++t) {
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + c);
    PAGODA_UNROLL for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
  }
}

// Every (row, token) sums its 16-column vectors in kFpChains<F> FMA chains, chain j taking the
// vectors v = j mod kFpChains in column order, the masked column tail (vector n16) ending chain
// n16 mod kFpChains; the chains are then added in order and reduced. Every tile size sums so,
// with its chains interleaved over one sequential pass, so a token's result does not depend on
// its batch (below the int16 / bf16 batch paths of matmul.h). Two chains for the 16-bit formats:
// one chain is bound by the FMA latency (16 columns per 4 cycles), which on two Zen 5 cores read
// 66-77 GB/s of F16 weights even from cache, no faster than DRAM; two read 105-133 GB/s
// (pagoda_bench_matmul batch 1, gate_up / down). F32 weights bring twice the bytes per FMA, and
// their batches of 16 / 512 took 30-60% longer with the smaller tiles that two chains need, so
// they keep one.
template <Wf F>
inline constexpr int kFpChains = F == Wf::kF32 ? 1 : 2;
// Tiles of up to kFpTileRows x kFpTileTokens: kFpChains x R x T accumulators, R weight vectors
// and one activation vector in the 32 zmm registers.
constexpr int kFpTileRows = 4;
template <Wf F>
inline constexpr int kFpTileTokens = kFpChains<F> == 1 ? 4 : 3;

template <Wf F, int R, int T>
PAGODA_MM_AVX512 void TileFp512(const uint8_t* w, int64_t ws, const float* x, int64_t cols,
                                float* y, int64_t ldy, bool prefetch) {
  constexpr int J = kFpChains<F>;
  constexpr int64_t kBytes = F == Wf::kF32 ? 4 : 2;
  __m512 acc[J][R][T];
  PAGODA_UNROLL for (int j = 0; j < J; ++j) {
    PAGODA_UNROLL for (int r = 0; r < R; ++r) {
      PAGODA_UNROLL for (int t = 0; t < T; ++t) acc[j][r][t] = _mm512_setzero_ps();
    }
  }
  const int64_t n16 = cols / 16, full = n16 / J * J;
  for (int64_t v = 0; v < full; v += J) {
    if (prefetch) {
      PAGODA_UNROLL for (int64_t b = 0; b < 16 * J * kBytes; b += 64) {
        PrefetchTileRows<R>(w, ws, v * 16 * kBytes + b);
      }
    }
    PAGODA_UNROLL for (int j = 0; j < J; ++j) {
      StepFp512<F, R, T>(w, ws, x, cols, (v + j) * 16, 0xffff, acc[j]);
    }
  }
  // The last vectors, fewer than J, and the masked tail, each on its chain.
  const __mmask16 tail = static_cast<__mmask16>((1u << (cols - n16 * 16)) - 1);
  PAGODA_UNROLL for (int j = 0; j < J; ++j) {
    const int64_t v = full + j;
    if (v < n16) {
      StepFp512<F, R, T>(w, ws, x, cols, v * 16, 0xffff, acc[j]);
    } else if (v == n16 && tail != 0) {
      StepFp512<F, R, T>(w, ws, x, cols, v * 16, tail, acc[j]);
    }
  }
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      __m512 sum = acc[0][r][t];
      PAGODA_UNROLL for (int j = 1; j < J; ++j) sum = _mm512_add_ps(sum, acc[j][r][t]);
      y[t * ldy + r] = _mm512_reduce_add_ps(sum);
    }
  }
}

// Every batch size, the GEMV too, runs the R x T tiles of TileFp512.
template <Wf F>
PAGODA_MM_AVX512 void BlockFp512(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                                 int64_t t0, int64_t nt, float* y, int64_t ldy) {
  ForEachTile<kFpTileRows, kFpTileTokens<F>>(nr, nt, [&]<int R, int T>(int64_t r, int64_t t) {
    TileFp512<F, R, T>(w + r * ws, ws, a.x + (t0 + t) * a.cols, a.cols, y + t * ldy + r, ldy,
                       nt <= kPrefetchAllTokens || t0 + t == 0);
  });
}

// -------------------------------------------------------------------------- AVX-512 q8 ----
// Blocks b and b + 1 share a register (lanes 0-7: block b, 8-15: block b + 1). An odd last
// block runs with zero weights and scale in the upper half (the activations are padded to an
// even block count with zeros).

PAGODA_MM_AVX512 inline __m512i LoadQ8Pair(const uint8_t* blk, bool two) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  const __m256i hi =
      two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 36)) : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

PAGODA_MM_AVX512 inline __m512 PairScale(float lo, float hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(lo)), _mm256_set1_ps(hi), 1);
}

PAGODA_MM_AVX512 inline __m512 WeightPairScale(const uint8_t* blk, bool two) {
  return PairScale(Fp16Scale(blk), two ? Fp16Scale(blk + kQ8Bytes) : 0.0f);
}

template <int R, int T>
PAGODA_MM_AVX512 inline void StoreSums(__m512 (&acc)[R][T], float* y, int64_t ldy) {
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
}

// Sign trick (no VNNI): |w| x (x * sign(w)) with vpmaddubsw, the sign applied by a masked
// subtract from zero (mask = sign bits of w).
template <int R, int T>
PAGODA_MM_AVX512 void TileQ8Sign512(const uint8_t* w, int64_t ws, const Activations& a, int64_t t0,
                                    float* y, int64_t ldy) {
  const int64_t nb = a.cols / 32;
  const int64_t nbx = a.ld / 32;
  const __m512i ones = _mm512_set1_epi16(1);
  __m512 acc[R][T];
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    __m512i aw[R];
    __mmask64 neg[R];
    __m512 wd[R];
    PAGODA_UNROLL for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * ws + b * kQ8Bytes;
      const __m512i wq = LoadQ8Pair(blk, two);
      aw[r] = _mm512_abs_epi8(wq);
      neg[r] = _mm512_movepi8_mask(wq);
      wd[r] = WeightPairScale(blk, two);
    }
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      const int64_t tok = t0 + t;
      const __m512i xv = _mm512_loadu_si512(a.xq + tok * a.ld + b * 32);
      const __m512 xd = PairScale(a.xd[tok * nbx + b], a.xd[tok * nbx + b + 1]);
      PAGODA_UNROLL for (int r = 0; r < R; ++r) {
        const __m512i sx = _mm512_mask_sub_epi8(xv, neg[r], _mm512_setzero_si512(), xv);
        const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(aw[r], sx), ones);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wd[r], xd), acc[r][t]);
      }
    }
  }
  StoreSums<R, T>(acc, y, ldy);
}

PAGODA_MM_AVX512 void BlockQ8Sign512(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                                     int64_t t0, int64_t nt, float* y, int64_t ldy) {
  ForEachTile<4, 4>(nr, nt, [&]<int R, int T>(int64_t r, int64_t t) {
    TileQ8Sign512<R, T>(w + r * ws, ws, a, t0 + t, y + t * ldy + r, ldy);
  });
}

// VNNI, one weight row at a time (GEMV and batches below the token-lane kernel's): steps of 4
// blocks. Each block pair's codes are loaded into one zmm and their 4-byte groups interleaved
// (vpermd) to match the kQ8Vec activations, so int32 lane 2k + i holds block b + i, and biased
// to unsigned (w ^ 0x80 = w + 128). Per token and pair a vpdpbusd from the start values (an
// 8-byte broadcast of xc: -16 * the block's code sum per lane, which removes the bias exactly
// once the block's 8 lanes are summed); the two pairs' lanes are then summed in int32 (64-bit
// unpack lo + hi: lane 4c + i of the result holds block b + i), so one convert and one FMA with
// the scales [d_i * xd_i] (the 4 weight scales widened once, the token's 4 activation scales
// broadcast per 128-bit lane) serve 4 blocks: per 128 products and token 5 loads, 2 vpdpbusd,
// 2 unpacks, an add, a multiply, a convert and an FMA. The activations
// stay in L1 for up to 7 tokens of a 2048-column row. Two accumulator chains (alternate steps);
// the last step pads with zero blocks (the activations' padding: codes 0, scale 0). The weight
// stream is prefetched kQ8PrefetchAhead bytes ahead (without it the loads stalled on memory). The
// same arithmetic and order for every token count: a token's result does not depend on its batch.
constexpr int64_t kQ8PrefetchAhead = 2048;
alignas(64) constexpr int32_t kPairLanes[16] = {0, 8,  1, 9,  2, 10, 3, 11,
                                                4, 12, 5, 13, 6, 14, 7, 15};

// Codes of blocks b, b + 1 (kValid of them; the rest zero) biased to unsigned (w ^ 0x80 =
// w + 128; a zero block's bias meets zero activations).
template <int kValid>
PAGODA_MM_VNNI inline __m512i PairCodes(const uint8_t* blk) {
  const __m256i lo = kValid >= 1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2))
                                 : _mm256_setzero_si256();
  const __m256i hi = kValid >= 2 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 36))
                                 : _mm256_setzero_si256();
  const __m512i wp = _mm512_permutexvar_epi32(
      _mm512_load_si512(kPairLanes), _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
  return _mm512_xor_si512(wp, _mm512_set1_epi8(static_cast<char>(0x80)));
}

// The start values of a block pair's 16 lanes (alternating blocks b, b + 1): one 8-byte
// broadcast of xc.
PAGODA_MM_VNNI inline __m512i PairStarts(const int32_t* xc) {
  int64_t v;
  std::memcpy(&v, xc, 8);
  return _mm512_set1_epi64(v);
}

// Blocks b .. b + 3 of the row (kValid of them, the rest zero) into acc[t] for T tokens.
template <int T, int kValid>
PAGODA_MM_VNNI inline void QuadQ8Vec(const uint8_t* w, const Activations& a, int64_t t0,
                                     int64_t nbx, int64_t b, __m512 (&acc)[T]) {
  const uint8_t* blk = w + b * kQ8Bytes;
  _mm_prefetch(reinterpret_cast<const char*>(blk) + kQ8PrefetchAhead, _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(blk) + kQ8PrefetchAhead + 64, _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(blk) + kQ8PrefetchAhead + 128, _MM_HINT_T0);
  const __m512i u0 = PairCodes<kValid>(blk);
  const __m512i u1 = PairCodes<kValid - 2>(blk + 2 * kQ8Bytes);
  uint16_t h[4] = {0, 0, 0, 0};
  PAGODA_UNROLL for (int i = 0; i < kValid; ++i) std::memcpy(&h[i], blk + i * kQ8Bytes, 2);
  uint64_t h4;
  std::memcpy(&h4, h, 8);
  const __m512 dw = _mm512_cvtph_ps(_mm256_set1_epi64x(static_cast<int64_t>(h4)));
  PAGODA_UNROLL for (int t = 0; t < T; ++t) {
    const int64_t tok = t0 + t;
    const int8_t* xq = a.xq + tok * a.ld + b * 32;
    const int32_t* xc = a.xc + tok * nbx + b;
    const __m512i d0 = _mm512_dpbusd_epi32(PairStarts(xc), u0, _mm512_loadu_si512(xq));
    const __m512i d1 = _mm512_dpbusd_epi32(PairStarts(xc + 2), u1, _mm512_loadu_si512(xq + 64));
    const __m512i sum =
        _mm512_add_epi32(_mm512_unpacklo_epi64(d0, d1), _mm512_unpackhi_epi64(d0, d1));
    const __m512 xd = _mm512_broadcast_f32x4(_mm_loadu_ps(a.xd + tok * nbx + b));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, xd), acc[t]);
  }
}

template <int T>
PAGODA_MM_VNNI void RowQ8Vec(const uint8_t* w, const Activations& a, int64_t t0, float* y,
                             int64_t ldy) {
  const int64_t nb = a.cols / 32, nbx = a.ld / 32;
  __m512 even[T], odd[T];  // two chains: alternate steps
  PAGODA_UNROLL for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    QuadQ8Vec<T, 4>(w, a, t0, nbx, b, even);
    QuadQ8Vec<T, 4>(w, a, t0, nbx, b + 4, odd);
  }
  if (b + 4 <= nb) QuadQ8Vec<T, 4>(w, a, t0, nbx, b, even), b += 4;
  switch (nb - b) {
    case 3:
      QuadQ8Vec<T, 3>(w, a, t0, nbx, b, odd);
      break;
    case 2:
      QuadQ8Vec<T, 2>(w, a, t0, nbx, b, odd);
      break;
    case 1:
      QuadQ8Vec<T, 1>(w, a, t0, nbx, b, odd);
      break;
    default:
      break;
  }
  PAGODA_UNROLL for (int t = 0; t < T; ++t) {
    y[t * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(even[t], odd[t]));
  }
}

PAGODA_MM_VNNI void BlockQ8Vec(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                               int64_t t0, int64_t nt, float* y, int64_t ldy) {
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t t = 0; t < nt; t += 8) {
      ForTile<1, 8>(1, std::min<int64_t>(8, nt - t), [&]<int R, int T>() {
        RowQ8Vec<T>(w + r * ws, a, t0 + t, y + t * ldy + r, ldy);
      });
    }
  }
}

// ---------------------------------------------------------------- VNNI, token lanes ----
// Q8_0 x kQ8Lanes for many tokens: the 16 lanes of a zmm are 16 tokens, so vpdpbusd sums a
// whole 32-element block per lane in 8 steps (the packed activations, biased to unsigned
// x + 128, against a broadcast of 4 signed weight bytes straight from memory) before its one
// scale multiply: 8 dot instructions + 4 ops per 16 x 32 products, where RowQ8Vec needs 8 per
// 256. The bias adds 128 * (sum of the block's weights) to every lane; the start value
// -128 * sum(w), computed once per block call for all its token groups, removes it exactly.

// starts[r * nb + b] = -128 * (sum of the 32 weights of row r's block b).
PAGODA_MM_VNNI void WeightStarts(const uint8_t* w, int64_t ws, int64_t nr, int64_t nb,
                                 int32_t* starts) {
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i q =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * ws + b * kQ8Bytes + 2));
      // Sums of (w + 128) per 8 bytes, then all 32 less 32 * 128.
      const __m256i s8 = _mm256_sad_epu8(_mm256_xor_si256(q, bias), _mm256_setzero_si256());
      __m128i s = _mm_add_epi64(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
      s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
      starts[r * nb + b] = -128 * (_mm_cvtsi128_si32(s) - 32 * 128);
    }
  }
}

template <int R>
PAGODA_MM_VNNI void TileQ8Lanes(const uint8_t* w, int64_t ws, const int32_t* starts,
                                const Activations& a, int64_t g, float* y, int64_t ldy,
                                int64_t nt) {
  const int64_t nb = a.cols / 32;
  __m512 acc[R];
  PAGODA_UNROLL for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* xp = a.xp + (g * nb + b) * 512;
    __m512i xv[8];
    PAGODA_UNROLL for (int k = 0; k < 8; ++k) xv[k] = _mm512_loadu_si512(xp + 64 * k);
    const __m512 xd = _mm512_loadu_ps(a.xpd + (g * nb + b) * 16);
    PAGODA_UNROLL for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + r * ws + b * kQ8Bytes;
      __m512i dot[2] = {_mm512_set1_epi32(starts[r * nb + b]), _mm512_setzero_si512()};
      PAGODA_UNROLL for (int k = 0; k < 8; ++k) {
        int32_t four;
        std::memcpy(&four, blk + 2 + 4 * k, 4);
        dot[k % 2] = _mm512_dpbusd_epi32(dot[k % 2], xv[k], _mm512_set1_epi32(four));
      }
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(dot[0], dot[1])),
                               _mm512_mul_ps(xd, _mm512_set1_ps(Fp16Scale(blk))), acc[r]);
    }
  }
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[r]);
    for (int64_t t = 0; t < nt; ++t) y[t * ldy + r] = lanes[t];
  }
}

// ------------------------------------------------------- VNNI, packed Q8_0 row lanes ----
// Q8_0 rows packed 16 to a group (PackRows, matmul_kernels.h kQ8GroupBlockBytes): the 16 lanes
// of a zmm are 16 rows, so vpdpbusd sums a whole block per lane in 8 steps (64 bytes of packed
// codes biased to w + 128 against 4 signed activation bytes broadcast from memory), the start
// 8 * xc = -128 * sum(x) (kQ8Vec) removing the bias. Each (row, token) then takes
// acc = fma(float(isum_b), xd_b * wd_b, acc) block after block: TileQ8Lanes's chain with the
// same operands, so for any number of tokens here and there every output is the same bit for
// bit.
// Prefetch distance, chosen with bench model (--pack-weights off/on, interleaved): 4 blocks
// ahead and every other line ran at 0.85-0.86 of the read bandwidth as the file rows did; 8
// blocks ahead and every line at 0.92-0.93.
inline constexpr int64_t kQ8GroupPrefetch = 8 * kQ8GroupBlockBytes;
// Batches of kQ8GroupedMinTokens and more read the token groups of kQ8Vec and go by spans of
// kQ8SpanBlocks blocks across kQ8ChunkGroups row groups at a time, in tiles of up to
// kQ8MaxTileTokens tokens (see BlockQ8Packed).
inline constexpr int64_t kQ8SpanBlocks = 8;
inline constexpr int64_t kQ8ChunkGroups = 8;
inline constexpr int kQ8MaxTileTokens = kQ8GroupedMinTokens - 1;
// Tokens per two-group GroupQ8Rows tile: 8, two tiles per token group of 16 (16 fp32 and 16 int32
// sums; GCC keeps 5 of the fp32 ones on the stack, updated once per block). Against 6 (tiles of
// 6, 6 and 4) on a Xeon (AVX512-VNNI, no AMX), pagoda_bench_matmul Q8_0 GFLOP/s, three interleaved
// rounds, 6 / 8: gate_up 5632 x 2048 16 tokens 666-696 / 757-759, 512 684-785 / 776-835; down
// 2048 x 5632 16 tokens 654-685 / 728-741, 512 637-752 / 769-787; q_o 2048 x 2048 16 tokens
// 696-712 / 711-759; BM_MatMulDram gate_up one call 16 tokens 456-503 / 503-526; bench model
// medium32k-q8_0 (three interleaved rounds) prefill 512 291.7-298.3 / 305.1-312.3 tok/s, 16
// streams (128 + 32) decode 209.2-216.4 / 220.8-228.9 tok/s. Not measured on the Zen 5 host.
// There (2026-12-08) a stand-alone copy of the 2 x 8 tile (not in the repo; one core, operands
// in L1) ran 620-640 GOP/s, 827 with an int32 add in place of each block's scale step;
// vpdpbusd alone issued 7.24 G a second (927 GOP/s, computed). Without the step's vmulps
// 704-711, without its vcvtdq2ps 668-670, with a vcvtdq2ps and a vaddps 783-790: vmulps and
// vfmadd231ps (and in part the convert) appear to take the pipes of vpdpbusd, so one fp32 step
// per 32-column block (3 ops per 8 vpdpbusd) holds this tile near 0.7 of the int8 peak. Its
// 1 x 16, 2 x 12, 3 x 8 and 4 x 6 variants ran 559-572 there.
inline constexpr int kQ8PairTileTokens = 8;
// Every grouped batch pairs its row groups. Pairs took batches from 32 tokens at first, which
// left every call of 16-31 tokens (batched decode, and prefill through matrices of 5632 columns,
// whose token chunks are 16) on single groups; then from 16: pagoda_bench_matmul (Zen 5), GFLOP/s
// 32 / 16, three interleaved rounds: down 2048 x 5632, 512 tokens 867, 839, 805 / 899, 942, 787,
// 16 tokens 880, 776, 837 / 976, 937, 761; gate_up 5632 x 2048, 16 tokens 785, 866, 880 / 950,
// 951, 933. Then from 9 (every grouped batch) once the pair tiles took 8 tokens (a Xeon,
// AVX512-VNNI, no AMX): bench verify -m medium32k-q8_0 --tokens 1 --context 128 -r 20, median
// step ms, three interleaved rounds, 16 / 9: --batch 9 57.8, 61.9, 69.0 / 51.5, 57.9, 57.6; 12
// 70.9, 64.9, 75.0 / 56.8, 57.8, 58.2; 14 81.2, 70.4, 70.1 / 71.2, 63.1, 62.6.

// Where GroupQ8Rows finds token t0 + t's activations of block b: kGrouped, the token groups
// (xg, xgc, xgd; t0 .. t0 + T - 1 within one group), every token at a fixed offset from one
// pointer; otherwise the token rows (xq, xc, xd).
template <bool kGrouped>
struct Q8Tokens {
  const Activations& a;
  int64_t t0, nbx;
  // Token t0's entry of block b in the groups (xg: times 32 bytes, xgc / xgd: elements).
  int64_t Entry(int64_t b) const { return (t0 / 16 * nbx + b) * 16 + t0 % 16; }
  // The 4 codes 4k..4k+3 of token t0 + t's block b.
  const int8_t* Codes(int64_t b, int t, int k) const {
    if constexpr (kGrouped) {
      const int64_t e = Entry(b);
      return a.xg + (e - e % 16) * 32 + 4 * (e % 16) + 64 * k + 4 * t;
    } else {
      return a.xq + (t0 + t) * a.ld + Q8VecCodeOffset(b, k);
    }
  }
  PAGODA_MM_VNNI __m512i Start(int64_t b, int t) const {
    if constexpr (kGrouped) return _mm512_set1_epi32(a.xgc[Entry(b) + t]);
    return _mm512_slli_epi32(_mm512_set1_epi32(a.xc[(t0 + t) * nbx + b]), 3);
  }
  float Scale(int64_t b, int t) const {
    if constexpr (kGrouped) return a.xgd[Entry(b) + t];
    return a.xd[(t0 + t) * nbx + b];
  }
};

// G groups of 16 rows (at g, g + gs) x T tokens over blocks [b0, b1): each weight vector feeds
// T vpdpbusd with its token's 4 activation bytes broadcast. One group of the token groups
// (kGrouped, G = 1) takes them from memory as the instruction's own {1to16} operand (which GCC
// 12 does not fold from the intrinsics); otherwise they are broadcast once into a register for
// every group's vpdpbusd (G groups: G weight streams in flight at once). For two groups: a block
// takes 8 T broadcasts and 16 weight loads for 16 T vpdpbusd where one group of 8 tokens takes 64 +
// 8 loads for 64, its broadcasts keeping the load ports busier than vpdpbusd. Per group the
// arithmetic is the same for every G and T (the int32 chains are exact). acc_io (16 floats per
// token, group h's at acc_io + h * acc_gs): the fp32 sums carried between block ranges. pf: each
// block's 9 lines of each group are prefetched at pf + h * gs + (b - b0) * kQ8GroupBlockBytes
// (nullptr: none).
template <int G, int T, bool kGrouped>
PAGODA_MM_VNNI void GroupQ8Rows(const uint8_t* g, int64_t gs, const Activations& a, int64_t t0,
                                int64_t b0, int64_t b1, float* acc_io, int64_t acc_gs,
                                const uint8_t* pf) {
  const Q8Tokens<kGrouped> x{a, t0, a.ld / 32};
  __m512 acc[G][T];
  PAGODA_UNROLL for (int h = 0; h < G; ++h) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      acc[h][t] = _mm512_load_ps(acc_io + h * acc_gs + 16 * t);
    }
  }
  // Two int32 chains per (group, token) hide vpdpbusd's latency for few of them; from 4 the
  // others do. Exact either way.
  constexpr int kChains = G * T < 4 ? 2 : 1;
  for (int64_t b = b0; b < b1; ++b) {
    if (pf != nullptr) {
      const char* line = reinterpret_cast<const char*>(pf + (b - b0) * kQ8GroupBlockBytes);
      PAGODA_UNROLL for (int h = 0; h < G; ++h) {
        PAGODA_UNROLL for (int k = 0; k < 9; ++k) _mm_prefetch(line + h * gs + 64 * k, _MM_HINT_T0);
      }
    }
    __m512 wd[G];
    __m512i dot[G][T][kChains];
    PAGODA_UNROLL for (int h = 0; h < G; ++h) {
      const uint8_t* blk = g + h * gs + b * kQ8GroupBlockBytes;
      wd[h] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 512)));
      PAGODA_UNROLL for (int t = 0; t < T; ++t) {
        dot[h][t][0] = x.Start(b, t);
        if constexpr (kChains == 2) dot[h][t][kChains - 1] = _mm512_setzero_si512();
      }
    }
    PAGODA_UNROLL for (int k = 0; k < 8; ++k) {
      __m512i wv[G];
      PAGODA_UNROLL for (int h = 0; h < G; ++h) {
        wv[h] = _mm512_loadu_si512(g + h * gs + b * kQ8GroupBlockBytes + 64 * k);
      }
      PAGODA_UNROLL for (int t = 0; t < T; ++t) {
        if constexpr (kGrouped && G == 1) {
          asm("vpdpbusd %[x]%{1to16%}, %[w], %[d]"
              : [d] "+v"(dot[0][t][k % kChains])
              : [w] "v"(wv[0]), [x] "m"(*reinterpret_cast<const int32_t*>(x.Codes(b, t, k))));
        } else {
          int32_t four;
          std::memcpy(&four, x.Codes(b, t, k), 4);
          const __m512i xv = _mm512_set1_epi32(four);
          PAGODA_UNROLL for (int h = 0; h < G; ++h) {
            dot[h][t][k % kChains] = _mm512_dpbusd_epi32(dot[h][t][k % kChains], wv[h], xv);
          }
        }
      }
    }
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      const __m512 xd = _mm512_set1_ps(x.Scale(b, t));
      PAGODA_UNROLL for (int h = 0; h < G; ++h) {
        const __m512i isum =
            kChains == 2 ? _mm512_add_epi32(dot[h][t][0], dot[h][t][kChains - 1]) : dot[h][t][0];
        acc[h][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(xd, wd[h]), acc[h][t]);
      }
    }
  }
  PAGODA_UNROLL for (int h = 0; h < G; ++h) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      _mm512_store_ps(acc_io + h * acc_gs + 16 * t, acc[h][t]);
    }
  }
}

// The first n of a group's 16 fp32 lanes (all from n >= 16).
constexpr __mmask16 FirstLanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// y[0, min(n, 16)) = sums[...] for a group's row sums, by one masked 64-byte store (a
// std::copy_n of a run-time count is a memmove call: 1.2% of a 16-stream Q8_0 decode profile).
PAGODA_MM_VNNI inline void StoreGroupSums(const float* sums, int64_t n, float* y) {
  _mm512_mask_storeu_ps(y, FirstLanes(n), _mm512_load_ps(sums));
}

// Zeroes the 16-float sums of n (row group, token) pairs at p (64-byte aligned) with vector
// stores: std::fill_n of a run-time count compiled to `rep stosq`, 3.5% of a Q8_0 prefill
// profile's samples (computed: 46% of BlockQ8Packed's own 7.7%). pagoda_bench_matmul Q8_0, GFLOP/s,
// three interleaved rounds, before / after: gate_up 16 tokens 671-684 / 694-714, 512 720-733 /
// 780-804; down 16 646-664 / 675-680, 512 649-712 / 723-773; BM_MatMulDram gate_up 16 490-501 /
// 506-516. bench model medium32k-q8_0 --prompt-len 512 --gen-len 2 -r 2, five interleaved runs:
// 241.7-301.5 (median 287.9) / 297.0-312.9 (median 299.1) tok/s; 16 streams' decode within the
// noise.
PAGODA_MM_VNNI inline void ZeroGroupSums(float* p, int64_t n) {
  __m512 zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    asm("" : "+v"(zero));  // an opaque value: GCC would turn a loop of zero stores into memset
    _mm512_store_ps(p + 16 * i, zero);
  }
}

// Calls of up to kMaxT tokens from the token rows: kG row groups side by side per pass (kG weight
// streams; gs bytes apart), each prefetched `ahead` bytes on.
template <int kG, int kMaxT>
PAGODA_MM_VNNI void RowGroupPasses(const uint8_t* w, int64_t gs, int64_t nr, const Activations& a,
                                   int64_t t0, int64_t nt, float* y, int64_t ldy, int64_t ahead) {
  const int64_t groups = (nr + 15) / 16, nb = a.cols / 32;
  alignas(64) float acc[kG][kMaxT][16];
  for (int64_t g = 0; g < groups; g += kG) {
    const int64_t ng = std::min<int64_t>(kG, groups - g);
    for (int64_t h = 0; h < ng; ++h) ZeroGroupSums(acc[h][0], nt);
    const uint8_t* wg = w + g * gs;
    ForTile<kG, kMaxT>(ng, nt, [&]<int G, int T>() {
      GroupQ8Rows<G, T, false>(wg, gs, a, t0, 0, nb, acc[0][0], kMaxT * 16, wg + ahead);
    });
    for (int64_t h = 0; h < ng; ++h) {
      const int64_t rows = std::min<int64_t>(16, nr - 16 * (g + h));
      for (int64_t t = 0; t < nt; ++t) StoreGroupSums(acc[h][t], rows, y + t * ldy + 16 * (g + h));
    }
  }
}

// The GEMV's prefetch distance per weight stream, in blocks (BlockQ8Packed): 2 (1.1 KiB). On a
// Zen 5 host reading 52-64 GB/s, BM_MatMulModelDecode (medium32k-q8_0's decode GEMVs in step
// order) W_GB/s, 8 / 4 / 2 ahead, interleaved rounds: 52.2 / 53.8 / 55.4, 51.5 / 56.9 / 58.1,
// 57.0 / 61.7 / 57.7, 56.1 / 58.2 / 62.0 (16 ahead: 46.8-47.3 against 8's 47.8-50.9); bench verify
// --tokens 1 --context 128 -r 40, median step ms at 58.6-60.3 GB/s, 8 / 2: 22.75, 22.50, 21.88 /
// 21.28, 21.13; at 26-31 GB/s 29.73, 30.88, 33.31 / 29.30, 31.85, 32.72 (the same).
inline constexpr int64_t kQ8GemvAhead = 2;

// Row r of a group is row 16 * group + r; ws is the packed bytes per row (groups are 16 * ws).
// One token (the GEMV): 4 groups side by side (GroupQ8Rows<4, 1, false>), 4 weight streams per
// thread. One group at a time (one stream) reached less of the read bandwidth: bench model
// medium32k-q8_0 --interleave-bandwidth, decode fraction, 3 interleaved rounds, one / four:
// 0.732 / 0.866, 0.697 / 0.854, 0.765 / 0.912 (as packed BF16 and F16, 4 streams, reached
// 0.93-1.07). Prefetching 4, 8 or 16 blocks ahead per stream: no difference within the noise
// (3 rounds: 0.89-1.00, 0.82-0.92, 0.85-0.94 as the host read 37-55 GB/s; faster hosts: see
// kQ8GemvAhead). Two int32 chains per group (GroupQ8Rows takes one at 4 groups) against one,
// same command, 3 interleaved rounds: 0.888, 0.859, 0.893 / 0.820, 0.950, 0.896 (54-59 GB/s):
// no difference.
// Up to kQ8MaxTileTokens tokens (speculative verification, small batches): the groups two at a
// time (two weight streams), each pair in one pass, prefetched kQ8GroupPrefetch ahead. One group
// at a time before: bench verify -m medium32k-q8_0 --context 128 -r 20, median step ms, six
// interleaved rounds one / two: --batch 4 --tokens 1 53.5, 45.5, 48.1, 45.2, 44.2, 48.5 / 43.9,
// 44.5, 47.3, 43.5, 77.4 (an outlier), 44.6; --batch 8 54.4, 55.6, 59.6, 50.7, 50.2, 63.2 /
// 46.4, 53.3, 49.7, 48.3, 47.3, 51.8; --batch 1 --tokens 5 54.5, 46.5, 51.8, 49.1, 46.4, 51.0 /
// 50.1, 50.1, 43.5, 46.6, 45.4, 48.8; three rounds --batch 2 44.8, 43.0, 43.7 / 38.8, 40.3,
// 41.2, --tokens 3 42.3, 42.4, 50.3 / 40.7, 42.4, 44.0. More tokens (t0 a multiple of 16):
// chunks of up to kQ8ChunkGroups groups, token group by token group (16 tokens); for each span
// of kQ8SpanBlocks blocks, every group of the chunk in turn in tiles of up to kQ8MaxTileTokens
// tokens (pairs of groups in tiles of kQ8PairTileTokens, the last odd one alone), so the
// span's activations (16 tokens: 4 KiB of codes) stay in L1 while the weights stream through;
// the first token group's pass prefetches the next group's span (the next weights it reads).
// Before (one group x up to 12 tokens per pass from the token rows, whose per-token pointers GCC
// kept on the stack: some 130 scalar moves per 96 vpdpbusd), 16 tokens: pagoda_bench_matmul
// from cache GFLOP/s, two interleaved rounds: gate_up 802, 775 / 845, 816, down 769, 783 / 875,
// 738, output 701, 715 / 870, 798; BM_MatMulDram gate_up one call 590, 670 / 737-791 (other
// minutes); bench verify --batch 16 --tokens 1 --context 128 medium32k-q8_0, median step 66.6,
// 69.6 / 58.1, 58.6 ms (interleaved).
// At 16 tokens, tiles of 16 tokens spilled (33 zmm), and spans of 16 blocks were no faster; 2
// groups x 6 tokens were no faster then, but were later on a Zen 5 host, and 2 x 8 faster still
// on a Xeon (kQ8PairTileTokens); chunks of 4 or 16 groups no different within the noise
// (BM_MatMulDram gate_up 16 tokens, two interleaved runs: 4 groups 750-817, 8 717-809, 16
// 748-759 GFLOP/s), of 2 slower (555, 729).
PAGODA_MM_VNNI void BlockQ8Packed(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                                  int64_t t0, int64_t nt, float* y, int64_t ldy) {
  const int64_t groups = (nr + 15) / 16, gs = 16 * ws, nb = a.cols / 32;
  if (nt == 1) {
    RowGroupPasses<4, 1>(w, gs, nr, a, t0, nt, y, ldy, kQ8GemvAhead * kQ8GroupBlockBytes);
    return;
  }
  if (nt <= kQ8MaxTileTokens) {
    RowGroupPasses<2, kQ8MaxTileTokens>(w, gs, nr, a, t0, nt, y, ldy, kQ8GroupPrefetch);
    return;
  }
  alignas(64) float acc[kQ8ChunkGroups][16][16];
  for (int64_t g0 = 0; g0 < groups; g0 += kQ8ChunkGroups) {
    const int64_t ng = std::min(kQ8ChunkGroups, groups - g0);
    for (int64_t ts = 0; ts < nt; ts += 16) {
      const int64_t ns = std::min<int64_t>(16, nt - ts);
      for (int64_t g = 0; g < ng; ++g) ZeroGroupSums(acc[g][0], ns);
      for (int64_t b0 = 0; b0 < nb; b0 += kQ8SpanBlocks) {
        const int64_t b1 = std::min(nb, b0 + kQ8SpanBlocks);
        for (int64_t g = 0; g < ng;) {
          const uint8_t* wg = w + (g0 + g) * gs;
          // Groups in this pass: a pair (the last one of an odd count alone).
          const int64_t step = g + 1 < ng ? 2 : 1;
          // The next group's span; after the chunk's last group the first one's next span, or
          // after the last span the next chunk's start.
          const uint8_t* next = g + step < ng ? wg + step * gs + b0 * kQ8GroupBlockBytes
                                : b1 < nb     ? w + g0 * gs + b1 * kQ8GroupBlockBytes
                                              : wg + step * gs;
          // Group h's sums of token t at acc[g + h][t]: 16 * 16 floats apart.
          const auto pass = [&]<int G, int kMaxT>() {
            for (int64_t t = 0; t < ns; t += kMaxT) {
              ForTile<1, kMaxT>(1, std::min<int64_t>(kMaxT, ns - t), [&]<int R, int T>() {
                GroupQ8Rows<G, T, true>(wg, gs, a, t0 + ts + t, b0, b1, acc[g][t], 16 * 16,
                                        ts == 0 && t == 0 ? next : nullptr);
              });
            }
          };
          if (step == 2) {
            pass.template operator()<2, kQ8PairTileTokens>();
          } else {
            pass.template operator()<1, kQ8MaxTileTokens>();
          }
          g += step;
        }
      }
      for (int64_t g = 0; g < ng; ++g) {
        const int64_t rows = std::min<int64_t>(16, nr - 16 * (g0 + g));
        for (int64_t t = 0; t < ns; ++t) {
          StoreGroupSums(acc[g][t], rows, y + (ts + t) * ldy + 16 * (g0 + g));
        }
      }
    }
  }
}

// t0 is a multiple of 16 (the driver's token chunks are).
PAGODA_MM_VNNI void BlockQ8Lanes(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                                 int64_t t0, int64_t nt, float* y, int64_t ldy) {
  const int64_t nb = a.cols / 32;
  std::vector<int32_t> starts(static_cast<size_t>(nr * nb));
  WeightStarts(w, ws, nr, nb, starts.data());
  for (int64_t t = 0; t < nt; t += 16) {
    const int64_t g = (t0 + t) / 16, n = std::min<int64_t>(16, nt - t);
    float* yt = y + t * ldy;
    int64_t r = 0;
    const auto tile = [&]<int R>() {
      TileQ8Lanes<R>(w + r * ws, ws, starts.data() + r * nb, a, g, yt + r, ldy, n);
    };
    for (; r + 8 <= nr; r += 8) tile.template operator()<8>();
    for (; r + 4 <= nr; r += 4) tile.template operator()<4>();
    for (; r < nr; ++r) tile.template operator()<1>();
  }
}

// ------------------------------------------------------------------------ AVX512-BF16 ----
// vdpbf16ps on 32 columns per step: bf16 weight rows x bf16-rounded activations (zero padded to
// a multiple of 32 columns; the weight tail is a masked load).

template <int R, int T>
PAGODA_MM_BF16 inline void StepBf16(const uint8_t* w, int64_t ws, const uint16_t* xb, int64_t ld,
                                    int64_t c, __mmask32 m, __m512 (&acc)[R][T]) {
  __m512bh wv[R];
  PAGODA_UNROLL for (int r = 0; r < R; ++r) wv[r] =
      (__m512bh)_mm512_maskz_loadu_epi16(m, w + r * ws + 2 * c);
  PAGODA_UNROLL for (int t = 0; t < T; ++t) {
    const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + t * ld + c);
    PAGODA_UNROLL for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
  }
}

template <int R, int T>
PAGODA_MM_BF16 void TileBf16Dp(const uint8_t* w, int64_t ws, const Activations& a, int64_t t0,
                               float* y, int64_t ldy, bool prefetch) {
  __m512 acc[R][T];
  PAGODA_UNROLL for (int r = 0; r < R; ++r) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const uint16_t* xb = a.xb + t0 * a.ld;
  const int64_t c32 = a.cols / 32 * 32;
  for (int64_t c = 0; c < c32; c += 32) {
    if (prefetch) PrefetchTileRows<R>(w, ws, 2 * c);
    StepBf16<R, T>(w, ws, xb, a.ld, c, ~0u, acc);
  }
  if (c32 < a.cols) {
    const __mmask32 m = static_cast<__mmask32>((1u << (a.cols - c32)) - 1);
    StepBf16<R, T>(w, ws, xb, a.ld, c32, m, acc);
  }
  StoreSums<R, T>(acc, y, ldy);
}

PAGODA_MM_BF16 void BlockBf16Dp(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                                int64_t t0, int64_t nt, float* y, int64_t ldy) {
  ForEachTile<4, 4>(nr, nt, [&]<int R, int T>(int64_t r, int64_t t) {
    TileBf16Dp<R, T>(w + r * ws, ws, a, t0 + t, y + t * ldy + r, ldy,
                     nt <= kPrefetchAllTokens || t0 + t == 0);
  });
}

// The packed float kernels' (BF16, F16) G x T tiles of 16-row lanes: zeroed, and stored to
// y (token t at y + t * ldy, group g's lanes at 16 g; rows: the tile's rows left, the lanes
// past them not stored).
template <int G, int T>
PAGODA_MM_AVX512 inline void ZeroGroupLanes(__m512 (&acc)[G][T]) {
  PAGODA_UNROLL for (int g = 0; g < G; ++g) {
    PAGODA_UNROLL for (int t = 0; t < T; ++t) acc[g][t] = _mm512_setzero_ps();
  }
}
template <int G, int T>
PAGODA_MM_AVX512 inline void StoreGroupLanes(const __m512 (&acc)[G][T], float* y, int64_t ldy,
                                             int64_t rows) {
  PAGODA_UNROLL for (int g = 0; g < G; ++g) {
    const __mmask16 m = FirstLanes(rows - 16 * g);
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      _mm512_mask_storeu_ps(y + t * ldy + 16 * g, m, acc[g][t]);
    }
  }
}

// Walks ng row groups x nt tokens (from t0) of a packed float kernel in register tiles,
// tile.template operator()<G, T>(g, t): one token 4 groups at a time (4 weight streams), more
// tokens 2 groups x up to 8 tokens, a tile never crossing a boundary of token_group tokens.
// Tried on BF16 (pagoda_bench_matmul GFLOP/s, shapes q_o / gate_up / down at 32 and 512 tokens,
// two interleaved rounds): 4 groups x 6 tokens (64-row tiles) 562-738 against 2 x 8's 569-719
// (down at 512: 562, 581 / 602, 631); 4 x 6 where 4 groups remain, else 2 x 8, also in bench
// model medium32k-bf16 --prompt-len 512: 284.5, 280.5, 261.2 / 268.9, 270.3, 284.7 tok/s
// (within the noise); 4 x 4 467-695, 2 x 12 567-679, 1 x 16 428-653 (its run's 2 x 8: 502-702).
// Columns in blocks of 128 pairs (accumulators stored and reloaded, so each block's weights and
// activations are read from L1 by every tile): 11-37% slower at 32 tokens, 4-10% at 512
// (computed from W_GB/s, two rounds).
template <typename Tile>
inline void ForEachGroupTile(int64_t ng, int64_t t0, int64_t nt, int64_t token_group, Tile&& tile) {
  if (nt == 1) {
    for (int64_t g = 0; g < ng; g += 4) {
      ForTile<4, 1>(std::min<int64_t>(4, ng - g), 1,
                    [&]<int G, int T>() { tile.template operator()<G, T>(g, 0); });
    }
    return;
  }
  for (int64_t g = 0; g < ng; g += 2) {
    for (int64_t t = 0; t < nt;) {
      const int64_t n = std::min({int64_t{8}, nt - t, token_group - (t0 + t) % token_group});
      ForTile<2, 8>(std::min<int64_t>(2, ng - g), n,
                    [&]<int G, int T>() { tile.template operator()<G, T>(g, t); });
      t += n;
    }
  }
}

// Whether the packed float kernels' tile at token t of a call of nt tokens prefetches its group's
// weights ahead: every tile of a call of up to 8 tokens (one tile per group), else the first token
// tile of each group, the one that reads the group from memory (the later ones find it in cache).
// Calls of 9+ tokens used not to prefetch at all: BM_MatMulDram gate_up one call 16 tokens,
// GFLOP/s, three interleaved rounds, before / after: F32 129-130 / 145-153, F16 189-193 /
// 212-227, BF16 143-150 / 162-164; bench model --batch 16 (128 + 32) decode, two rounds: F16
// 88.7, 87.9 / 100.1, 100.3 tok/s, BF16 65.7, 65.6 / 71.5, 71.1 (from cache, 16-512 tokens: the
// same within the noise).
inline bool FloatPackedPrefetch(int64_t nt, int64_t t) { return nt <= 8 || t == 0; }

// Packed BF16 rows (matmul_kernels.h X86Bf16PackedKernel) in register tiles of G row groups x T
// tokens: per pair, G weight vectors and T broadcast activation pairs, G x T vdpbf16ps into
// one fp32 lane per (row, token). x: the tile's first token's pairs, `step` uint32 apart per
// pair. One token streams its weights from memory: 4 groups at a time, each prefetched
// kBf16PackedAhead bytes ahead.
constexpr int64_t kBf16PackedAhead = 1024;

template <int G, int T>
PAGODA_MM_BF16 void TileBf16Packed(const uint8_t* w, int64_t gs, int64_t np, const uint32_t* x,
                                   int64_t step, bool prefetch, float* y, int64_t ldy,
                                   int64_t rows) {
  __m512 acc[G][T];
  ZeroGroupLanes(acc);
  for (int64_t k = 0; k < np; ++k) {
    __m512bh wv[G];
    PAGODA_UNROLL for (int g = 0; g < G; ++g) {
      const uint8_t* p = w + g * gs + 64 * k;
      if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(p + kBf16PackedAhead), _MM_HINT_T0);
      wv[g] = (__m512bh)_mm512_loadu_si512(p);
    }
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(static_cast<int32_t>(x[k * step + t]));
      PAGODA_UNROLL for (int g = 0; g < G; ++g) {
        acc[g][t] = _mm512_dpbf16_ps(acc[g][t], wv[g], xv);
      }
    }
  }
  StoreGroupLanes(acc, y, ldy, rows);
}

// Rows [0, nr) of a tile (nr counted from a group start; w_stride: PackedRowBytes) x tokens
// [t0, t0 + nt): row groups outer, tiles of up to 8 tokens inner (2 groups, or 4 for one token).
PAGODA_MM_BF16 void BlockBf16Packed(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                                    int64_t t0, int64_t nt, float* y, int64_t ldy) {
  const int64_t gs = 16 * ws, np = ws / 4, ng = (nr + 15) / 16, s = a.group;
  const auto* xg = reinterpret_cast<const uint32_t*>(a.xb);
  // Token tiles never cross a group of s tokens (t0 is a multiple of s: 16, or 0).
  ForEachGroupTile(ng, t0, nt, s, [&]<int G, int T>(int64_t g, int64_t t) {
    const int64_t tok = t0 + t;
    TileBf16Packed<G, T>(w + g * gs, gs, np, xg + (tok / s * np) * s + tok % s, s,
                         FloatPackedPrefetch(nt, t), y + t * ldy + 16 * g, ldy, nr - 16 * g);
  });
}

// Packed F16 and F32 rows (matmul_kernels.h X86F16PackedKernel, X86F32PackedKernel) in register
// tiles of G row groups x T tokens: per column, G weight vectors (F16 widened to fp32) and T
// broadcast activations, G x T FMAs into one fp32 lane per (row, token). One token streams its
// weights from memory: 4 groups at a time, each prefetched kFloatPackedAhead bytes ahead (one
// line every 64 bytes: every other column of F16, every column of F32).
constexpr int64_t kFloatPackedAhead = 1024;

template <Wf F, int G, int T>
PAGODA_MM_AVX512 void TileFloatPacked(const uint8_t* w, int64_t gs, int64_t cols, const float* x,
                                      int64_t ldx, bool prefetch, float* y, int64_t ldy,
                                      int64_t rows) {
  static_assert(F == Wf::kF16 || F == Wf::kF32);
  constexpr int64_t kColumnBytes = F == Wf::kF32 ? 64 : 32;  // 16 rows of one column
  __m512 acc[G][T];
  ZeroGroupLanes(acc);
  for (int64_t c = 0; c < cols; ++c) {
    __m512 wv[G];
    PAGODA_UNROLL for (int g = 0; g < G; ++g) {
      const uint8_t* p = w + g * gs + kColumnBytes * c;
      if (prefetch && kColumnBytes * c % 64 == 0) {  // a line every 64 bytes
        _mm_prefetch(reinterpret_cast<const char*>(p + kFloatPackedAhead), _MM_HINT_T0);
      }
      if constexpr (F == Wf::kF32) {
        wv[g] = _mm512_loadu_ps(p);
      } else {
        wv[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      }
    }
    PAGODA_UNROLL for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_set1_ps(x[t * ldx + c]);
      PAGODA_UNROLL for (int g = 0; g < G; ++g) acc[g][t] = _mm512_fmadd_ps(wv[g], xv, acc[g][t]);
    }
  }
  StoreGroupLanes(acc, y, ldy, rows);
}

// Rows [0, nr) of a tile (from a group start; w_stride: PackedRowBytes) x tokens [t0, t0 + nt):
// row groups outer, tiles of up to 8 tokens inner (2 groups, or 4 for one token).
template <Wf F>
PAGODA_MM_AVX512 void BlockFloatPacked(const uint8_t* w, int64_t ws, int64_t nr,
                                       const Activations& a, int64_t t0, int64_t nt, float* y,
                                       int64_t ldy) {
  const int64_t gs = 16 * ws, ng = (nr + 15) / 16;
  ForEachGroupTile(ng, t0, nt, std::numeric_limits<int64_t>::max(),
                   [&]<int G, int T>(int64_t g, int64_t t) {
                     TileFloatPacked<F, G, T>(w + g * gs, gs, a.cols, a.x + (t0 + t) * a.cols,
                                              a.cols, FloatPackedPrefetch(nt, t),
                                              y + t * ldy + 16 * g, ldy, nr - 16 * g);
                   });
}

// ------------------------------------------------------------------ bf16 conversions ----
// F16 rows to bf16 for the opt-in F16Matmul::kBf16 batch path (vcvtne2ps2bf16 rounds to
// nearest even).

PAGODA_MM_BF16 inline void StoreBf16x32(uint16_t* dst, __m512 lo, __m512 hi, __mmask32 m) {
  _mm512_mask_storeu_epi16(dst, m, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

PAGODA_MM_BF16 void F16RowToBf16(const uint8_t* row, uint16_t* dst, int64_t cols) {
  for (int64_t c = 0; c < cols; c += 32) {
    const int64_t n = std::min<int64_t>(32, cols - c);
    const __mmask32 m = n == 32 ? ~0u : static_cast<__mmask32>((1u << n) - 1);
    const __m512i h = _mm512_maskz_loadu_epi16(m, row + 2 * c);
    const __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    const __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
    StoreBf16x32(dst + c, lo, hi, m);
  }
}

// ----------------------------------------------------------------------------- tables ----
// One entry per (level, type) with a kernel; add a quantized type with one Block function.

Kernel Avx2Kernels(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return {BlockFp256<Wf::kF32>, ActFormat::kF32, "avx2/f32"};
    case GgmlType::kF16:
      return {BlockFp256<Wf::kF16>, ActFormat::kF32, "avx2/f16"};
    case GgmlType::kBF16:
      return {BlockFp256<Wf::kBf16>, ActFormat::kF32, "avx2/bf16"};
    case GgmlType::kQ8_0:
      return {BlockQ8Avx2, ActFormat::kQ8, "avx2/q8_0"};
    default:
      return X86QuantKernel(SimdLevel::kAvx2, type);
  }
}

Kernel Avx512Kernels(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return {BlockFp512<Wf::kF32>, ActFormat::kF32, "avx512/f32"};
    case GgmlType::kF16:
      return {BlockFp512<Wf::kF16>, ActFormat::kF32, "avx512/f16"};
    case GgmlType::kBF16:
      return {BlockFp512<Wf::kBf16>, ActFormat::kF32, "avx512/bf16"};
    case GgmlType::kQ8_0:
      return {BlockQ8Sign512, ActFormat::kQ8, "avx512/q8_0"};
    default:
      return X86QuantKernel(SimdLevel::kAvx512, type);
  }
}

}  // namespace

Kernel X86Q8LanesKernel() { return {BlockQ8Lanes, ActFormat::kQ8Lanes, "avx512vnni/q8_0-lanes"}; }
Kernel X86Q8PackedKernel() {
  return {BlockQ8Packed, ActFormat::kQ8VecGroups, "avx512vnni/q8_0x16rows"};
}

ToBf16Fn X86Bf16Converter(GgmlType type) {
  switch (type) {
    case GgmlType::kF16:
      return F16RowToBf16;
    default:
      return nullptr;
  }
}

namespace {

// QuantizeQ8Portable's bytes 32 values at a time: max(|x|, acc) keeps acc where x is NaN, as
// std::max(amax, NaN) does; vcvtps2dq rounds x * id to nearest even (MXCSR's default) as adding
// and subtracting 1.5 * 2^23 does; the codes fit int8, so the truncating narrow is exact.
PAGODA_MM_AVX512 void QuantizeQ8Avx512(const float* x, int64_t cols, int64_t ld, int8_t* xq,
                                       float* xd) {
  for (int64_t b = 0; b < ld / 32; ++b) {
    const int64_t n = std::clamp<int64_t>(cols - 32 * b, 0, 32);
    const uint32_t m = n >= 32 ? ~0u : (1u << n) - 1;
    const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), x + 32 * b);
    const __m512 hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), x + 32 * b + 16);
    const __m512 lo_max = _mm512_max_ps(_mm512_abs_ps(lo), _mm512_setzero_ps());
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(hi), lo_max));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    xd[b] = d;
    const __m128i ql = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(lo, id)));
    const __m128i qh = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(hi, id)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + 32 * b), ql);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + 32 * b + 16), qh);
  }
}

// InterleaveX16Portable's bytes. Per 512 codes (8 zmm, block b in dwords 8b..8b+7): output
// vector v gathers dword 8b + v of every block b (all 8 gathered before any store, as the codes
// are rewritten in place); the half-block sums come from vpsadbw of the codes + 128 (each 64-bit
// lane: 8 codes + 8 * 128), two lanes per half. The sums are exact integers, and xs is the same
// single fp32 product.
PAGODA_MM_AVX512 void InterleaveX16Avx512(int8_t* xq, const float* xd, int64_t ld, float* xs,
                                          int16_t* xsum) {
  const __m512i blocks =
      _mm512_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t g = 0; g < ld / 512; ++g) {
    int8_t* q = xq + g * 512;
    alignas(64) uint64_t sad[8][8];
    for (int k = 0; k < 8; ++k) {
      const __m512i codes = _mm512_loadu_si512(q + 64 * k);
      _mm512_store_si512(sad[k],
                         _mm512_sad_epu8(_mm512_xor_si512(codes, flip), _mm512_setzero_si512()));
    }
    __m512i out[8];
    for (int v = 0; v < 8; ++v) {
      out[v] = _mm512_i32gather_epi32(_mm512_add_epi32(blocks, _mm512_set1_epi32(v)), q, 4);
    }
    for (int v = 0; v < 8; ++v) _mm512_storeu_si512(q + 64 * v, out[v]);
    for (int b = 0; b < 16; ++b) {
      const uint64_t* lanes = sad[b / 2] + 4 * (b % 2);  // the block's 4 lanes, 8 codes each
      const int32_t h0 = static_cast<int32_t>(lanes[0] + lanes[1]) - 16 * 128;
      const int32_t h1 = static_cast<int32_t>(lanes[2] + lanes[3]) - 16 * 128;
      xsum[32 * g + 2 * b] = static_cast<int16_t>(h0);
      xsum[32 * g + 2 * b + 1] = static_cast<int16_t>(h1);
      xs[16 * g + b] = xd[16 * g + b] * static_cast<float>(h0 + h1);
    }
  }
}

// Bf16PairsPortable's bits 16 values (8 pairs) at a time: Fp32ToBf16's integer rounding (nearest
// even; a NaN kept quiet with its sign and upper payload), the 16-bit halves packed in order.
PAGODA_MM_AVX512 void Bf16PairsAvx512(const float* x, int64_t cols, uint32_t* dst, int64_t stride) {
  const __m512i lsb = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m512i bits = _mm512_loadu_si512(x + c);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), lsb);
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, bias), odd), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(bits, abs), inf);
    h = _mm512_mask_or_epi32(h, nan, _mm512_srli_epi32(bits, 16), quiet);
    alignas(32) uint32_t pairs[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(pairs), _mm512_cvtepi32_epi16(h));
    for (int k = 0; k < 8; ++k) dst[(c / 2 + k) * stride] = pairs[k];
  }
  Bf16PairsPortable(x + c, cols - c, dst + c / 2 * stride, stride);
}

}  // namespace

QuantizeQ8Fn X86Q8Quantizer(SimdLevel level) {
  return level >= SimdLevel::kAvx512 ? QuantizeQ8Avx512 : nullptr;
}

InterleaveX16Fn X86InterleaveX16(SimdLevel level) {
  return level >= SimdLevel::kAvx512 ? InterleaveX16Avx512 : nullptr;
}

Bf16PairsFn X86Bf16Pairs(SimdLevel level) {
  return level >= SimdLevel::kAvx512 ? Bf16PairsAvx512 : nullptr;
}

Kernel X86Kernel(SimdLevel level, GgmlType type) {
  if (level == SimdLevel::kAvx2) return Avx2Kernels(type);
  if (level >= SimdLevel::kAvx512Bf16 && type == GgmlType::kBF16) {
    return {BlockBf16Dp, ActFormat::kBf16, "avx512bf16/bf16"};
  }
  if (level >= SimdLevel::kAvx512Vnni && type == GgmlType::kQ8_0) {
    return {BlockQ8Vec, ActFormat::kQ8Vec, "avx512vnni/q8_0"};
  }
  if (level >= SimdLevel::kAvx512Vnni) {
    const Kernel k = X86QuantKernel(SimdLevel::kAvx512Vnni, type);
    if (k.fn != nullptr) return k;
  }
  return Avx512Kernels(type);
}

Kernel X86Bf16PackedKernel() {
  return {BlockBf16Packed, ActFormat::kBf16Pairs, "avx512bf16/bf16x16"};
}

Kernel X86F16PackedKernel() {
  return {BlockFloatPacked<Wf::kF16>, ActFormat::kF32, "avx512/f16x16"};
}
Kernel X86F32PackedKernel() {
  return {BlockFloatPacked<Wf::kF32>, ActFormat::kF32, "avx512/f32x16"};
}

}  // namespace pagoda::cpu::mm::internal

#pragma GCC diagnostic pop

#else  // not x86-64 GCC

namespace pagoda::cpu::mm::internal {
Kernel X86Kernel(SimdLevel, GgmlType) { return {}; }
QuantizeQ8Fn X86Q8Quantizer(SimdLevel) { return nullptr; }
InterleaveX16Fn X86InterleaveX16(SimdLevel) { return nullptr; }
Bf16PairsFn X86Bf16Pairs(SimdLevel) { return nullptr; }
ToBf16Fn X86Bf16Converter(GgmlType) { return nullptr; }
Kernel X86Q8LanesKernel() { return {}; }
Kernel X86Q8PackedKernel() { return {}; }
Kernel X86Bf16PackedKernel() { return {}; }
Kernel X86F16PackedKernel() { return {}; }
Kernel X86F32PackedKernel() { return {}; }
Kernel X86QuantKernel(SimdLevel, GgmlType) { return {}; }
Kernel X86PackedKernel(SimdLevel, GgmlType) { return {}; }
}  // namespace pagoda::cpu::mm::internal

#endif
