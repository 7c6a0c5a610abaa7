// Helpers shared by the quantizers and dequantizers of model/quants*.cc (not for use elsewhere):
// fp16 loads / stores at any alignment, ggml's rounding, and the two scale-fitting searches of
// ggml's reference quantizers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/numerics.h"

namespace pagoda::quants::internal {

constexpr float kGroupMaxEps = 1e-15f;

// Round half to even, as ggml's nearest_int (the 1.5 * 2^23 trick) does.
inline int NearestInt(float f) { return static_cast<int>(std::nearbyint(f)); }

inline float LoadFp16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToFp32(h);
}

inline void StoreFp16(uint8_t* p, float f) {
  const uint16_t h = Fp32ToFp16(f);
  std::memcpy(p, &h, 2);
}

// Asymmetric fit (ggml's make_qkx2_quants): scale s >= 0 and offset `min` <= 0 minimising
// sum w_i (s * L_i + min - x_i)^2 (use_mad: |...|) over L_i in [0, nmax], trying nstep + 1
// inverse scales (rmin + rdelta * step + nmax) / (max - min). Returns s; stores -min in
// *neg_min, levels in L.
float FitScaleMin(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                  float rmin, float rdelta, int nstep, bool use_mad);

// The shared front half of ggml's quantize_row_q4_K_ref / q5_K_ref: fits each of the 8
// sub-blocks of 32 with levels 0..nmax (FitScaleMin with rmin, rdelta 0.1, nstep), stores the
// super-block d and dmin at y[0..4) and the 6-bit scales and mins packed at y[4..16), and writes
// into L the 256 levels re-derived against those rounded scales.
void FitScaleMinK(const float* x, int nmax, float rmin, int nstep, uint8_t* L, uint8_t* y);

// Symmetric x^2-weighted fit (ggml's make_qx_quants, rmse_type 1): levels in [-nmax, nmax - 1]
// stored biased by nmax in L. Returns the scale.
float FitSymmetric(int n, int nmax, const float* x, int8_t* L);

}  // namespace pagoda::quants::internal
