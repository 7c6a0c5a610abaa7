#include "kvcache/fp8_e4m3.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace pagoda {
namespace {

constexpr uint32_t kFp32AbsMask = 0x7fffffffu;
constexpr uint32_t kFp32Inf = 0x7f800000u;
constexpr uint32_t kFp32Of448 = 0x43e00000u;          // 448.0f
constexpr uint32_t kFp32MinNormalE4m3 = 0x3c800000u;  // 2^-6
constexpr uint8_t kE4m3MaxFinite = 0x7e;
constexpr uint8_t kE4m3Nan = 0x7f;

}  // namespace

uint8_t Fp32ToFp8E4m3(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs = bits & kFp32AbsMask;
  if (abs > kFp32Inf) return sign | kE4m3Nan;
  if (abs >= kFp32Of448) return sign | kE4m3MaxFinite;  // saturate, including inf
  if (abs < kFp32MinNormalE4m3) {
    // Subnormal range: units of 2^-9. nearbyint rounds to nearest even in the default mode;
    // a result of 8 is exactly the smallest normal (exponent 1, mantissa 0).
    float magnitude;
    std::memcpy(&magnitude, &abs, sizeof(magnitude));
    return sign | static_cast<uint8_t>(std::nearbyint(magnitude * 512.0f));
  }
  // Normal: keep 3 of 23 mantissa bits with round-to-nearest-even (a carry bumps the exponent),
  // then rebias the exponent from 127 to 7.
  const uint32_t rounded = (abs + 0x7ffffu + ((abs >> 20) & 1u)) >> 20;
  return sign | static_cast<uint8_t>(rounded - ((127u - 7u) << 3));
}

float Fp8E4m3ToFp32(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  const uint32_t exponent = (bits >> 3) & 0xfu;
  const uint32_t mantissa = bits & 0x7u;
  float result;
  if (exponent == 0xf && mantissa == 0x7) {
    result = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    result = static_cast<float>(mantissa) * (1.0f / 512.0f);
  } else {
    const uint32_t out = ((exponent + 120u) << 23) | (mantissa << 20);
    std::memcpy(&result, &out, sizeof(result));
  }
  return (sign != 0) ? -result : result;
}

void QuantizeFp8E4m3(const float* src, uint8_t* dst, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp32ToFp8E4m3(src[i] * scale);
}

void DequantizeFp8E4m3(const uint8_t* src, float* dst, int64_t n, float scale) {
  const float inverse = 1.0f / scale;
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp8E4m3ToFp32(src[i]) * inverse;
}

}  // namespace pagoda
