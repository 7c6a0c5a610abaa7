// The CPU kernel flags of the commands that compute (generate, serve, bench model):
//   --kernels LEVEL caps the SIMD level of every CPU kernel (portable | avx2 | avx512 |
//     avx512vnni | avx512bf16 | amx | auto) so every level can be exercised on one machine; the
//     effective level is logged (BackendCapabilities::kernels).
//   --f16-matmul int16|exact|bf16: how F16 weights are multiplied in batches (see
//     kernels/cpu/matmul/matmul.h F16Matmul).
//   --pack-weights on|off: the load-time packed copies of the blocks-of-32 matrices
//     (CpuBackendOptions::pack_weights; default: the config's backend.pack_weights, on).
//   --batch-invariant auto|on|off: batch-invariant logits (CpuBackendOptions::batch_invariance;
//     default: the config's backend.batch_invariant, auto).
//   --spin-us N: how long the CPU threads spin between a step's parallel loops, 0: a oneTBB
//     arena instead of the spinning team (CpuBackendOptions::spin_us; default: the config's
//     backend.spin_us, 500).
// A flag not given falls back to the environment variable PAGODA_KERNELS / PAGODA_F16_MATMUL /
// PAGODA_PACK_WEIGHTS / PAGODA_BATCH_INVARIANT (same values, also 0 / 1 for the last two; an
// unknown value there is ignored). This is the only place the kernel choices are read from the
// environment: the kernels take them as options (CpuBackendOptions).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common/status.h"
#include "kernels/cpu/cpu_backend.h"

namespace pagoda::cli {

// The flags' values; empty: not given.
struct KernelFlags {
  std::string kernels, f16_matmul, pack_weights, batch_invariant;
  int spin_us = -1;  // -1: not given
};

void AddKernelFlags(CLI::App* cmd, KernelFlags* flags);
// Sets options->max_simd_level, f16_matmul, pack_weights, batch_invariant (and spin_us, from
// the flag only) from the flags, else
// from the environment, else leaves them. INVALID_ARGUMENT naming the flag for a bad --kernels
// value.
Status ApplyKernelFlags(const KernelFlags& flags, cpu::CpuBackendOptions* options);

}  // namespace pagoda::cli
