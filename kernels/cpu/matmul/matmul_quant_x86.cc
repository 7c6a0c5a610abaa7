// The block-quantized MatMul kernels (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K, IQ4_XS) for AVX2, AVX-512 and AVX512-VNNI (+ GFNI): one body
// (matmul_quant_x86.inc, where the method and layouts are described) compiled once per level
// under that level's target options, so the rest of the build stays at the baseline ISA.
#include "kernels/cpu/matmul/matmul_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)

// GCC 12's AVX-512 intrinsic headers self-initialise placeholder operands (GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/matmul/matmul_tiles.h"
#include "model/quants.h"

namespace pagoda::cpu::mm::internal {

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace qk_avx2 {
#define PAGODA_QK_BITS 256
#define PAGODA_QK_VNNI 0
#define PAGODA_QK_NAME "avx2"
#include "kernels/cpu/matmul/matmul_quant_x86.inc"
#undef PAGODA_QK_BITS
#undef PAGODA_QK_VNNI
#undef PAGODA_QK_NAME
}  // namespace qk_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")
namespace qk_avx512 {
#define PAGODA_QK_BITS 512
#define PAGODA_QK_VNNI 0
#define PAGODA_QK_NAME "avx512"
#include "kernels/cpu/matmul/matmul_quant_x86.inc"
#undef PAGODA_QK_BITS
#undef PAGODA_QK_VNNI
#undef PAGODA_QK_NAME
}  // namespace qk_avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
namespace qk_vnni {
#define PAGODA_QK_BITS 512
#define PAGODA_QK_VNNI 1
#define PAGODA_QK_NAME "avx512vnni"
#include "kernels/cpu/matmul/matmul_quant_x86.inc"
#undef PAGODA_QK_BITS
#undef PAGODA_QK_VNNI
#undef PAGODA_QK_NAME
}  // namespace qk_vnni
#pragma GCC pop_options

// From kAvx512Bf16 on (whose CPUs have GFNI, simd_level.h): the packed Q2_K / Q3_K / Q6_K kernels
// with their bit planes unpacked by vgf2p8affineqb, Q5_0 / Q5_1 / Q5_K's 5th bits alike, and the
// high nibbles of those and IQ4_XS.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,gfni")
namespace qk_gfni {
#define PAGODA_QK_BITS 512
#define PAGODA_QK_VNNI 1
#define PAGODA_QK_GFNI 1
#define PAGODA_QK_NAME "avx512gfni"
#include "kernels/cpu/matmul/matmul_quant_x86.inc"
#undef PAGODA_QK_BITS
#undef PAGODA_QK_VNNI
#undef PAGODA_QK_GFNI
#undef PAGODA_QK_NAME
}  // namespace qk_gfni
#pragma GCC pop_options

namespace {

// The kernel of `level`'s body: for packed rows (PackedKernels) or the file's rows (Kernels).
Kernel LevelKernel(SimdLevel level, GgmlType type, bool packed) {
  switch (level) {
    case SimdLevel::kPortable:
      return {};
    case SimdLevel::kAvx2:
      return packed ? qk_avx2::PackedKernels(type) : qk_avx2::Kernels(type);
    case SimdLevel::kAvx512:
      return packed ? qk_avx512::PackedKernels(type) : qk_avx512::Kernels(type);
    case SimdLevel::kAvx512Vnni:
      return packed ? qk_vnni::PackedKernels(type) : qk_vnni::Kernels(type);
    case SimdLevel::kAvx512Bf16:
    case SimdLevel::kAmx:
      if (packed) {
        if (const Kernel k = qk_gfni::PackedKernels(type); k.fn != nullptr) return k;
      }
      return packed ? qk_vnni::PackedKernels(type) : qk_vnni::Kernels(type);
  }
  return {};
}

}  // namespace

Kernel X86QuantKernel(SimdLevel level, GgmlType type) { return LevelKernel(level, type, false); }
Kernel X86PackedKernel(SimdLevel level, GgmlType type) {
  if (type == GgmlType::kQ8_0)
    return level >= SimdLevel::kAvx512Vnni ? X86Q8PackedKernel() : Kernel{};
  if (type == GgmlType::kBF16)
    return level >= SimdLevel::kAvx512Bf16 ? X86Bf16PackedKernel() : Kernel{};
  if (type == GgmlType::kF16) return level >= SimdLevel::kAvx512 ? X86F16PackedKernel() : Kernel{};
  if (type == GgmlType::kF32) return level >= SimdLevel::kAvx512 ? X86F32PackedKernel() : Kernel{};
  return LevelKernel(level, type, true);
}

}  // namespace pagoda::cpu::mm::internal

#pragma GCC diagnostic pop

#endif  // x86-64 GCC
