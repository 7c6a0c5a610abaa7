#include "tools/kernels_flag.h"

#include <cstdio>
#include <cstdlib>

#include "kernels/cpu/matmul/matmul.h"

namespace pagoda::cli {

void AddKernelFlags(CLI::App* cmd, KernelFlags* flags) {
  cmd->add_option("--kernels", flags->kernels,
                  "Cap the CPU kernel level: portable | avx2 | avx512 | avx512vnni | avx512bf16 "
                  "| auto (default: the best this CPU has)");
  cmd->add_option("--f16-matmul", flags->f16_matmul,
                  "F16 weights in batches of 32+ tokens: int16 (default; 13-bit block-scaled "
                  "int16 products on AVX512-VNNI) | exact (fp32 products) | bf16 (weights and "
                  "activations rounded to bf16, on AVX512-BF16)")
      ->check(CLI::IsMember({"exact", "int16", "bf16"}));
}

bool ApplyKernelFlags(const KernelFlags& flags) {
  const std::string& level = flags.kernels;
  if (!level.empty()) {
    if (!cpu::mm::ParseSimdLevel(level)) {
      std::fprintf(stderr,
                   "error: --kernels: '%s' (expected portable, avx2, avx512, avx512vnni, "
                   "avx512bf16 or auto)\n",
                   level.c_str());
      return false;
    }
    ::setenv("PAGODA_KERNELS", level.c_str(), 1);
  }
  if (!flags.f16_matmul.empty()) ::setenv("PAGODA_F16_MATMUL", flags.f16_matmul.c_str(), 1);
  return true;
}

const char* EffectiveKernelLevel() {
  return cpu::mm::SimdLevelName(cpu::mm::EffectiveSimdLevel(cpu::mm::MatMulOptions{}));
}

}  // namespace pagoda::cli
