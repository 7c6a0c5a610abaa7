// AVX-512 and AVX2+FMA tile kernels (see attention_simd.h for the layouts), written once as
// templates over the vector width and instantiated per instruction set.
//
// Vec<L> (L = SimdLevel::kAvx512 or kAvx2) holds one ISA's vector type and operations: load,
// store, broadcast, fma, max, exp, the reductions, and the two ways in: Run(fn) executes a
// generic body (a lambda) and Call<Body> is a kernel entry point with Body's signature. Both
// carry the ISA's GCC target attribute and inline everything the body calls (flatten): the
// vector code of each instantiation lives in its own Run / Call function, compiled for that ISA
// only, and the rest of the build stays at the baseline ISA. The dispatcher in attention_simd.cc
// only hands these kernels out when the CPU supports them.
//
// Register blocking: scores take 4 query rows x kLanes / 4 keys (AVX-512: 4 x 4, AVX2: 4 x 2) per
// pass over d, so each K row is loaded once per block of 4 rows (for GQA g = 4 decode: once),
// and reduce the kLanes dot-product accumulators with one transpose-add tree. The V accumulation
// keeps 4 rows x kAccVecs vectors of output (AVX-512: 4 x 64 floats, AVX2: 4 x 16) in registers
// across all keys of the tile, so each V cache line is loaded once per block of 4 rows.
// K / V rows are fp32 or fp16 (the kF16 cache read in place: a vcvtph2ps per vector load).
#include "kernels/cpu/attention/attention_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)

// GCC 12's AVX-512 intrinsic headers self-initialise placeholder operands (`__Y = __Y`), which
// -Wuninitialized reports once they are inlined here (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The generic bodies below have vector locals but no target attribute, so GCC warns that their
// vector-returning calls would use another ABI out of line. They never are: every body runs
// inlined into Vec<L>::Run / Call (flatten, the ISA's target), and no vector crosses a real call.
#pragma GCC diagnostic ignored "-Wpsabi"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul/matmul_tiles.h"

#define PAGODA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define PAGODA_AVX2 __attribute__((target("avx2,fma,f16c")))

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

template <SimdLevel L>
struct Vec;

// ------------------------------------------------------------------------------- AVX-512 ----

template <>
struct Vec<SimdLevel::kAvx512> {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kAccVecs = 4;  // output vectors per row in the V accumulation

  template <typename Fn>
  PAGODA_AVX512 __attribute__((flatten)) static auto Run(const Fn& fn) {
    return fn();
  }
  template <auto Body, typename... Args>
  PAGODA_AVX512 __attribute__((flatten)) static auto Call(Args... args) {
    return Body(args...);
  }

  PAGODA_AVX512 static Reg Zero() { return _mm512_setzero_ps(); }
  PAGODA_AVX512 static Reg Set1(float v) { return _mm512_set1_ps(v); }
  PAGODA_AVX512 static Reg Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  PAGODA_AVX512 static Reg Load(const float* p) { return _mm512_loadu_ps(p); }
  // A K / V row's kLanes values from fp32 or fp16 storage (exact).
  PAGODA_AVX512 static Reg LoadRow(const float* p) { return _mm512_loadu_ps(p); }
  PAGODA_AVX512 static Reg LoadRow(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  PAGODA_AVX512 static void Store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  PAGODA_AVX512 static void StoreAligned(float* p, Reg v) { _mm512_store_ps(p, v); }
  PAGODA_AVX512 static Reg Add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  PAGODA_AVX512 static Reg Sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  PAGODA_AVX512 static Reg Mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  PAGODA_AVX512 static Reg Max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  PAGODA_AVX512 static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  PAGODA_AVX512 static float ReduceAdd(Reg v) { return _mm512_reduce_add_ps(v); }
  PAGODA_AVX512 static float ReduceMax(Reg v) { return _mm512_reduce_max_ps(v); }

  // Lane i of the result = horizontal sum of a[i] (16 vectors -> 1) by a transpose-add tree.
  PAGODA_AVX512 static Reg ReduceLanes(const Reg* a) {
    Reg b[8], c[4], e[2];
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

  PAGODA_AVX512 static Reg Exp(Reg x) {
    const Reg v = _mm512_max_ps(x, _mm512_set1_ps(kExpLo));
    const Reg t = _mm512_fmadd_ps(v, _mm512_set1_ps(kLog2e), _mm512_set1_ps(0.5f));
    const Reg fe = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    Reg r = _mm512_fnmadd_ps(fe, _mm512_set1_ps(kLn2Hi), v);
    r = _mm512_fmadd_ps(fe, _mm512_set1_ps(kLn2Lo), r);
    Reg p = _mm512_set1_ps(kP0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
    const Reg y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLo), _CMP_GE_OQ);
    return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(y, fe));
  }
};

