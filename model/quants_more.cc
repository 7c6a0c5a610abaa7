// Dequantizers and reference quantizers of the GGML block formats Q4_1, Q5_0, Q5_1, IQ4_NL
// (blocks of 32) and Q2_K, Q3_K, Q5_K, IQ4_XS (super-blocks of 256). The byte layouts are in
// model/quants.h.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/quants.h"
#include "model/quants_internal.h"

namespace pagoda::quants {
namespace {

using internal::LoadFp16;

// The 5th bits of a Q5_0 / Q5_1 block: bit e of the little-endian word is element e's.
uint32_t HighBits(const uint8_t* p) {
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  return qh;
}

}  // namespace

// ---- blocks of 32 -------------------------------------------------------------------------

void DequantizeRowQ4_1(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += kBlockBytesQ4_1, dst += 32) {
    const float d = LoadFp16(src), m = LoadFp16(src + 2);
    const uint8_t* qs = src + 4;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(qs[j] & 15) + m;
      dst[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
    }
  }
}

void DequantizeRowQ5_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += kBlockBytesQ5_0, dst += 32) {
    const float d = LoadFp16(src);
    const uint32_t qh = HighBits(src + 2);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 15) | ((qh >> j) & 1) << 4;
      const int hi = (qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
      dst[j] = d * static_cast<float>(lo - 16);
      dst[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

void DequantizeRowQ5_1(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += kBlockBytesQ5_1, dst += 32) {
    const float d = LoadFp16(src), m = LoadFp16(src + 2);
    const uint32_t qh = HighBits(src + 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 15) | ((qh >> j) & 1) << 4;
      const int hi = (qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
      dst[j] = d * static_cast<float>(lo) + m;
      dst[j + 16] = d * static_cast<float>(hi) + m;
    }
  }
}

void DequantizeRowIQ4_NL(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += kBlockBytesIQ4_NL, dst += 32) {
    const float d = LoadFp16(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(kIQ4Levels[qs[j] & 15]);
      dst[j + 16] = d * static_cast<float>(kIQ4Levels[qs[j] >> 4]);
    }
  }
}

// ---- super-blocks of 256 ------------------------------------------------------------------

int GetScaleQ3K(const uint8_t* packed, int s) {
  const int lo = s < 8 ? packed[s] & 15 : packed[s - 8] >> 4;
  const int hi = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (lo | hi << 4) - 32;
}

void DequantizeRowQ2_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kBlockBytesQ2_K) {
    const uint8_t* scales = src;
    const float d = LoadFp16(src + 80), dmin = LoadFp16(src + 82);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, jj = (e % 128) / 32, l = e % 32, s = e / 16;
      const int q = (src[16 + 32 * h + l] >> (2 * jj)) & 3;
      *dst++ = d * static_cast<float>(scales[s] & 15) * static_cast<float>(q) -
               dmin * static_cast<float>(scales[s] >> 4);
    }
  }
}

void DequantizeRowQ3_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kBlockBytesQ3_K) {
    const uint8_t* hmask = src;
    const uint8_t* qs = src + 32;
    const float d = LoadFp16(src + 108);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, jj = (e % 128) / 32, l = e % 32;
      const int low = (qs[32 * h + l] >> (2 * jj)) & 3;
      const int high = (hmask[l] >> (4 * h + jj)) & 1;
      *dst++ = d * static_cast<float>(GetScaleQ3K(src + 96, e / 16)) *
               static_cast<float>((low | high << 2) - 4);
    }
  }
}

void DequantizeRowQ5_K(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kBlockBytesQ5_K) {
    const float d = LoadFp16(src), dmin = LoadFp16(src + 2);
    const uint8_t* qh = src + 16;
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8_t* ql = src + 48 + 32 * chunk;
      for (int half = 0; half < 2; ++half) {
        uint8_t sc, m;
        GetScaleMinK4(2 * chunk + half, src + 4, &sc, &m);
        const float dl = d * sc, ml = dmin * m;
        for (int l = 0; l < 32; ++l) {
          const int q = (half ? ql[l] >> 4 : ql[l] & 15) | ((qh[l] >> (2 * chunk + half)) & 1) << 4;
          *dst++ = dl * static_cast<float>(q) - ml;
        }
      }
    }
  }
}

