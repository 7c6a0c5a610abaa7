#include "tools/kernels_flag.h"

#include <cstdio>
#include <cstdlib>

#include "kernels/cpu/matmul.h"

namespace pagoda::cli {

void AddKernelsFlag(CLI::App* cmd, std::string* level) {
  cmd->add_option("--kernels", *level,
                  "Cap the CPU kernel level: portable | avx2 | avx512 | avx512vnni | avx512bf16 "
                  "| auto (default: the best this CPU has)");
}

bool ApplyKernelsFlag(const std::string& level) {
  if (level.empty()) return true;
  if (!cpu::mm::ParseSimdLevel(level)) {
    std::fprintf(stderr,
                 "error: --kernels: '%s' (expected portable, avx2, avx512, avx512vnni, "
                 "avx512bf16 or auto)\n",
                 level.c_str());
    return false;
  }
  ::setenv("PAGODA_KERNELS", level.c_str(), 1);
  return true;
}

void AddF16MatmulFlag(CLI::App* cmd, std::string* mode) {
  cmd->add_option("--f16-matmul", *mode,
                  "F16 weights in batches: exact (fp32 products, default) | bf16 (faster "
                  "prefill on AVX512-BF16, weights and activations rounded to bf16)")
      ->check(CLI::IsMember({"exact", "bf16"}));
}

bool ApplyF16MatmulFlag(const std::string& mode) {
  if (!mode.empty()) ::setenv("PAGODA_F16_MATMUL", mode.c_str(), 1);
  return true;
}

const char* EffectiveKernelLevel() {
  return cpu::mm::SimdLevelName(cpu::mm::EffectiveSimdLevel(cpu::mm::MatMulOptions{}));
}

}  // namespace pagoda::cli