// ---------------------------------------------------------------------------------- AVX2 ----

template <>
struct Vec<SimdLevel::kAvx2> {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kAccVecs = 2;  // 16 ymm registers: 4 x 2 accumulators, 2 V, 1 p

  template <typename Fn>
  PAGODA_AVX2 __attribute__((flatten)) static auto Run(const Fn& fn) {
    return fn();
  }
  template <auto Body, typename... Args>
  PAGODA_AVX2 __attribute__((flatten)) static auto Call(Args... args) {
    return Body(args...);
  }

  PAGODA_AVX2 static Reg Zero() { return _mm256_setzero_ps(); }
  PAGODA_AVX2 static Reg Set1(float v) { return _mm256_set1_ps(v); }
  PAGODA_AVX2 static Reg Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  PAGODA_AVX2 static Reg Load(const float* p) { return _mm256_loadu_ps(p); }
  PAGODA_AVX2 static Reg LoadRow(const float* p) { return _mm256_loadu_ps(p); }
  PAGODA_AVX2 static Reg LoadRow(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  PAGODA_AVX2 static void Store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  PAGODA_AVX2 static void StoreAligned(float* p, Reg v) { _mm256_store_ps(p, v); }
  PAGODA_AVX2 static Reg Add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  PAGODA_AVX2 static Reg Sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  PAGODA_AVX2 static Reg Mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  PAGODA_AVX2 static Reg Max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  PAGODA_AVX2 static Reg Fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }

  PAGODA_AVX2 static float ReduceAdd(Reg v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }

  PAGODA_AVX2 static float ReduceMax(Reg v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }

  // Lane i of the result = horizontal sum of a[i] (8 vectors -> 1).
  PAGODA_AVX2 static Reg ReduceLanes(const Reg* a) {
    const Reg h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
    const Reg h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
    const Reg g0 = _mm256_hadd_ps(h01, h23), g1 = _mm256_hadd_ps(h45, h67);
    return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20),
                         _mm256_permute2f128_ps(g0, g1, 0x31));
  }

  PAGODA_AVX2 static Reg Exp(Reg x) {
    const Reg v = _mm256_max_ps(x, _mm256_set1_ps(kExpLo));
    const Reg t = _mm256_fmadd_ps(v, _mm256_set1_ps(kLog2e), _mm256_set1_ps(0.5f));
    const Reg fe = _mm256_floor_ps(t);
    Reg r = _mm256_fnmadd_ps(fe, _mm256_set1_ps(kLn2Hi), v);
    r = _mm256_fmadd_ps(fe, _mm256_set1_ps(kLn2Lo), r);
    Reg p = _mm256_set1_ps(kP0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
    const Reg y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fe), _mm256_set1_epi32(127)), 23);
    const Reg res = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    const Reg keep = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_GE_OQ);
    return _mm256_and_ps(res, keep);
  }
};

// ------------------------------------------------------------------- generic tile bodies ----
// Run only inside Vec<L>::Run / Call (see the file comment). The small loops over rows, keys and
// vectors are unrolled (PAGODA_UNROLL) so their accumulator arrays stay in registers.

// Keys per score pass: kRb rows x kKeys keys fill the kLanes accumulators of one reduction.
template <SimdLevel L>
constexpr int kKeys = Vec<L>::kLanes / kRb;

