#include "bench/read_bandwidth.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <new>

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define PAGODA_BENCH_X86 1
#else
#define PAGODA_BENCH_X86 0
#endif

namespace pagoda::cpu {
namespace {

constexpr size_t kChunk = size_t{1} << 22;  // floats per task (16 MiB)

using SumFn = float (*)(const float* p, size_t n);

float SumPortable(const float* p, size_t n) {
  float acc[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] += p[i + j];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += p[i];
  for (float a : acc) s += a;
  return s;
}

#if PAGODA_BENCH_X86
// 8 independent accumulators, 512 bytes per iteration.
__attribute__((target("avx512f"))) float SumAvx512(const float* p, size_t n) {
  __m512 a[8];
  for (__m512& x : a) x = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    for (int j = 0; j < 8; ++j) a[j] = _mm512_add_ps(a[j], _mm512_load_ps(p + i + 16 * j));
  }
  for (int j = 1; j < 8; ++j) a[0] = _mm512_add_ps(a[0], a[j]);
  return _mm512_reduce_add_ps(a[0]) + SumPortable(p + i, n - i);
}

__attribute__((target("avx2"))) float SumAvx2(const float* p, size_t n) {
  __m256 a[8];
  for (__m256& x : a) x = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int j = 0; j < 8; ++j) a[j] = _mm256_add_ps(a[j], _mm256_load_ps(p + i + 8 * j));
  }
  alignas(32) float t[8];
  for (int j = 1; j < 8; ++j) a[0] = _mm256_add_ps(a[0], a[j]);
  _mm256_store_ps(t, a[0]);
  float s = 0.0f;
  for (float x : t) s += x;
  return s + SumPortable(p + i, n - i);
}
#endif

struct Kernel {
  SumFn fn;
  const char* name;
};

const Kernel& SelectKernel() {
  static const Kernel kernel = [] {
#if PAGODA_BENCH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Kernel{SumAvx512, "avx512"};
    if (__builtin_cpu_supports("avx2")) return Kernel{SumAvx2, "avx2"};
#endif
    return Kernel{SumPortable, "portable"};
  }();
  return kernel;
}

}  // namespace

ReadBuffer::ReadBuffer(size_t bytes) : n_(bytes / sizeof(float) / kChunk * kChunk) {
  data_ = static_cast<float*>(std::aligned_alloc(4096, n_ * sizeof(float)));
  if (data_ == nullptr) throw std::bad_alloc();
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n_, kChunk),
                    [&](const tbb::blocked_range<size_t>& r) {
                      for (size_t i = r.begin(); i < r.end(); ++i) data_[i] = (i & 7) * 0.125f;
                    });
}

ReadBuffer::~ReadBuffer() { std::free(data_); }

double ReadBuffer::Sum() const {
  const SumFn fn = SelectKernel().fn;
  return tbb::parallel_reduce(
      tbb::blocked_range<size_t>(0, n_, kChunk), 0.0,
      [&](const tbb::blocked_range<size_t>& r, double acc) {
        return acc + fn(data_ + r.begin(), r.size());
      },
      std::plus<double>());
}

double ReadBuffer::BestGbps(int reps) const {
  double best = 0.0;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile double sink = Sum();
    (void)sink;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes()) * 1e-9 / s);
  }
  return best;
}

const char* ReadBuffer::KernelName() { return SelectKernel().name; }

}  // namespace pagoda::cpu

#if PAGODA_BENCH_X86
#pragma GCC diagnostic pop
#endif
