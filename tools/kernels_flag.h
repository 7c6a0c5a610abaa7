// The CPU kernel flags of the commands that compute (generate, serve, bench model):
//   --kernels LEVEL caps the SIMD level of the CPU kernels (portable | avx2 | avx512 |
//     avx512vnni | avx512bf16 | auto) so every level can be exercised on one machine. It sets
//     PAGODA_KERNELS, which the kernels read once at their first use; the effective level is
//     logged.
//   --f16-matmul int16|exact|bf16: how F16 weights are multiplied in batches (see
//     kernels/cpu/matmul/matmul.h F16Matmul). Sets PAGODA_F16_MATMUL.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace pagoda::cli {

// The flags' values; empty: not given.
struct KernelFlags {
  std::string kernels, f16_matmul;
};

void AddKernelFlags(CLI::App* cmd, KernelFlags* flags);
// Validates and applies the flags (no-op for the empty ones). Returns false (after printing
// why) on a bad --kernels value.
bool ApplyKernelFlags(const KernelFlags& flags);
// "avx512vnni" etc.: the level the matmul kernels will use.
const char* EffectiveKernelLevel();

}  // namespace pagoda::cli