void DequantizeRowIQ4_XS(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kBlockBytesIQ4_XS) {
    const float d = LoadFp16(src);
    uint16_t scales_h;
    std::memcpy(&scales_h, src + 2, 2);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((src[4 + ib / 2] >> (4 * (ib % 2))) & 15) | ((scales_h >> (2 * ib)) & 3) << 4;
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = src + 8 + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        dst[j] = dl * static_cast<float>(kIQ4Levels[qs[j] & 15]);
        dst[j + 16] = dl * static_cast<float>(kIQ4Levels[qs[j] >> 4]);
      }
      dst += 32;
    }
  }
}

}  // namespace pagoda::quants

// ---- reference quantizers (ggml's quantize_row_*_ref: what llama-quantize writes without an
// ---- importance matrix) ---------------------------------------------------------------------

namespace pagoda::quants {
namespace {

using internal::FitScaleMin;
using internal::kGroupMaxEps;
using internal::NearestInt;
using internal::StoreFp16;

// Q4_1 / Q5_1: d = (max - min) / nmax, m = min; q = round-half-up((x - min) / d) (nmax caps Q4_1's
// codes; Q5_1's cannot exceed 31).
template <int kNmax>
void QuantizeBlockWithMin(const float* x, uint8_t* y) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < 32; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / kNmax;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  StoreFp16(y, d);
  StoreFp16(y + 2, lo);
  auto level = [&](float v) { return std::min(kNmax, static_cast<int>((v - lo) * id + 0.5f)); };
  uint8_t* qs = y + (kNmax == 15 ? 4 : 8);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int a = level(x[j]), b = level(x[j + 16]);
    qs[j] = static_cast<uint8_t>((a & 15) | (b & 15) << 4);
    qh |= static_cast<uint32_t>(a >> 4) << j | static_cast<uint32_t>(b >> 4) << (j + 16);
  }
  if (kNmax == 31) std::memcpy(y + 4, &qh, 4);
}

}  // namespace

void QuantizeRowQ4_1(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) QuantizeBlockWithMin<15>(src + 32 * b, dst + b * 20);
}

void QuantizeRowQ5_1(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) QuantizeBlockWithMin<31>(src + 32 * b, dst + b * 24);
}

// Q5_0: d = (signed absmax) / -16, q = min(31, trunc(x / d + 16.5)).
void QuantizeRowQ5_0(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += 32, dst += kBlockBytesQ5_0) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(src[j]) > amax) {
        amax = std::fabs(src[j]);
        max = src[j];
      }
    }
    const float d = max / -16;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    StoreFp16(dst, d);
    auto level = [&](float x) { return std::min(31, static_cast<int>(x * id + 16.5f)); };
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int a = level(src[j]), c = level(src[j + 16]);
      dst[6 + j] = static_cast<uint8_t>((a & 15) | (c & 15) << 4);
      qh |= static_cast<uint32_t>(a >> 4) << j | static_cast<uint32_t>(c >> 4) << (j + 16);
    }
    std::memcpy(dst + 2, &qh, 4);
  }
}

namespace {

// Packs 2-bit levels L[256] into Q2_K / Q3_K's qs[64] (element 128h + 32jj + l: field jj of
// byte 32h + l).
void PackTwoBit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* p = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>(p[0] | p[32] << 2 | p[64] << 4 | p[96] << 6);
    }
  }
}

void QuantizeBlockQ2_K(const float* x, uint8_t* y) {
  uint8_t L[kQK_K];
  float scales[16], mins[16], w[16];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * j + l]);
    scales[j] = FitScaleMin(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  uint8_t* sc = y;
  std::memset(sc, 0, 16);
  if (max_scale > 0) {
    const float iscale = 15 / max_scale;
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
  }
  StoreFp16(y + 80, max_scale > 0 ? max_scale / 15 : 0.0f);
  if (max_min > 0) {
    const float iscale = 15 / max_min;
    for (int j = 0; j < 16; ++j) sc[j] |= static_cast<uint8_t>(NearestInt(iscale * mins[j]) << 4);
  }
  StoreFp16(y + 82, max_min > 0 ? max_min / 15 : 0.0f);
  const float d = internal::LoadFp16(y + 80), dmin = internal::LoadFp16(y + 82);
  for (int j = 0; j < 16; ++j) {  // re-derive the levels against the rounded scales
    const float dj = d * (sc[j] & 15);
    if (dj == 0) continue;
    const float mj = dmin * (sc[j] >> 4);
    for (int l = 0; l < 16; ++l) {
      L[16 * j + l] = static_cast<uint8_t>(std::clamp(NearestInt((x[16 * j + l] + mj) / dj), 0, 3));
    }
  }
  PackTwoBit(L, y + 16);
}

