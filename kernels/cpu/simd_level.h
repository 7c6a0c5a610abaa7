// The instruction-set levels of the CPU kernels (matmul/, attention/): the one detection of
// what this CPU supports, the level names (`--kernels`, logs) and the cap rule.
//
// Each level includes the ones below it (every CPU with AVX512-BF16 also has AVX512-VNNI):
//   kAvx2: AVX2 + FMA + F16C.  kAvx512: AVX-512 F/BW/VL/DQ.  kAvx512Vnni: + VNNI.
//   kAvx512Bf16: + BF16.
// A caller caps the level explicitly (CpuBackendOptions::max_simd_level, which the backend
// hands to MatMulOptions and the attention kernels); kernels capped at `cap` run at
// EffectiveSimdLevel(cap) = min(cap, DetectSimdLevel()). The attention kernels run every level
// from kAvx512 on as their AVX-512 kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pagoda::cpu {

enum class SimdLevel : int8_t {
  kPortable = 0,
  kAvx2 = 1,
  kAvx512 = 2,
  kAvx512Vnni = 3,
  kAvx512Bf16 = 4,
};

// The highest level: as a cap, "the best this CPU has".
inline constexpr SimdLevel kMaxSimdLevel = SimdLevel::kAvx512Bf16;

// The best level this CPU supports (detected once, thread-safe).
SimdLevel DetectSimdLevel();
// min(cap, DetectSimdLevel()).
SimdLevel EffectiveSimdLevel(SimdLevel cap);
// "portable", "avx2", "avx512", "avx512vnni", "avx512bf16".
const char* SimdLevelName(SimdLevel level);
// Parses SimdLevelName's names or "auto" (= DetectSimdLevel()); nullopt when unknown.
std::optional<SimdLevel> ParseSimdLevel(std::string_view name);

}  // namespace pagoda::cpu
