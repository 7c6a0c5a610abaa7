// The instruction-set levels of the CPU kernels (matmul/, attention/): the one detection of
// what this CPU supports, the level names (`--kernels`, logs) and the cap rule.
//
// Each level includes the ones below it (every CPU with AVX512-BF16 also has AVX512-VNNI):
//   kAvx2: AVX2 + FMA + F16C.  kAvx512: AVX-512 F/BW/VL/DQ.  kAvx512Vnni: + VNNI.
//   kAvx512Bf16: + BF16 and GFNI (Zen 4, Sapphire Rapids and later; Cooper Lake, with BF16 but
//   no GFNI, runs at kAvx512Vnni).  kAmx: + AMX-TILE / AMX-INT8 / AMX-BF16, with the tile data state
//   granted to the process by the OS (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM), asked once by
//   the detection).
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
  kAmx = 5,
};

// The highest level: as a cap, "the best this CPU has".
inline constexpr SimdLevel kMaxSimdLevel = SimdLevel::kAmx;
// Every level, lowest first (tests and tools walk them).
inline constexpr SimdLevel kAllSimdLevels[] = {SimdLevel::kPortable,   SimdLevel::kAvx2,
                                               SimdLevel::kAvx512,     SimdLevel::kAvx512Vnni,
                                               SimdLevel::kAvx512Bf16, SimdLevel::kAmx};

// The best level this CPU supports (detected once, thread-safe).
SimdLevel DetectSimdLevel();
// min(cap, DetectSimdLevel()).
SimdLevel EffectiveSimdLevel(SimdLevel cap);
// "portable", "avx2", "avx512", "avx512vnni", "avx512bf16", "amx".
const char* SimdLevelName(SimdLevel level);
// Parses SimdLevelName's names or "auto" (= DetectSimdLevel()); nullopt when unknown.
std::optional<SimdLevel> ParseSimdLevel(std::string_view name);

}  // namespace pagoda::cpu
