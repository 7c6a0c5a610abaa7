// SIMD tile kernels of the attention engine (attention_core.h), with one implementation per
// instruction-set level (portable C++, AVX2+FMA, AVX-512) chosen at run time: the level of
// kernels/cpu/simd_level.h, capped by the caller (CpuBackendOptions::max_simd_level; tests force
// every level), with every level from kAvx512 on running the AVX-512 kernels.
//
// Layouts (all fp32):
//   query rows r in [0, rows): q + (r / g) * q_stride + (r % g) * d   (d floats, contiguous)
//   output rows r:             o + (r / g) * o_stride + (r % g) * d   (unnormalised accumulators)
//   key / value rows j in [0, n): k[j], v[j]                          (d floats each; the
//                                  *_f16 kernels: d IEEE fp16 values each, as the KV cache
//                                  stores them, converted exactly as they are loaded)
//   scores / probabilities:    s[r * ld + j]                          (ld >= n rounded up to 16)
// Prefetch lists name the rows of the NEXT tile (raw cache bytes, any dtype), so their cache
// lines arrive while the current tile is computed.
#pragma once

#include <cstdint>

#include "kernels/cpu/simd_level.h"

namespace pagoda::cpu::attn {

// The attention kernels' level for a cap: kPortable, kAvx2 or kAvx512 (any level from kAvx512
// on), at most EffectiveSimdLevel(cap) (simd_level.h), lowered further when head_dim is not a
// multiple of the level's vector width (AVX-512: 16, AVX2: 8).
SimdLevel EffectiveSimdLevel(SimdLevel cap, int32_t head_dim);

struct RowBlock {
  const float* q = nullptr;
  int64_t q_stride = 0;
  float* o = nullptr;
  int64_t o_stride = 0;
  int32_t g = 1;
  int32_t d = 0;
  int32_t rows = 0;

  const float* q_row(int32_t r) const {
    return q + (r / g) * q_stride + static_cast<int64_t>(r % g) * d;
  }
  float* o_row(int32_t r) const { return o + (r / g) * o_stride + static_cast<int64_t>(r % g) * d; }
};

struct Prefetch {
  const char* const* k = nullptr;  // [n] rows of the next tile's K, `bytes` each
  const char* const* v = nullptr;  // [n] rows of the next tile's V
  int32_t n = 0;
  int32_t bytes = 0;

  // Prefetches rows [j0, j0 + count) of `list` (k or v) into L2; rows past n are ignored.
  // (An L1 prefetch (T0) is limited by the L1 miss buffers and measured half as fast on the
  // 2-core AVX-512 target: the next tile's rows are scattered 8 KiB pieces of paged blocks.)
  void Issue(const char* const* list, int32_t j0, int32_t count) const {
    const int32_t end = j0 + count < n ? j0 + count : n;
    for (int32_t j = j0; j < end; ++j) {
      for (int32_t x = 0; x < bytes; x += 64) __builtin_prefetch(list[j] + x, 0, 2);
    }
  }
};

struct TileKernels {
  // s[r * ld + j] = scale * <q_r, k_j> for r < rows, j < n; prefetches pf.k.
  void (*scores)(const RowBlock& rb, const float* const* k, int32_t n, float scale, float* s,
                 int32_t ld, const Prefetch& pf);
  // o_r += sum_{j < n} p[r * ld + j] * v_j for every row r; prefetches pf.v.
  void (*accumulate)(const RowBlock& rb, const float* p, int32_t ld, const float* const* v,
                     int32_t n, const Prefetch& pf);
  // The same with fp16 K / V rows (kF16 caches read in place, no conversion pass): bit for bit
  // the f32 kernels' results on the rows converted (fp16 -> fp32 is exact, the order of the
  // sums is the same). nullptr at the portable level (the caller converts the rows).
  void (*scores_f16)(const RowBlock& rb, const uint16_t* const* k, int32_t n, float scale, float* s,
                     int32_t ld, const Prefetch& pf);
  void (*accumulate_f16)(const RowBlock& rb, const float* p, int32_t ld, const uint16_t* const* v,
                         int32_t n, const Prefetch& pf);
  // max_{j < n} s[j]; n a multiple of 16.
  float (*row_max)(const float* s, int32_t n);
  // s[j] = exp(s[j] - m) for j < n (exp(-inf) = 0); returns the sum. n a multiple of 16.
  float (*exp_sum)(float* s, int32_t n, float m);
  // o[x] *= alpha for x < d.
  void (*scale)(float* o, int32_t d, float alpha);
};

// The kernels of `level` (which must be supported by the CPU; from kAvx512 on: AVX-512).
const TileKernels& GetTileKernels(SimdLevel level);

namespace internal {
// Defined in attention_simd_x86.cc (target-attribute functions); nullptr off x86-64.
const TileKernels* Avx512TileKernels();
const TileKernels* Avx2TileKernels();
}  // namespace internal

}  // namespace pagoda::cpu::attn