// ggml's make_q3_quants with rmse: levels in [-nmax, nmax - 1] from -nmax / (signed absmax),
// then up to 5 passes moving single levels while the x^2-weighted fit improves. Levels are
// stored biased by nmax; returns the scale.
float FitQ3(int n, int nmax, const float* x, int8_t* L) {
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
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx <= 0) continue;
      float sl2 = suml2 - w * L[i] * L[i];
      const int l = std::clamp(NearestInt(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      slx += w * x[i] * l;
      sl2 += w * l * l;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

void QuantizeBlockQ3_K(const float* x, uint8_t* y) {
  int8_t L[kQK_K];
  float scales[16];
  float max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = FitQ3(16, 4, x + 16 * j, L + 16 * j);
    if (std::fabs(scales[j]) > amax) {
      amax = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  uint8_t* packed = y + 96;
  std::memset(packed, 0, 12);
  if (max_scale != 0) {
    const float iscale = -32 / max_scale;
    for (int j = 0; j < 16; ++j) {
      const int l =
          std::clamp<int>(static_cast<int8_t>(NearestInt(iscale * scales[j])), -32, 31) + 32;
      if (j < 8) {
        packed[j] = static_cast<uint8_t>(l & 15);
      } else {
        packed[j - 8] |= static_cast<uint8_t>((l & 15) << 4);
      }
      packed[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
    }
    StoreFp16(y + 108, 1 / iscale);
  } else {
    StoreFp16(y + 108, 0.0f);
  }
  const float d = internal::LoadFp16(y + 108);
  for (int j = 0; j < 16; ++j) {  // re-derive the levels against the rounded scales
    const float dj = d * static_cast<float>(GetScaleQ3K(packed, j));
    if (dj == 0) continue;
    for (int l = 0; l < 16; ++l) {
      L[16 * j + l] = static_cast<int8_t>(std::clamp(NearestInt(x[16 * j + l] / dj), -4, 3) + 4);
    }
  }
  uint8_t* hmask = y;
  std::memset(hmask, 0, 32);
  uint8_t low[kQK_K];
  for (int e = 0; e < kQK_K; ++e) {  // element e's high bit: hmask[e % 32] bit e / 32
    if (L[e] > 3) hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
    low[e] = static_cast<uint8_t>(L[e] > 3 ? L[e] - 4 : L[e]);
  }
  PackTwoBit(low, y + 32);
}

void QuantizeBlockQ5_K(const float* x, uint8_t* y) {
  uint8_t L[kQK_K];
  internal::FitScaleMinK(x, 31, -0.5f, 15, L, y);
  uint8_t* qh = y + 16;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c) {
    uint8_t* ql = y + 48 + 32 * c;
    for (int l = 0; l < 32; ++l) {
      const int a = L[64 * c + l], b = L[64 * c + 32 + l];
      qh[l] |= static_cast<uint8_t>((a >> 4) << (2 * c) | (b >> 4) << (2 * c + 1));
      ql[l] = static_cast<uint8_t>((a & 15) | (b & 15) << 4);
    }
  }
}

// IQ4_NL / IQ4_XS (ggml's quantize_row_iq4_nl_impl with ntry 7 and no importance matrix).
// The index of the level of kIQ4Levels nearest x; a tie goes to the upper level.
int NearestIQ4Level(float x) {
  if (x <= kIQ4Levels[0]) return 0;
  if (x >= kIQ4Levels[15]) return 15;
  int lo = 0, hi = 15;  // kIQ4Levels[lo] <= x < kIQ4Levels[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (x < kIQ4Levels[mid] ? hi : lo) = mid;
  }
  return x - kIQ4Levels[hi - 1] < kIQ4Levels[hi] - x ? hi - 1 : hi;
}

// The x^2-weighted least-squares scale of 32 values for the levels they round to at inverse
// scale `id`: sum w q x / sum w q^2, with its gain (sum w q x)^2 / sum w q^2 compared by the
// caller.
struct IQ4Fit {
  float sumqx = 0, sumq2 = 0;
};
IQ4Fit FitIQ4Levels(const float* x, float id) {
  IQ4Fit f;
  for (int j = 0; j < 32; ++j) {
    const float q = kIQ4Levels[NearestIQ4Level(id * x[j])];
    const float w = x[j] * x[j];
    f.sumqx += w * q * x[j];
    f.sumq2 += w * q * q;
  }
  return f;
}

// The scale of a block of 32: from the signed absmax (mapped to the level -127), refined by the
// least-squares fit, then the best of 15 inverse scales around it. 0 for an all-zero block.
float ScaleIQ4Block(const float* x) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0;
  IQ4Fit f = FitIQ4Levels(x, 1 / (-max / kIQ4Levels[0]));
  float d = f.sumqx / f.sumq2, best = d * f.sumqx;
  for (int step = -7; step <= 7; ++step) {
    f = FitIQ4Levels(x, static_cast<float>(step + kIQ4Levels[0]) / max);
    if (f.sumq2 > 0 && f.sumqx * f.sumqx > best * f.sumq2) {
      d = f.sumqx / f.sumq2;
      best = d * f.sumqx;
    }
  }
  return d;
}

// The 16 code bytes of a block of 32 at scale d (element j low nibble, j + 16 high).
void StoreIQ4Codes(const float* x, float d, uint8_t* qs) {
  const float id = d != 0 ? 1 / d : 0.f;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>(NearestIQ4Level(id * x[j]) | NearestIQ4Level(id * x[j + 16]) << 4);
  }
}

