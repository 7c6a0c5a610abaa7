#include "model/quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/numerics.h"
#include "model/quants_internal.h"

namespace pagoda::quants {
namespace internal {

// Asymmetric fit for the K-quant sub-blocks with mins (ggml's make_qkx2_quants): finds scale
// s >= 0 and offset `min` <= 0 minimising sum w_i (s * L_i + min - x_i)^2 (use_mad: |...|) over
// L_i in [0, nmax], by trying nstep + 1 inverse scales around nmax / (max - min) and solving
// least squares for each. Returns s; stores -min (>= 0) in *neg_min and the levels in L.
float FitScaleMin(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                  float rmin, float rdelta, int nstep, bool use_mad) {
  auto error = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  float lo = x[0], hi = x[0], sum_w = 0, sum_x = 0;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *neg_min = -lo;
    return 0.0f;
  }
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float best_err = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(NearestInt(iscale * (x[i] - lo)), 0, nmax));
    best_err += w[i] * error(scale * L[i] + lo - x[i]);
  }
  uint8_t trial[kQK_K];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * step + nmax) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(NearestInt(iscale * (x[i] - lo)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / det;
    float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m > 0) {
      m = 0;
      s = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      err += w[i] * error(s * trial[i] + m - x[i]);
    }
    if (err < best_err) {
      std::copy(trial, trial + n, L);
      best_err = err;
      scale = s;
      lo = m;
    }
  }
  *neg_min = -lo;
  return scale;
}

namespace {

// Sums of the x^2-weighted least-squares fit of x by s * l, l = clamp(round(iscale * x)).
struct SymFit {
  float sumlx = 0, suml2 = 0;
};
SymFit SymSums(int n, int nmax, const float* x, float iscale) {
  SymFit f;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    f.sumlx += w * x[i] * l;
    f.suml2 += w * l * l;
  }
  return f;
}

}  // namespace

// Symmetric fit for Q6_K sub-blocks (ggml's make_qx_quants, rmse_type 1): levels in
// [-nmax, nmax - 1] stored biased by nmax in L; tries 19 inverse scales around -nmax / max
// (max = the signed value of largest magnitude) and keeps the best x^2-weighted fit.
float FitSymmetric(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  auto set_levels = [&](float iscale) {
    for (int i = 0; i < n; ++i) {
      L[i] = static_cast<int8_t>(nmax + std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
    }
  };
  float iscale = -nmax / max;
  set_levels(iscale);
  SymFit f = SymSums(n, nmax, x, iscale);
  float scale = f.suml2 != 0 ? f.sumlx / f.suml2 : 0.0f;
  float best = scale * f.sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(nmax + 0.1f * step) / max;
    f = SymSums(n, nmax, x, iscale);
    if (f.suml2 > 0 && f.sumlx * f.sumlx > best * f.suml2) {
      set_levels(iscale);
      scale = f.sumlx / f.suml2;
      best = scale * f.sumlx;
    }
  }
  return scale;
}

void FitScaleMinK(const float* x, int nmax, float rmin, int nstep, uint8_t* L, uint8_t* y) {
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xj[l] * xj[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xj[l]);
    scales[j] = FitScaleMin(32, nmax, xj, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63 / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63 / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::clamp(NearestInt(inv_scale * scales[j]), 0, 63));
    lm[j] = static_cast<uint8_t>(std::clamp(NearestInt(inv_min * mins[j]), 0, 63));
  }
  PackScaleMinK4(ls, lm, y + 4);
  StoreFp16(y, max_scale / 63);
  StoreFp16(y + 2, max_min / 63);
  const float d = LoadFp16(y), dmin = LoadFp16(y + 2);
  for (int j = 0; j < 8; ++j) {  // re-derive the levels against the rounded scales
    const float dj = d * ls[j];
    if (dj == 0) continue;
    const float mj = dmin * lm[j];
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] =
          static_cast<uint8_t>(std::clamp(NearestInt((x[32 * j + l] + mj) / dj), 0, nmax));
    }
  }
}

}  // namespace internal

using internal::FitScaleMin;
using internal::FitSymmetric;
using internal::kGroupMaxEps;
using internal::LoadFp16;
using internal::NearestInt;
using internal::StoreFp16;

