#include "kernels/cpu/simd_level.h"

#include <algorithm>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace pagoda::cpu {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}
#endif

SimdLevel Detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  if (avx512 && __builtin_cpu_supports("avx512vnni")) {
    return __builtin_cpu_supports("avx512bf16") ? SimdLevel::kAvx512Bf16 : SimdLevel::kAvx512Vnni;
  }
  if (avx512) return SimdLevel::kAvx512;
  if (avx2) return SimdLevel::kAvx2;
#endif
  return SimdLevel::kPortable;
}

}  // namespace

SimdLevel DetectSimdLevel() {
  static const SimdLevel level = Detect();  // thread-safe initialisation, once
  return level;
}

SimdLevel EffectiveSimdLevel(SimdLevel cap) { return std::min(cap, DetectSimdLevel()); }

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kPortable:
      return "portable";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
    case SimdLevel::kAvx512Vnni:
      return "avx512vnni";
    case SimdLevel::kAvx512Bf16:
      return "avx512bf16";
  }
  return "?";
}

std::optional<SimdLevel> ParseSimdLevel(std::string_view name) {
  if (name == "auto") return DetectSimdLevel();
  for (SimdLevel l : {SimdLevel::kPortable, SimdLevel::kAvx2, SimdLevel::kAvx512,
                      SimdLevel::kAvx512Vnni, SimdLevel::kAvx512Bf16}) {
    if (name == SimdLevelName(l)) return l;
  }
  return std::nullopt;
}

}  // namespace pagoda::cpu
