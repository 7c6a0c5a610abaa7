#include "kernels/cpu/simd_level.h"

#include <algorithm>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace pagoda::cpu {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

// AMX-TILE, AMX-INT8 and AMX-BF16 (CPUID leaf 7 EDX bits 24, 25, 22), their state enabled in
// XCR0 (bits 17 TILECFG, 18 TILEDATA), and Linux's permission for this process to use the tile
// data (ARCH_REQ_XCOMP_PERM; without it the first tile instruction faults).
bool HasAmx() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  constexpr unsigned kAmxBits = (1u << 22) | (1u << 24) | (1u << 25);
  if ((edx & kAmxBits) != kAmxBits) return false;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & bit_OSXSAVE) == 0) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr unsigned kTileState = (1u << 17) | (1u << 18);
  if ((xcr0_lo & kTileState) != kTileState) return false;
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

SimdLevel Detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  if (avx512 && __builtin_cpu_supports("avx512vnni")) {
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("gfni")) {
      return SimdLevel::kAvx512Vnni;
    }
    return HasAmx() ? SimdLevel::kAmx : SimdLevel::kAvx512Bf16;
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
    case SimdLevel::kAmx:
      return "amx";
  }
  return "?";
}

std::optional<SimdLevel> ParseSimdLevel(std::string_view name) {
  if (name == "auto") return DetectSimdLevel();
  for (SimdLevel l : kAllSimdLevels) {
    if (name == SimdLevelName(l)) return l;
  }
  return std::nullopt;
}

}  // namespace pagoda::cpu
