#include "bench/peak_compute.h"

// GCC 12's AVX-512 headers trip -Wuninitialized inside _mm512_reduce_* (an intrinsic's
// deliberately undefined operand); silence it for this file's intrinsics only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "kernels/cpu/simd_level.h"

namespace pagoda::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Each kernel runs `iters` iterations of 16 independent dependency chains and returns a value
// derived from the accumulators so the loop is not optimised away. Ops per iteration are given
// by the caller.
__attribute__((target("avx512f"))) float Fp32Avx512(long iters) {
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_set1_ps(1.0f);
  const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i) {
    for (auto& a : acc) a = _mm512_fmadd_ps(a, m, b);
  }
  __m512 s = acc[0];
  for (int k = 1; k < 16; ++k) s = _mm512_add_ps(s, acc[k]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float Fp32Avx2(long iters) {
  __m256 acc[12];
  for (auto& a : acc) a = _mm256_set1_ps(1.0f);
  const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i) {
    for (auto& a : acc) a = _mm256_fmadd_ps(a, m, b);
  }
  float out[8];
  __m256 s = acc[0];
  for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, acc[k]);
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

__attribute__((target("avx512f,avx512bf16"))) float Bf16Avx512(long iters) {
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  const __m512bh y = (__m512bh)_mm512_set1_epi16(0x3380);  // bf16 ~6e-8
  for (long i = 0; i < iters; ++i) {
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
  }
  __m512 s = acc[0];
  for (int k = 1; k < 16; ++k) s = _mm512_add_ps(s, acc[k]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512vnni"))) float Int8Avx512(long iters) {
  __m512i acc[16];
  for (auto& a : acc) a = _mm512_setzero_si512();
  // Zero weights keep the int32 accumulators from overflowing; the instruction costs the same.
  const __m512i x = _mm512_set1_epi8(1), y = _mm512_setzero_si512();
  for (long i = 0; i < iters; ++i) {
    for (auto& a : acc) a = _mm512_dpbusd_epi32(a, x, y);
  }
  __m512i s = acc[0];
  for (int k = 1; k < 16; ++k) s = _mm512_add_epi32(s, acc[k]);
  return static_cast<float>(_mm512_cvtsi512_si32(s));
}

// AMX int8 tile products (tdpbssd, 16 x 16 x 64 each) on four independent accumulator tiles;
// only called when cpu::DetectSimdLevel() >= kAmx (which has the OS grant the tile state).
struct alignas(64) AmxConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16};
};

__attribute__((target("amx-tile,amx-int8"))) float Int8Amx(long iters) {
  static const AmxConfig config;
  alignas(64) int8_t a[16 * 64] = {};
  alignas(64) int32_t c[16 * 16];
  _tile_loadconfig(&config);
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (long i = 0; i < iters; ++i) {
    _tile_dpbssd(0, 4, 5);
    _tile_dpbssd(1, 4, 5);
    _tile_dpbssd(2, 4, 5);
    _tile_dpbssd(3, 4, 5);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  return static_cast<float>(c[0]);
}

// Runs `kernel` on every arena thread for ~`seconds`; returns G ops/s (best of 3).
template <typename Kernel>
double Measure(Kernel kernel, double ops_per_iter, double seconds) {
  const int threads = tbb::this_task_arena::max_concurrency();
  long iters = 1 << 16;
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    std::atomic<float> sink{0};
    const auto t0 = Clock::now();
    tbb::parallel_for(
        0, threads, [&](int) { sink = sink + kernel(iters); }, tbb::static_partitioner());
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (rep == 0) {  // calibrate to the wanted duration, then measure
      iters = std::max<long>(1 << 16, static_cast<long>(iters * seconds / std::max(dt, 1e-6)));
      continue;
    }
    best = std::max(best, ops_per_iter * iters * threads / dt / 1e9);
  }
  return best;
}

}  // namespace

PeakCompute MeasurePeakCompute(double seconds) {
  PeakCompute p;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    p.fp32_kernel = "avx512";
    p.fp32_gflops = Measure(Fp32Avx512, 16.0 * 16 * 2, seconds);
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.fp32_kernel = "avx2";
    p.fp32_gflops = Measure(Fp32Avx2, 12.0 * 8 * 2, seconds);
  }
  if (__builtin_cpu_supports("avx512bf16")) {
    p.bf16_gflops = Measure(Bf16Avx512, 16.0 * 32 * 2, seconds);
  }
  if (__builtin_cpu_supports("avx512vnni")) {
    p.int8_gops = Measure(Int8Avx512, 16.0 * 64 * 2, seconds);
  }
  if (cpu::DetectSimdLevel() >= cpu::SimdLevel::kAmx) {
    p.amx_int8_gops = Measure(Int8Amx, 4.0 * 16 * 16 * 64 * 2, seconds);
  }
  return p;
}

}  // namespace pagoda::bench

#pragma GCC diagnostic pop