// Accumulates <q[r], k[j]> for r < NR, j < kKeys in acc[kKeys r + j] (lanes to be summed; the
// rows >= NR stay 0). K rows of T: float or fp16 (uint16_t), loaded as fp32 (LoadRow).
template <SimdLevel L, int NR, typename T>
inline void Dots(const float* const* q, const T* const* k, int32_t d, typename Vec<L>::Reg* acc) {
  using V = Vec<L>;
  constexpr int kK = kKeys<L>;
  PAGODA_UNROLL for (int i = 0; i < V::kLanes; ++i) acc[i] = V::Zero();
  for (int32_t x = 0; x < d; x += V::kLanes) {
    typename V::Reg kv[kK];
    PAGODA_UNROLL for (int j = 0; j < kK; ++j) kv[j] = V::LoadRow(k[j] + x);
    PAGODA_UNROLL for (int r = 0; r < NR; ++r) {
      const typename V::Reg qv = V::Load(q[r] + x);
      PAGODA_UNROLL for (int j = 0; j < kK; ++j) {
        acc[kK * r + j] = V::Fma(qv, kv[j], acc[kK * r + j]);
      }
    }
  }
}

template <SimdLevel L, int NR, typename T>
void ScoreRows(const RowBlock& rb, int32_t r0, const T* const* k, int32_t n, float scale, float* s,
               int32_t ld, const Prefetch* pf) {
  using V = Vec<L>;
  constexpr int kK = kKeys<L>;
  const float* q[kRb];
  PAGODA_UNROLL for (int r = 0; r < NR; ++r) q[r] = rb.q_row(r0 + r);
  const typename V::Reg vscale = V::Set1(scale);
  alignas(64) float out[V::kLanes];
  for (int32_t j0 = 0; j0 < n; j0 += kK) {
    const T* kb[kK];
    PAGODA_UNROLL for (int i = 0; i < kK; ++i) kb[i] = k[std::min(j0 + i, n - 1)];
    if (pf != nullptr) pf->Issue(pf->k, j0, kK);
    typename V::Reg acc[V::kLanes];
    Dots<L, NR, T>(q, kb, rb.d, acc);
    V::StoreAligned(out, V::Mul(V::ReduceLanes(acc), vscale));
    const int nk = std::min(kK, n - j0);
    if (nk == kK) {  // whole passes: one kK-float move per row
      PAGODA_UNROLL for (int r = 0; r < NR; ++r) {
        std::memcpy(s + (r0 + r) * ld + j0, out + kK * r, sizeof(float) * kK);
      }
    } else {
      for (int r = 0; r < NR; ++r) {
        for (int i = 0; i < nk; ++i) s[(r0 + r) * ld + j0 + i] = out[kK * r + i];
      }
    }
  }
}

template <SimdLevel L, typename T>
void Scores(const RowBlock& rb, const T* const* k, int32_t n, float scale, float* s, int32_t ld,
            const Prefetch& pf) {
  for (int32_t r0 = 0; r0 < rb.rows; r0 += kRb) {
    const Prefetch* p = r0 == 0 ? &pf : nullptr;
    mm::internal::ForTile<kRb, 1>(std::min(kRb, rb.rows - r0), 1, [&]<int R, int>() {
      Vec<L>::Run([&] { ScoreRows<L, R, T>(rb, r0, k, n, scale, s, ld, p); });
    });
  }
}

// o[r][x0 .. x0 + kLanes NV) += sum_j p[r][j] v[j][x0 ..] for r < NR, all in registers.
template <SimdLevel L, int NR, int NV, typename T>
void AccChunk(float* const* o, const float* const* p, const T* const* v, int32_t n, int32_t x0,
              const Prefetch* pf) {
  using V = Vec<L>;
  typename V::Reg acc[NR][NV];
  PAGODA_UNROLL for (int r = 0; r < NR; ++r) {
    PAGODA_UNROLL for (int c = 0; c < NV; ++c) acc[r][c] = V::Load(o[r] + x0 + V::kLanes * c);
  }
  for (int32_t j = 0; j < n; ++j) {
    if (pf != nullptr) pf->Issue(pf->v, j, 1);
    typename V::Reg vv[NV];
    PAGODA_UNROLL for (int c = 0; c < NV; ++c) vv[c] = V::LoadRow(v[j] + x0 + V::kLanes * c);
    PAGODA_UNROLL for (int r = 0; r < NR; ++r) {
      const typename V::Reg pr = V::Broadcast(p[r] + j);
      PAGODA_UNROLL for (int c = 0; c < NV; ++c) acc[r][c] = V::Fma(pr, vv[c], acc[r][c]);
    }
  }
  PAGODA_UNROLL for (int r = 0; r < NR; ++r) {
    PAGODA_UNROLL for (int c = 0; c < NV; ++c) V::Store(o[r] + x0 + V::kLanes * c, acc[r][c]);
  }
}

