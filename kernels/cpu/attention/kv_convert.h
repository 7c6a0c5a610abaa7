// Row conversions between fp32 and the KV cache storage types (see paged_kv.h). The element
// conversions are common/numerics.h's; this adds the F16C row decode and the fp8 decode table.
// Internal to kernels/cpu.
#pragma once

#include <array>
#include <cstdint>

#include "common/numerics.h"
#include "kernels/cpu/attention/paged_kv.h"

namespace pagoda::cpu::kv {

// dst[i] = Fp16ToFp32(src[i]) for n elements; F16C (vcvtph2ps, also exact) when the CPU has it.
void F16RowToF32(const uint16_t* src, float* dst, int64_t n);

constexpr std::array<float, 256> MakeFp8Table() {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = Fp8E4m3ToFp32(static_cast<uint8_t>(i));
  return t;
}
// kFp8ToF32[b] = Fp8E4m3ToFp32(b).
inline constexpr std::array<float, 256> kFp8ToF32 = MakeFp8Table();

// dst[i] = logical value of src element i (fp8: decode / scale). `inv_scale` is 1/scale (1 for
// the non-fp8 types). n elements.
inline void DecodeRow(KvDtype dtype, const void* src, float inv_scale, float* dst, int64_t n) {
  switch (dtype) {
    case KvDtype::kF32: {
      const float* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      break;
    }
    case KvDtype::kBf16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(s[i]);
      break;
    }
    case KvDtype::kF16:
      F16RowToF32(static_cast<const uint16_t*>(src), dst, n);
      break;
    case KvDtype::kFp8E4m3: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = kFp8ToF32[s[i]] * inv_scale;
      break;
    }
  }
}

// Stores src (logical values) as `dtype` into dst (fp8: encode(x * scale)). n elements.
void EncodeRow(KvDtype dtype, const float* src, float scale, void* dst, int64_t n);

// x[i] = logical value of x[i] after a round trip through the storage type.
void RoundTripRow(KvDtype dtype, float scale, float* x, int64_t n);

}  // namespace pagoda::cpu::kv
