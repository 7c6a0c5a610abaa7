// Peak-compute probes: how many arithmetic operations per second this machine's cores reach
// with the instructions the kernels use -- fp32 FMA, bf16 dot products (AVX512-BF16 vdpbf16ps)
// and int8 dot products (AVX512-VNNI vpdpbusd; AMX tdpbssd) -- on every thread of the current
// TBB arena.
// Each loop keeps many independent accumulators in registers so it is throughput-bound.
#pragma once

namespace pagoda::bench {

struct PeakCompute {
  double fp32_gflops = 0;    // 2 flops per FMA lane
  double bf16_gflops = 0;    // 0 when the CPU has no AVX512-BF16; 2 flops per bf16 product
  double int8_gops = 0;      // 0 when the CPU has no AVX512-VNNI; 2 ops per int8 product
  double amx_int8_gops = 0;  // AMX tile products (SimdLevel::kAmx; else 0); 2 ops per product
  const char* fp32_kernel = "";
};

// Runs each probe for about `seconds` and keeps the best of a few repetitions.
PeakCompute MeasurePeakCompute(double seconds = 0.3);

}  // namespace pagoda::bench
