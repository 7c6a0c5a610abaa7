#include "kernels/cpu/attention/attention_simd.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/cpu/portable_math.h"

namespace pagoda::cpu::attn {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------------------------------
// Portable C++ (any CPU; GCC vectorizes with the baseline ISA).

void ScoresPortable(const RowBlock& rb, const float* const* k, int32_t n, float scale, float* s,
                    int32_t ld, const Prefetch& pf) {
  pf.Issue(pf.k, 0, pf.n);
  for (int32_t r = 0; r < rb.rows; ++r) {
    const float* q = rb.q_row(r);
    for (int32_t j = 0; j < n; ++j) s[r * ld + j] = DotPortable(q, k[j], rb.d) * scale;
  }
}

void AccumulatePortable(const RowBlock& rb, const float* p, int32_t ld, const float* const* v,
                        int32_t n, const Prefetch& pf) {
  pf.Issue(pf.v, 0, pf.n);
  const int32_t d = rb.d;
  for (int32_t r = 0; r < rb.rows; ++r) {
    float* __restrict o = rb.o_row(r);
    const float* pr = p + static_cast<int64_t>(r) * ld;
    int32_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const float* __restrict v0 = v[j];
      const float* __restrict v1 = v[j + 1];
      const float* __restrict v2 = v[j + 2];
      const float* __restrict v3 = v[j + 3];
      const float p0 = pr[j], p1 = pr[j + 1], p2 = pr[j + 2], p3 = pr[j + 3];
      for (int32_t x = 0; x < d; ++x) o[x] += (p0 * v0[x] + p1 * v1[x]) + (p2 * v2[x] + p3 * v3[x]);
    }
    for (; j < n; ++j) {
      for (int32_t x = 0; x < d; ++x) o[x] += pr[j] * v[j][x];
    }
  }
}

float RowMaxPortable(const float* s, int32_t n) {
  float m = kNegInf;
  for (int32_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  return m;
}

float ExpSumPortable(float* s, int32_t n, float m) {
  float sum = 0.0f;
  for (int32_t j = 0; j < n; ++j) {
    s[j] = ExpPortable(s[j] - m);
    sum += s[j];
  }
  return sum;
}

void ScalePortable(float* o, int32_t d, float alpha) {
  for (int32_t x = 0; x < d; ++x) o[x] *= alpha;
}

constexpr TileKernels kPortable = {ScoresPortable, AccumulatePortable, nullptr,      nullptr,
                                   RowMaxPortable, ExpSumPortable,     ScalePortable};

}  // namespace
}  // namespace pagoda::cpu::attn

namespace pagoda::cpu::attn {

SimdLevel EffectiveSimdLevel(SimdLevel cap, int32_t head_dim) {
  SimdLevel level = std::min(cpu::EffectiveSimdLevel(cap), SimdLevel::kAvx512);
  if (level == SimdLevel::kAvx512 && head_dim % 16 != 0) level = SimdLevel::kAvx2;
  if (level == SimdLevel::kAvx2 && head_dim % 8 != 0) level = SimdLevel::kPortable;
  return level;
}

const TileKernels& GetTileKernels(SimdLevel level) {
  const TileKernels* k = level >= SimdLevel::kAvx512 ? internal::Avx512TileKernels()
                         : level == SimdLevel::kAvx2 ? internal::Avx2TileKernels()
                                                     : nullptr;
  return k != nullptr ? *k : kPortable;
}

}  // namespace pagoda::cpu::attn