// IQ4_XS: each sub-block's scale, then the super-block's d = -(signed largest scale) / 32 and
// each scale rounded to a 6-bit multiple of it; the codes refit to those rounded scales.
void QuantizeBlockIQ4_XS(const float* x, uint8_t* y) {
  float scales[8], max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    scales[ib] = ScaleIQ4Block(x + 32 * ib);
    if (std::fabs(scales[ib]) > amax_scale) {
      amax_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  const float d = -max_scale / 32, id = d != 0 ? 1 / d : 0.f;
  StoreFp16(y, d);
  uint16_t scales_h = 0;
  std::memset(y + 4, 0, 4);
  for (int ib = 0; ib < 8; ++ib) {
    const int l = std::clamp(NearestInt(id * scales[ib]), -32, 31);
    StoreIQ4Codes(x + 32 * ib, d * static_cast<float>(l), y + 8 + 16 * ib);
    y[4 + ib / 2] |= static_cast<uint8_t>(((l + 32) & 15) << (4 * (ib % 2)));
    scales_h |= static_cast<uint16_t>(((l + 32) >> 4) << (2 * ib));
  }
  std::memcpy(y + 2, &scales_h, 2);
}

}  // namespace

void QuantizeRowQ2_K(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    QuantizeBlockQ2_K(src + b * kQK_K, dst + b * kBlockBytesQ2_K);
  }
}

void QuantizeRowQ3_K(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    QuantizeBlockQ3_K(src + b * kQK_K, dst + b * kBlockBytesQ3_K);
  }
}

void QuantizeRowQ5_K(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    QuantizeBlockQ5_K(src + b * kQK_K, dst + b * kBlockBytesQ5_K);
  }
}

void QuantizeRowIQ4_NL(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += 32, dst += kBlockBytesIQ4_NL) {
    const float d = ScaleIQ4Block(src);
    StoreFp16(dst, d);
    StoreIQ4Codes(src, d, dst + 2);
  }
}

void QuantizeRowIQ4_XS(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    QuantizeBlockIQ4_XS(src + b * kQK_K, dst + b * kBlockBytesIQ4_XS);
  }
}

}  // namespace pagoda::quants
