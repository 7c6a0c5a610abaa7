#include "tools/kernels_flag.h"

#include <cstdlib>

#include "common/field_check.h"
#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/simd_level.h"

namespace pagoda::cli {
namespace {

// The environment variable's value, or "" when it is not set.
std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

void AddKernelFlags(CLI::App* cmd, KernelFlags* flags) {
  cmd->add_option(
      "--kernels", flags->kernels,
      "Cap the CPU kernel level: portable | avx2 | avx512 | avx512vnni | avx512bf16 | amx "
      "| auto (default: the best this CPU has)");
  cmd->add_option("--f16-matmul", flags->f16_matmul,
                  "F16 weights in batches of 32+ tokens: int16 (default; 13-bit block-scaled "
                  "int16 products on AVX512-VNNI) | exact (fp32 products) | bf16 (weights and "
                  "activations rounded to bf16, on AVX512-BF16)")
      ->check(CLI::IsMember({"exact", "int16", "bf16"}));
  cmd->add_option("--pack-weights", flags->pack_weights,
                  "Copy the matrices at load into the layout their SIMD kernels read fastest "
                  "(F16: as they are, into huge pages): on | off (default: the config's "
                  "backend.pack_weights, on)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--batch-invariant", flags->batch_invariant,
                  "A sequence's logits bit for bit independent of the other sequences in its "
                  "steps, of prompt chunking and of prefix-cache hits (costs most quantized and "
                  "F16 models their fastest batched kernels): auto (on where it is free: F32 / "
                  "BF16 models, Q8_0 with packed weights at avx512vnni) | on | off (default: the "
                  "config's backend.batch_invariant, auto)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--spin-us", flags->spin_us,
                  "Microseconds the CPU backend's threads spin waiting for a step's next "
                  "parallel loop before they sleep; 0: no spinning thread team, the loops run "
                  "in a oneTBB arena (default: the config's backend.spin_us, 500)")
      ->check(CLI::Range(cpu::kCpuSpinUsRange.min, cpu::kCpuSpinUsRange.max));
}

Status ApplyKernelFlags(const KernelFlags& flags, cpu::CpuBackendOptions* options) {
  if (!flags.kernels.empty()) {
    const std::optional<cpu::SimdLevel> level = cpu::ParseSimdLevel(flags.kernels);
    if (!level) {
      return InvalidArgument(
          "--kernels: '" + flags.kernels +
          "' (expected portable, avx2, avx512, avx512vnni, avx512bf16, amx or auto)");
    }
    options->max_simd_level = *level;
  } else if (const auto level = cpu::ParseSimdLevel(Env("PAGODA_KERNELS"))) {
    options->max_simd_level = *level;
  }
  const std::string f16 = !flags.f16_matmul.empty() ? flags.f16_matmul : Env("PAGODA_F16_MATMUL");
  if (const auto mode = cpu::mm::ParseF16Matmul(f16)) options->f16_matmul = *mode;
  const std::string pack =
      !flags.pack_weights.empty() ? flags.pack_weights : Env("PAGODA_PACK_WEIGHTS");
  if (pack == "on" || pack == "1") options->pack_weights = true;
  if (pack == "off" || pack == "0") options->pack_weights = false;
  const std::string invariant =
      !flags.batch_invariant.empty() ? flags.batch_invariant : Env("PAGODA_BATCH_INVARIANT");
  // A std::string: the conditional makes one (from "on" / "off" / invariant), and a string_view
  // of it would dangle.
  const std::string name = invariant == "1" ? "on" : invariant == "0" ? "off" : invariant;
  if (const auto mode = ParseEnum<cpu::BatchInvariance>(cpu::kBatchInvarianceNames, name)) {
    options->batch_invariance = *mode;
  }
  if (flags.spin_us >= 0) options->spin_us = flags.spin_us;
  return Status::Ok();
}

}  // namespace pagoda::cli
