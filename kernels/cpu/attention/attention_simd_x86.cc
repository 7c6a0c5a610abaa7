// AVX-512 and AVX2+FMA tile kernels (see attention_simd.h for the layouts). Every function
// carries a GCC target attribute, so the rest of the build stays at the baseline ISA; the
// dispatcher in attention_simd.cc only hands these out when the CPU supports them.
//
// Register blocking: scores take 4 query rows x 4 keys (AVX-512; AVX2: 4 x 2) per pass over d,
// so each K row is loaded once per block of 4 rows (for GQA g = 4 decode: once), and reduce
// the 16 (8) dot-product accumulators with one transpose-add tree. The V accumulation keeps
// 4 rows x 64 output floats (AVX2: 4 x 16) in registers across all keys of the tile, so each
// V cache line is loaded once per block of 4 rows.
#include "kernels/cpu/attention/attention_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)

// GCC 12's AVX-512 intrinsic headers self-initialise placeholder operands (`__Y = __Y`), which
// -Wuninitialized reports once they are inlined here (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/matmul/matmul_tiles.h"

#define PAGODA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define PAGODA_AVX2 __attribute__((target("avx2,fma")))

namespace pagoda::cpu::attn {
namespace {

constexpr int kRb = 4;  // query rows per register block

// Exp constants shared by both levels (same algorithm as the portable ExpPortable).
constexpr float kExpLo = -87.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = 2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f;
constexpr float kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

// ------------------------------------------------------------------------------- AVX-512 ----

// Lane i of the result = horizontal sum of a[i] (16 vectors -> 1) by a transpose-add tree.
PAGODA_AVX512 inline __m512 Reduce16(const __m512* a) {
  __m512 b[8], c[4], e[2];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: [x0+x2, y0+y2, x1+x3, y1+y3]
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the lane's sums of a[4i .. 4i+3]
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int i = 0; i < 2; ++i) {
    e[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// out[4 r + j] = <q[r], k[j]> for r < NR, j < 4 (rows >= NR give 0).
template <int NR>
PAGODA_AVX512 inline __m512 Dots512(const float* const* q, const float* const* k, int32_t d) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int32_t x = 0; x < d; x += 16) {
    const __m512 k0 = _mm512_loadu_ps(k[0] + x), k1 = _mm512_loadu_ps(k[1] + x);
    const __m512 k2 = _mm512_loadu_ps(k[2] + x), k3 = _mm512_loadu_ps(k[3] + x);
    for (int r = 0; r < NR; ++r) {
      const __m512 qv = _mm512_loadu_ps(q[r] + x);
      acc[4 * r + 0] = _mm512_fmadd_ps(qv, k0, acc[4 * r + 0]);
      acc[4 * r + 1] = _mm512_fmadd_ps(qv, k1, acc[4 * r + 1]);
      acc[4 * r + 2] = _mm512_fmadd_ps(qv, k2, acc[4 * r + 2]);
      acc[4 * r + 3] = _mm512_fmadd_ps(qv, k3, acc[4 * r + 3]);
    }
  }
  return Reduce16(acc);
}

template <int NR>
PAGODA_AVX512 void ScoreRows512(const RowBlock& rb, int32_t r0, const float* const* k, int32_t n,
                                float scale, float* s, int32_t ld, const Prefetch* pf) {
  const float* q[kRb];
  for (int r = 0; r < NR; ++r) q[r] = rb.q_row(r0 + r);
  const __m512 vscale = _mm512_set1_ps(scale);
  alignas(64) float out[16];
  for (int32_t j0 = 0; j0 < n; j0 += 4) {
    const float* kb[4];
    for (int i = 0; i < 4; ++i) kb[i] = k[std::min(j0 + i, n - 1)];
    if (pf != nullptr) pf->Issue(pf->k, j0, 4);
    _mm512_store_ps(out, _mm512_mul_ps(Dots512<NR>(q, kb, rb.d), vscale));
    const int nk = std::min(4, n - j0);
    for (int r = 0; r < NR; ++r) {
      for (int i = 0; i < nk; ++i) s[(r0 + r) * ld + j0 + i] = out[4 * r + i];
    }
  }
}

PAGODA_AVX512 void Scores512(const RowBlock& rb, const float* const* k, int32_t n, float scale,
                             float* s, int32_t ld, const Prefetch& pf) {
  for (int32_t r0 = 0; r0 < rb.rows; r0 += kRb) {
    const Prefetch* p = r0 == 0 ? &pf : nullptr;
    mm::internal::ForTile<kRb, 1>(std::min(kRb, rb.rows - r0), 1, [&]<int R, int>() {
      ScoreRows512<R>(rb, r0, k, n, scale, s, ld, p);
    });
  }
}

// o[r][x0 .. x0 + 16 NV) += sum_j p[r][j] v[j][x0 ..] for r < NR, all in registers.
template <int NR, int NV>
PAGODA_AVX512 void AccChunk512(float* const* o, const float* const* p, const float* const* v,
                               int32_t n, int32_t x0, const Prefetch* pf) {
  __m512 acc[NR][NV];
  for (int r = 0; r < NR; ++r) {
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_loadu_ps(o[r] + x0 + 16 * c);
  }
  for (int32_t j = 0; j < n; ++j) {
    if (pf != nullptr) pf->Issue(pf->v, j, 1);
    __m512 vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = _mm512_loadu_ps(v[j] + x0 + 16 * c);
    for (int r = 0; r < NR; ++r) {
      const __m512 pr = _mm512_set1_ps(p[r][j]);
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(pr, vv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int c = 0; c < NV; ++c) _mm512_storeu_ps(o[r] + x0 + 16 * c, acc[r][c]);
  }
}

template <int NR>
PAGODA_AVX512 void AccRows512(const RowBlock& rb, int32_t r0, const float* p, int32_t ld,
                              const float* const* v, int32_t n, const Prefetch* pf) {
  float* o[NR];
  const float* pr[NR];
  for (int r = 0; r < NR; ++r) {
    o[r] = rb.o_row(r0 + r);
    pr[r] = p + static_cast<int64_t>(r0 + r) * ld;
  }
  for (int32_t x0 = 0; x0 < rb.d; x0 += 64) {
    const Prefetch* chunk_pf = x0 == 0 ? pf : nullptr;
    mm::internal::ForTile<4, 1>(std::min(4, (rb.d - x0) / 16), 1, [&]<int NV, int>() {
      AccChunk512<NR, NV>(o, pr, v, n, x0, chunk_pf);
    });
  }
}

PAGODA_AVX512 void Accumulate512(const RowBlock& rb, const float* p, int32_t ld,
                                 const float* const* v, int32_t n, const Prefetch& pf) {
  for (int32_t r0 = 0; r0 < rb.rows; r0 += kRb) {
    const Prefetch* f = r0 == 0 ? &pf : nullptr;
    mm::internal::ForTile<kRb, 1>(std::min(kRb, rb.rows - r0), 1,
                                  [&]<int R, int>() { AccRows512<R>(rb, r0, p, ld, v, n, f); });
  }
}

PAGODA_AVX512 inline __m512 Exp512(__m512 x) {
  const __m512 v = _mm512_max_ps(x, _mm512_set1_ps(kExpLo));
  const __m512 t = _mm512_fmadd_ps(v, _mm512_set1_ps(kLog2e), _mm512_set1_ps(0.5f));
  const __m512 fe = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fe, _mm512_set1_ps(kLn2Hi), v);
  r = _mm512_fmadd_ps(fe, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLo), _CMP_GE_OQ);
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(y, fe));
}

