// Portable fp32 building blocks GCC auto-vectorizes, shared by the attention and matmul
// kernels' portable paths and the elementwise ops: DotPortable (8 independent accumulators,
// fixed reduction order), ExpPortable (branch-free exp) and PAGODA_SIMD_CLONES.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

// On a function whose loop GCC auto-vectorizes: AVX-512 and AVX2 clones beside the default,
// chosen at load time by the ifunc resolver. The file must be compiled with -fno-trapping-math
// (GCC if-converts ExpPortable's selects only then).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PAGODA_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PAGODA_SIMD_CLONES
#endif

namespace pagoda::cpu {

inline float DotPortable(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += a[i] * b[i];
  return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// Cephes-style expf: n = round(x / ln2), r = x - n ln2 (two-part ln2), e^r by a degree-7
// polynomial; about 1 ulp. Inputs below -87 (and -inf) give 0.
inline float ExpPortable(float in) {
  const float v = std::max(in, -87.0f);
  const float t = v * 1.44269504088896341f + 0.5f;
  const float fe = std::floor(t);  // t > -125: exact, and fits int32
  const int32_t e = static_cast<int32_t>(fe);
  const float r = (v - fe * 0.693359375f) + fe * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = (p * r * r + r) + 1.0f;
  const float res = y * std::bit_cast<float>(static_cast<uint32_t>(e + 127) << 23);
  return in < -87.0f ? 0.0f : res;
}

}  // namespace pagoda::cpu
