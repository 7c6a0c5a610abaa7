// FP8 E4M3 element conversion for the KV pool (OCP float8_e4m3fn: 1 sign, 4 exponent bits with
// bias 7, 3 mantissa bits, no infinities, 0x7F/0xFF are NaN, largest finite value 448).
//
// Encoding rounds to nearest even and saturates: |x| >= 448 and +-inf become +-448, NaN stays
// NaN. Scale convention (seed-kernels.md 2.7.0): the per-layer k_scale / v_scale is a
// MULTIPLIER on the way into fp8, so stored = fp8(clamp(x * scale)) and x ~= decode(stored) /
// scale.
//
// f16/bf16 element conversion is deliberately not provided here: the kvcache library only
// owns storage. Kernels convert f16/bf16 elements with their own (SIMD) code or
// model/tensor_types.h; kvcache must not depend on model/.
#pragma once

#include <cstdint>

namespace pagoda {

inline constexpr float kFp8E4m3Max = 448.0f;

uint8_t Fp32ToFp8E4m3(float value);
float Fp8E4m3ToFp32(uint8_t bits);

// dst[i] = Fp32ToFp8E4m3(src[i] * scale).
void QuantizeFp8E4m3(const float* src, uint8_t* dst, int64_t n, float scale);
// dst[i] = Fp8E4m3ToFp32(src[i]) / scale.
void DequantizeFp8E4m3(const uint8_t* src, float* dst, int64_t n, float scale);

}  // namespace pagoda