PAGODA_AVX512 float RowMax512(const float* s, int32_t n) {
  __m512 m = _mm512_set1_ps(-__builtin_inff());
  for (int32_t j = 0; j < n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(s + j));
  return _mm512_reduce_max_ps(m);
}

PAGODA_AVX512 float ExpSum512(float* s, int32_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int32_t j = 0; j < n; j += 16) {
    const __m512 e = Exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), vm));
    _mm512_storeu_ps(s + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

PAGODA_AVX512 void Scale512(float* o, int32_t d, float alpha) {
  const __m512 a = _mm512_set1_ps(alpha);
  for (int32_t x = 0; x < d; x += 16)
    _mm512_storeu_ps(o + x, _mm512_mul_ps(a, _mm512_loadu_ps(o + x)));
}

// ---------------------------------------------------------------------------------- AVX2 ----

// Lane i of the result = horizontal sum of a[i] (8 vectors -> 1).
PAGODA_AVX2 inline __m256 Reduce8(const __m256* a) {
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 g0 = _mm256_hadd_ps(h01, h23), g1 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20), _mm256_permute2f128_ps(g0, g1, 0x31));
}

// out[2 r + j] = <q[r], k[j]> for r < NR, j < 2.
template <int NR>
PAGODA_AVX2 inline __m256 Dots256(const float* const* q, const float* const* k, int32_t d) {
  __m256 acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
  for (int32_t x = 0; x < d; x += 8) {
    const __m256 k0 = _mm256_loadu_ps(k[0] + x), k1 = _mm256_loadu_ps(k[1] + x);
    for (int r = 0; r < NR; ++r) {
      const __m256 qv = _mm256_loadu_ps(q[r] + x);
      acc[2 * r + 0] = _mm256_fmadd_ps(qv, k0, acc[2 * r + 0]);
      acc[2 * r + 1] = _mm256_fmadd_ps(qv, k1, acc[2 * r + 1]);
    }
  }
  return Reduce8(acc);
}

