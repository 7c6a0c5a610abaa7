// `--kernels LEVEL` for the commands that compute (generate, serve, bench model): caps the SIMD
// level of the CPU kernels (portable | avx2 | avx512 | avx512vnni | avx512bf16 | auto) so every
// level can be exercised on one machine. It sets PAGODA_KERNELS, which the kernels read once
// at their first use; the effective level is logged.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace pagoda::cli {

void AddKernelsFlag(CLI::App* cmd, std::string* level);
// Validates and applies the flag (no-op when empty). Returns false (after printing why) on a
// bad value.
bool ApplyKernelsFlag(const std::string& level);
// `--f16-matmul exact|bf16`: bf16 lets F16 weights take the bf16 batch path (faster prefill,
// bf16 rounding; see kernels/cpu/matmul.h DefaultF16ViaBf16). Sets PAGODA_F16_MATMUL.
void AddF16MatmulFlag(CLI::App* cmd, std::string* mode);
bool ApplyF16MatmulFlag(const std::string& mode);
// "avx512vnni" etc.: the level the matmul kernels will use.
const char* EffectiveKernelLevel();

}  // namespace pagoda::cli
