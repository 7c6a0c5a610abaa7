// Element conversions between fp32 and the narrow float formats Pagoda stores (weights,
// activations, KV cache elements): IEEE fp16, bf16 and OCP fp8 e4m3fn.
//
// Every conversion is inline, constexpr scalar code without branches: both sides of a special
// case are computed and one is picked with a bit mask (a ?: on a trapping fp32 operation becomes
// a branch that stops GCC's vectorizer), so GCC vectorizes a row loop that converts element by
// element.
//
//   fp16  Fp16ToFp32 is exact for every code (subnormals, inf, NaN payloads). Fp32ToFp16 rounds
//         to nearest even, overflows to inf from 65520 on and turns every NaN into the quiet
//         NaN 0x7e00 (sign kept).
//   bf16  Bf16ToFp32 is exact. Fp32ToBf16 rounds to nearest even; a NaN stays a quiet NaN with
//         its sign and upper payload bits.
//   fp8   OCP float8_e4m3fn: 1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no
//         infinities, 0x7F/0xFF are NaN, largest finite value 448 (kFp8E4m3Max).
//         Fp8E4m3ToFp32 is exact. Fp32ToFp8E4m3 rounds to nearest even and saturates: |x| >= 448
//         and +-inf become +-448, NaN stays NaN.
//
// FP8 scale convention (docs/seed-kernels.md 2.7.0): the per-layer k_scale / v_scale is a MULTIPLIER
// on the way into fp8, so stored = fp8(clamp(x * scale)) and x ~= decode(stored) / scale
// (QuantizeFp8E4m3 / DequantizeFp8E4m3).
//
// The subnormal encodings round with an fp32 addition: they assume the default rounding mode
// (to nearest even) and no flush-to-zero, like the rest of Pagoda.
#pragma once

#include <bit>
#include <cstdint>

namespace pagoda {

namespace numerics_internal {
// c ? a : b through a bit mask: no branch, even when a or b came from a trapping fp32 operation.
constexpr uint32_t Choose(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (a & mask) | (b & ~mask);
}
}  // namespace numerics_internal

// ------------------------------------------------------------------------------------ fp16 ----

constexpr float Fp16ToFp32(uint16_t h) {
  using numerics_internal::Choose;
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;  // the fp16 exponent field, moved to fp32's
  const uint32_t magnitude = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = magnitude & kShiftedExp;
  const uint32_t normal = magnitude + ((127u - 15u) << 23);  // rebias the exponent
  const uint32_t inf_nan = normal + ((128u - 16u) << 23);    // exponent field all ones
  // Exponent 0: mantissa * 2^-24, exactly.
  const float subnormal =
      std::bit_cast<float>(normal + (1u << 23)) - std::bit_cast<float>(113u << 23);
  uint32_t r = Choose(exp == 0, std::bit_cast<uint32_t>(subnormal), normal);
  r = Choose(exp == kShiftedExp, inf_nan, r);
  return std::bit_cast<float>(r | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

constexpr uint16_t Fp32ToFp16(float f) {
  using numerics_internal::Choose;
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t abs = bits & 0x7fffffffu;
  // Below 2^-14 (an fp16 subnormal or zero): adding 0.5 leaves the value in units of 2^-24 (one
  // subnormal step) in the low mantissa bits, rounded to nearest even; 0x400 is the smallest
  // normal.
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(abs) + 0.5f) - 0x3f000000u;
  // Normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits, to nearest even; a carry
  // moves into the exponent (up to inf, 0x7c00, from 65520 on).
  const uint32_t normal = (abs - ((127u - 15u) << 23) + 0xfffu + ((abs >> 13) & 1u)) >> 13;
  uint32_t h = Choose(abs < (113u << 23), subnormal, normal);
  h = Choose(abs >= (143u << 23), 0x7c00u, h);  // 2^16 and more, inf
  h = Choose(abs > 0x7f800000u, 0x7e00u, h);    // NaN
  return static_cast<uint16_t>(h | ((bits >> 16) & 0x8000u));
}

// ------------------------------------------------------------------------------------ bf16 ----

constexpr float Bf16ToFp32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

constexpr uint16_t Fp32ToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t nan = (bits >> 16) | 0x40u;  // quiet, sign and upper payload kept
  return static_cast<uint16_t>(
      numerics_internal::Choose((bits & 0x7fffffffu) > 0x7f800000u, nan, rounded));
}

// ------------------------------------------------------------------------------ fp8 e4m3fn ----

inline constexpr float kFp8E4m3Max = 448.0f;

constexpr float Fp8E4m3ToFp32(uint8_t bits) {
  using numerics_internal::Choose;
  const uint32_t magnitude = bits & 0x7fu;
  const uint32_t normal = (magnitude << 20) + ((127u - 7u) << 23);          // rebias the exponent
  const float subnormal = static_cast<float>(magnitude) * (1.0f / 512.0f);  // exponent 0
  uint32_t r = Choose(magnitude < 8, std::bit_cast<uint32_t>(subnormal), normal);
  r = Choose(magnitude == 0x7f, 0x7fc00000u, r);  // NaN
  return std::bit_cast<float>(r | (static_cast<uint32_t>(bits & 0x80u) << 24));
}

constexpr uint8_t Fp32ToFp8E4m3(float value) {
  using numerics_internal::Choose;
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t abs = bits & 0x7fffffffu;
  // Below 2^-6 (subnormal): adding 2^14 leaves the value in units of 2^-9 in the low mantissa
  // bits, rounded to nearest even; 8 is the smallest normal (exponent 1, mantissa 0).
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(abs) + 16384.0f) - 0x46800000u;
  // Normal: keep 3 of 23 mantissa bits with round-to-nearest-even (a carry bumps the exponent),
  // then rebias the exponent from 127 to 7.
  const uint32_t normal = ((abs + 0x7ffffu + ((abs >> 20) & 1u)) >> 20) - ((127u - 7u) << 3);
  uint32_t r = Choose(abs < 0x3c800000u, subnormal, normal);
  r = Choose(abs >= 0x43e00000u, 0x7eu, r);  // 448 and more, inf: saturate
  r = Choose(abs > 0x7f800000u, 0x7fu, r);   // NaN
  return static_cast<uint8_t>(r | ((bits >> 24) & 0x80u));
}

// dst[i] = Fp32ToFp8E4m3(src[i] * scale), i < n.
inline void QuantizeFp8E4m3(const float* src, uint8_t* dst, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp32ToFp8E4m3(src[i] * scale);
}

// dst[i] = Fp8E4m3ToFp32(src[i]) * (1 / scale), i < n.
inline void DequantizeFp8E4m3(const uint8_t* src, float* dst, int64_t n, float scale) {
  const float inverse = 1.0f / scale;
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp8E4m3ToFp32(src[i]) * inverse;
}

}  // namespace pagoda