template <int NR>
PAGODA_AVX2 void ScoreRows256(const RowBlock& rb, int32_t r0, const float* const* k, int32_t n,
                              float scale, float* s, int32_t ld, const Prefetch* pf) {
  const float* q[kRb];
  for (int r = 0; r < NR; ++r) q[r] = rb.q_row(r0 + r);
  const __m256 vscale = _mm256_set1_ps(scale);
  alignas(32) float out[8];
  for (int32_t j0 = 0; j0 < n; j0 += 2) {
    const float* kb[2] = {k[j0], k[std::min(j0 + 1, n - 1)]};
    if (pf != nullptr) pf->Issue(pf->k, j0, 2);
    _mm256_store_ps(out, _mm256_mul_ps(Dots256<NR>(q, kb, rb.d), vscale));
    const int nk = std::min(2, n - j0);
    for (int r = 0; r < NR; ++r) {
      for (int i = 0; i < nk; ++i) s[(r0 + r) * ld + j0 + i] = out[2 * r + i];
    }
  }
}

PAGODA_AVX2 void Scores256(const RowBlock& rb, const float* const* k, int32_t n, float scale,
                           float* s, int32_t ld, const Prefetch& pf) {
  for (int32_t r0 = 0; r0 < rb.rows; r0 += kRb) {
    const Prefetch* p = r0 == 0 ? &pf : nullptr;
    mm::internal::ForTile<kRb, 1>(std::min(kRb, rb.rows - r0), 1, [&]<int R, int>() {
      ScoreRows256<R>(rb, r0, k, n, scale, s, ld, p);
    });
  }
}

