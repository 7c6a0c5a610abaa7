// Element conversions between fp32 and the KV cache storage types (see paged_kv.h), written as
// branch-free scalar code so GCC vectorizes the row loops. Internal to kernels/cpu.
//
// fp8 is OCP float8_e4m3fn, bit-identical to kvcache/fp8_e4m3.h (tested). bf16/f16 encoding
// round to nearest even like model/tensor_types.h.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "kernels/cpu/attention/paged_kv.h"

namespace pagoda::cpu::kv {

inline float Bf16ToF32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t F32ToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// IEEE half -> float, exact for all inputs (normals, subnormals, inf, NaN).
inline float F16ToF32(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  const uint32_t inf_nan = o + ((128u - 16u) << 23);
  const float sub = std::bit_cast<float>(o + (1u << 23)) - std::bit_cast<float>(113u << 23);
  uint32_t r = exp == shifted_exp ? inf_nan : (exp == 0 ? std::bit_cast<uint32_t>(sub) : o);
  return std::bit_cast<float>(r | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

uint16_t F32ToF16(float f);  // round to nearest even (defined in paged_kv.cc)

// dst[i] = F16ToF32(src[i]) for n elements; F16C (vcvtph2ps, also exact) when the CPU has it.
void F16RowToF32(const uint16_t* src, float* dst, int64_t n);

constexpr float Fp8ToF32Scalar(uint8_t bits) {
  const uint32_t exponent = (bits >> 3) & 0xfu;
  const uint32_t mantissa = bits & 0x7u;
  float r = 0.0f;
  if (exponent == 0xf && mantissa == 0x7) {
    r = std::bit_cast<float>(0x7fc00000u);
  } else if (exponent == 0) {
    r = static_cast<float>(mantissa) * (1.0f / 512.0f);
  } else {
    r = std::bit_cast<float>(((exponent + 120u) << 23) | (mantissa << 20));
  }
  return (bits & 0x80u) != 0 ? -r : r;
}

constexpr std::array<float, 256> MakeFp8Table() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = Fp8ToF32Scalar(static_cast<uint8_t>(i));
  return t;
}
inline constexpr std::array<float, 256> kFp8ToF32 = MakeFp8Table();

uint8_t F32ToFp8(float value);  // saturating, round to nearest even (defined in paged_kv.cc)

// dst[i] = logical value of src element i (fp8: decode / scale). `inv_scale` is 1/scale (1 for
// the non-fp8 types). n elements.
inline void DecodeRow(PagedKvDtype dtype, const void* src, float inv_scale, float* dst, int64_t n) {
  switch (dtype) {
    case PagedKvDtype::kF32: {
      const float* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      break;
    }
    case PagedKvDtype::kBf16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(s[i]);
      break;
    }
    case PagedKvDtype::kF16:
      F16RowToF32(static_cast<const uint16_t*>(src), dst, n);
      break;
    case PagedKvDtype::kFp8E4m3: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = kFp8ToF32[s[i]] * inv_scale;
      break;
    }
  }
}

// Stores src (logical values) as `dtype` into dst (fp8: encode(x * scale)). n elements.
void EncodeRow(PagedKvDtype dtype, const float* src, float scale, void* dst, int64_t n);

// x[i] = logical value of x[i] after a round trip through the storage type.
void RoundTripRow(PagedKvDtype dtype, float scale, float* x, int64_t n);

}  // namespace pagoda::cpu::kv