void GetScaleMinK4(int j, const uint8_t* packed, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((packed[j + 4] & 15) | ((packed[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

// ---- Q4_0 -------------------------------------------------------------------------------

void DequantizeRowQ4_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; ++b, src += kBlockBytesQ4_0, dst += kQK4_0) {
    const float d = LoadFp16(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>((qs[j] & 15) - 8);
      dst[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
  }
}

void QuantizeRowQ4_0(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; ++b, src += kQK4_0, dst += kBlockBytesQ4_0) {
    float amax = 0, max = 0;
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    StoreFp16(dst, d);
    // Truncation of x / d + 8.5 (in [0.5, 16.5]) is round-to-nearest of x / d + 8.
    auto level = [&](float x) { return std::min(15, static_cast<int>(x * id + 8.5f)); };
    for (int j = 0; j < 16; ++j) {
      dst[2 + j] = static_cast<uint8_t>(level(src[j]) | level(src[j + 16]) << 4);
    }
  }
}

// ---- Q4_K -------------------------------------------------------------------------------

void DequantizeRowQ4_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kBlockBytesQ4_K) {
    const float d = LoadFp16(src);
    const float dmin = LoadFp16(src + 2);
    const uint8_t* packed = src + 4;
    const uint8_t* q = src + 16;
    for (int chunk = 0; chunk < 4; ++chunk, q += 32) {
      uint8_t sc, m;
      GetScaleMinK4(2 * chunk, packed, &sc, &m);
      const float d_lo = d * sc, m_lo = dmin * m;
      GetScaleMinK4(2 * chunk + 1, packed, &sc, &m);
      const float d_hi = d * sc, m_hi = dmin * m;
      for (int l = 0; l < 32; ++l) *dst++ = d_lo * static_cast<float>(q[l] & 15) - m_lo;
      for (int l = 0; l < 32; ++l) *dst++ = d_hi * static_cast<float>(q[l] >> 4) - m_hi;
    }
  }
}

void PackScaleMinK4(const uint8_t* ls, const uint8_t* lm, uint8_t* packed) {
  std::memset(packed, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      packed[j] |= ls[j];
      packed[j + 4] |= lm[j];
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls[j] & 15) | (lm[j] & 15) << 4);
      packed[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

namespace {

void QuantizeBlockQ4_K(const float* x, uint8_t* y) {
  uint8_t L[kQK_K];
  internal::FitScaleMinK(x, 15, -1.0f, 20, L, y);
  uint8_t* q = y + 16;
  for (int c = 0; c < 4; ++c, q += 32) {
    for (int l = 0; l < 32; ++l)
      q[l] = static_cast<uint8_t>(L[64 * c + l] | L[64 * c + 32 + l] << 4);
  }
}

}  // namespace

void QuantizeRowQ4_K(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    QuantizeBlockQ4_K(src + b * kQK_K, dst + b * kBlockBytesQ4_K);
  }
}

// ---- Q6_K -------------------------------------------------------------------------------

void DequantizeRowQ6_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kBlockBytesQ6_K) {
    const float d = LoadFp16(src + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(src + 192);
    for (int h = 0; h < 2; ++h, dst += 128) {
      const uint8_t* ql = src + 64 * h;
      const uint8_t* qh = src + 128 + 32 * h;
      const int8_t* s = sc + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
        const int q2 = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
        const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
        const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
        dst[l] = d * s[is] * static_cast<float>(q1);
        dst[l + 32] = d * s[is + 2] * static_cast<float>(q2);
        dst[l + 64] = d * s[is + 4] * static_cast<float>(q3);
        dst[l + 96] = d * s[is + 6] * static_cast<float>(q4);
      }
    }
  }
}

namespace {

void PackQ6_K(const int8_t* L, uint8_t* y) {
  for (int h = 0; h < 2; ++h) {
    uint8_t* ql = y + 64 * h;
    uint8_t* qh = y + 128 + 32 * h;
    const int8_t* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int a = Lh[l], b = Lh[l + 32], c = Lh[l + 64], e = Lh[l + 96];
      ql[l] = static_cast<uint8_t>((a & 15) | (c & 15) << 4);
      ql[l + 32] = static_cast<uint8_t>((b & 15) | (e & 15) << 4);
      qh[l] = static_cast<uint8_t>((a >> 4) | (b >> 4) << 2 | (c >> 4) << 4 | (e >> 4) << 6);
    }
  }
}

void QuantizeBlockQ6_K(const float* x, uint8_t* y) {
  int8_t L[kQK_K];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = FitSymmetric(16, 32, x + 16 * ib, L + 16 * ib);
    if (std::fabs(scales[ib]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  std::memset(y, 0, kBlockBytesQ6_K);
  if (max_abs_scale < kGroupMaxEps) return;  // all zero: d = 0, every level 0
  const float iscale = -128.0f / max_scale;
  StoreFp16(y + 208, 1 / iscale);
  const float d = LoadFp16(y + 208);
  auto* sc = reinterpret_cast<int8_t*>(y + 192);
  for (int ib = 0; ib < 16; ++ib) {
    sc[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
  }
  for (int j = 0; j < 16; ++j) {  // re-derive the levels against the rounded scales
    const float dj = d * sc[j];
    if (dj == 0) continue;
    for (int l = 0; l < 16; ++l) {
      L[16 * j + l] = static_cast<int8_t>(std::clamp(NearestInt(x[16 * j + l] / dj), -32, 31) + 32);
    }
  }
  PackQ6_K(L, y);
}

}  // namespace

void QuantizeRowQ6_K(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    QuantizeBlockQ6_K(src + b * kQK_K, dst + b * kBlockBytesQ6_K);
  }
}

}  // namespace pagoda::quants