template <int NR, int NV>
PAGODA_AVX2 void AccChunk256(float* const* o, const float* const* p, const float* const* v,
                             int32_t n, int32_t x0, const Prefetch* pf) {
  __m256 acc[NR][NV];
  for (int r = 0; r < NR; ++r) {
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm256_loadu_ps(o[r] + x0 + 8 * c);
  }
  for (int32_t j = 0; j < n; ++j) {
    if (pf != nullptr) pf->Issue(pf->v, j, 1);
    __m256 vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = _mm256_loadu_ps(v[j] + x0 + 8 * c);
    for (int r = 0; r < NR; ++r) {
      const __m256 pr = _mm256_broadcast_ss(p[r] + j);
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm256_fmadd_ps(pr, vv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    for (int c = 0; c < NV; ++c) _mm256_storeu_ps(o[r] + x0 + 8 * c, acc[r][c]);
  }
}

template <int NR>
PAGODA_AVX2 void AccRows256(const RowBlock& rb, int32_t r0, const float* p, int32_t ld,
                            const float* const* v, int32_t n, const Prefetch* pf) {
  float* o[NR];
  const float* pr[NR];
  for (int r = 0; r < NR; ++r) {
    o[r] = rb.o_row(r0 + r);
    pr[r] = p + static_cast<int64_t>(r0 + r) * ld;
  }
  for (int32_t x0 = 0; x0 < rb.d; x0 += 16) {
    const Prefetch* chunk_pf = x0 == 0 ? pf : nullptr;
    if (rb.d - x0 >= 16) {
      AccChunk256<NR, 2>(o, pr, v, n, x0, chunk_pf);
    } else {
      AccChunk256<NR, 1>(o, pr, v, n, x0, chunk_pf);
    }
  }
}

PAGODA_AVX2 void Accumulate256(const RowBlock& rb, const float* p, int32_t ld,
                               const float* const* v, int32_t n, const Prefetch& pf) {
  for (int32_t r0 = 0; r0 < rb.rows; r0 += kRb) {
    const Prefetch* f = r0 == 0 ? &pf : nullptr;
    mm::internal::ForTile<kRb, 1>(std::min(kRb, rb.rows - r0), 1,
                                  [&]<int R, int>() { AccRows256<R>(rb, r0, p, ld, v, n, f); });
  }
}

PAGODA_AVX2 inline __m256 Exp256(__m256 x) {
  const __m256 v = _mm256_max_ps(x, _mm256_set1_ps(kExpLo));
  const __m256 t = _mm256_fmadd_ps(v, _mm256_set1_ps(kLog2e), _mm256_set1_ps(0.5f));
  const __m256 fe = _mm256_floor_ps(t);
  __m256 r = _mm256_fnmadd_ps(fe, _mm256_set1_ps(kLn2Hi), v);
  r = _mm256_fmadd_ps(fe, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fe), _mm256_set1_epi32(127)), 23);
  const __m256 res = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_GE_OQ);
  return _mm256_and_ps(res, keep);
}

PAGODA_AVX2 inline float HorizontalSum256(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

PAGODA_AVX2 float RowMax256(const float* s, int32_t n) {
  __m256 m = _mm256_set1_ps(-__builtin_inff());
  for (int32_t j = 0; j < n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + j));
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

PAGODA_AVX2 float ExpSum256(float* s, int32_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (int32_t j = 0; j < n; j += 8) {
    const __m256 e = Exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  return HorizontalSum256(sum);
}

PAGODA_AVX2 void Scale256(float* o, int32_t d, float alpha) {
  const __m256 a = _mm256_set1_ps(alpha);
  for (int32_t x = 0; x < d; x += 8)
    _mm256_storeu_ps(o + x, _mm256_mul_ps(a, _mm256_loadu_ps(o + x)));
}

constexpr TileKernels kAvx512 = {Scores512, Accumulate512, RowMax512, ExpSum512, Scale512};
constexpr TileKernels kAvx2 = {Scores256, Accumulate256, RowMax256, ExpSum256, Scale256};

}  // namespace

namespace internal {
const TileKernels* Avx512TileKernels() { return &kAvx512; }
const TileKernels* Avx2TileKernels() { return &kAvx2; }
}  // namespace internal

}  // namespace pagoda::cpu::attn

#pragma GCC diagnostic pop

#else  // not x86-64 GCC/Clang: portable kernels only

namespace pagoda::cpu::attn::internal {
const TileKernels* Avx512TileKernels() { return nullptr; }
const TileKernels* Avx2TileKernels() { return nullptr; }
}  // namespace pagoda::cpu::attn::internal

#endif