template <SimdLevel L, int NR, typename T>
void AccRows(const RowBlock& rb, int32_t r0, const float* p, int32_t ld, const T* const* v,
             int32_t n, const Prefetch* pf) {
  using V = Vec<L>;
  float* o[NR];
  const float* pr[NR];
  for (int r = 0; r < NR; ++r) {
    o[r] = rb.o_row(r0 + r);
    pr[r] = p + static_cast<int64_t>(r0 + r) * ld;
  }
  for (int32_t x0 = 0; x0 < rb.d; x0 += V::kLanes * V::kAccVecs) {
    const Prefetch* chunk_pf = x0 == 0 ? pf : nullptr;
    const int vecs = std::min(V::kAccVecs, (rb.d - x0) / V::kLanes);
    mm::internal::ForTile<V::kAccVecs, 1>(
        vecs, 1, [&]<int NV, int>() { AccChunk<L, NR, NV, T>(o, pr, v, n, x0, chunk_pf); });
  }
}

template <SimdLevel L, typename T>
void Accumulate(const RowBlock& rb, const float* p, int32_t ld, const T* const* v, int32_t n,
                const Prefetch& pf) {
  for (int32_t r0 = 0; r0 < rb.rows; r0 += kRb) {
    const Prefetch* f = r0 == 0 ? &pf : nullptr;
    mm::internal::ForTile<kRb, 1>(std::min(kRb, rb.rows - r0), 1, [&]<int R, int>() {
      Vec<L>::Run([&] { AccRows<L, R, T>(rb, r0, p, ld, v, n, f); });
    });
  }
}

template <SimdLevel L>
float RowMax(const float* s, int32_t n) {
  using V = Vec<L>;
  typename V::Reg m = V::Set1(-__builtin_inff());
  for (int32_t j = 0; j < n; j += V::kLanes) m = V::Max(m, V::Load(s + j));
  return V::ReduceMax(m);
}

template <SimdLevel L>
float ExpSum(float* s, int32_t n, float m) {
  using V = Vec<L>;
  const typename V::Reg vm = V::Set1(m);
  typename V::Reg sum = V::Zero();
  for (int32_t j = 0; j < n; j += V::kLanes) {
    const typename V::Reg e = V::Exp(V::Sub(V::Load(s + j), vm));
    V::Store(s + j, e);
    sum = V::Add(sum, e);
  }
  return V::ReduceAdd(sum);
}

template <SimdLevel L>
void Scale(float* o, int32_t d, float alpha) {
  using V = Vec<L>;
  const typename V::Reg a = V::Set1(alpha);
  for (int32_t x = 0; x < d; x += V::kLanes) V::Store(o + x, V::Mul(a, V::Load(o + x)));
}

// Scores and Accumulate hold no vectors themselves: they walk the row blocks and Run the tile
// bodies. The other kernels are vector code throughout, entered through Call.
template <SimdLevel L>
constexpr TileKernels kKernels = {Scores<L, float>,
                                  Accumulate<L, float>,
                                  Scores<L, uint16_t>,
                                  Accumulate<L, uint16_t>,
                                  Vec<L>::template Call<RowMax<L>>,
                                  Vec<L>::template Call<ExpSum<L>>,
                                  Vec<L>::template Call<Scale<L>>};

}  // namespace

namespace internal {
const TileKernels* Avx512TileKernels() { return &kKernels<SimdLevel::kAvx512>; }
const TileKernels* Avx2TileKernels() { return &kKernels<SimdLevel::kAvx2>; }
}  // namespace internal

}  // namespace pagoda::cpu::attn

#pragma GCC diagnostic pop

#else  // not x86-64 GCC/Clang: portable kernels only

namespace pagoda::cpu::attn::internal {
const TileKernels* Avx512TileKernels() { return nullptr; }
const TileKernels* Avx2TileKernels() { return nullptr; }
}  // namespace pagoda::cpu::attn::internal

#endif
