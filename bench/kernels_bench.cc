// Microbenchmarks of the CPU attention kernels, with a streaming read-bandwidth baseline.
//
// Counters: KV_GB/s = unique K+V bytes of the context read per second (each cached K/V element
// once per call), GFLOP/s = 4 * n_heads * d * (keys attended) per second (QK and PV, 2 flops per
// multiply-add). Decode attention is memory-bound: compare its KV_GB/s with BM_ReadBandwidth.
// Threads: 2 (tbb::global_control), like the 2-core target machine.
//
// After the benchmarks, a summary measures the read bandwidth and the reference decode case
// (ctx 4096, batch 16, d 128, GQA 4, f32 KV) alternately in the same process, best of several
// repetitions each (the machine has a noisy neighbour), and prints one line:
//   decode_attention ctx=4096 batch=16 d=128 gqa=4: KV read X GB/s = Y% of measured read
//   bandwidth Z GB/s
// Flags (besides Google Benchmark's): --summary_only (skip the benchmarks), --no_summary.
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <vector>

#include "bench/read_bandwidth.h"
#include "kernels/cpu/attention/attention_block_tkg.h"
#include "kernels/cpu/attention/attention_simd.h"
#include "kernels/cpu/attention/flash_paged_attention.h"
#include "kernels/cpu/ops.h"

namespace pagoda::cpu {
namespace {

constexpr int kThreads = 2;
constexpr int32_t kBlockSize = 16;

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using FloatBuffer = std::unique_ptr<float[], FreeDeleter>;

// Page-aligned, 4 KiB pages (no MADV_HUGEPAGE), like kernels/cpu/kv_pool.cc's aligned_alloc.
FloatBuffer AllocFloats(size_t n) {
  const size_t align = 4096;
  const size_t bytes = (n * sizeof(float) + align - 1) / align * align;
  FloatBuffer b(static_cast<float*>(std::aligned_alloc(align, bytes)));
  if (b == nullptr) throw std::bad_alloc();
  return b;
}

// A paged f32 cache for `n_seqs` sequences of `ctx` tokens each, with shuffled block tables.
struct BenchCache {
  FloatBuffer k, v;
  std::vector<std::vector<int32_t>> tables;
  PagedKvView view;

  BenchCache(int32_t n_seqs, int32_t ctx, int32_t n_kv, int32_t d) {
    const int32_t per_seq = (ctx + kBlockSize) / kBlockSize;  // room for one more token
    const int32_t blocks = n_seqs * per_seq;
    const size_t n = static_cast<size_t>(blocks) * n_kv * kBlockSize * d;
    k = AllocFloats(n);
    v = AllocFloats(n);
    std::mt19937 rng(1);
    tbb::parallel_for(size_t{0}, n, size_t{1} << 20, [&](size_t i0) {
      for (size_t i = i0; i < std::min(n, i0 + (size_t{1} << 20)); ++i) {
        k[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        v[i] = static_cast<float>((i * 40503u) % 1000) * 1e-3f - 0.5f;
      }
    });
    std::vector<int32_t> ids(blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int32_t s = 0; s < n_seqs; ++s) {
      tables.emplace_back(ids.begin() + s * per_seq, ids.begin() + (s + 1) * per_seq);
    }
    view.k = k.get();
    view.v = v.get();
    view.num_blocks = blocks;
    view.n_kv_heads = n_kv;
    view.block_size = kBlockSize;
    view.head_dim = d;
  }
};

TkgWorkspaceDims Dims(int32_t batch, int32_t hidden, int32_t n_heads, int32_t n_kv, int32_t d) {
  TkgWorkspaceDims dims;
  dims.max_tokens = batch;
  dims.max_seqs = batch;
  dims.max_tokens_per_seq = 1;
  dims.hidden = hidden;
  dims.n_heads = n_heads;
  dims.n_kv_heads = n_kv;
  dims.head_dim = d;
  return dims;
}

std::vector<float> Filled(size_t n, float value) { return std::vector<float>(n, value); }

void SetCounters(benchmark::State& state, double kv_bytes, double flops) {
  state.counters["KV_GB/s"] =
      benchmark::Counter(kv_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// One decode step of `batch` sequences of `ctx` cached tokens each; n_kv_heads = 8.
struct DecodeCase {
  int32_t ctx, batch, d, g, n_kv = 8, n_heads;
  BenchCache cache;
  std::vector<AttnSeq> seqs;
  std::vector<float> q, kn, vn, out;
  Result<TkgWorkspace> ws;
  PagedDecodeAttentionArgs args;

  DecodeCase(int32_t ctx_, int32_t batch_, int32_t d_, int32_t g_)
      : ctx(ctx_),
        batch(batch_),
        d(d_),
        g(g_),
        n_heads(8 * g_),
        cache(batch_, ctx_, 8, d_),
        ws(TkgWorkspace::Create(Dims(batch_, 64, 8 * g_, 8, d_))) {
    for (int32_t b = 0; b < batch; ++b) seqs.push_back({b, 1, ctx, cache.tables[b]});
    q = Filled(static_cast<size_t>(batch) * n_heads * d, 0.01f);
    kn = Filled(static_cast<size_t>(batch) * n_kv * d, 0.02f);
    vn = kn;
    out.resize(q.size());
    args.seqs = seqs;
    args.q = q;
    args.k = kn;
    args.v = vn;
    args.kv = cache.view;
    args.n_heads = n_heads;
    args.out = out;
  }
  bool Run() { return ws.ok() && PagedDecodeAttention(args, *ws).ok(); }
  // Unique context K+V bytes one call reads.
  double KvBytes() const { return static_cast<double>(batch) * ctx * n_kv * d * 2 * sizeof(float); }
};

// Args: context, batch, head_dim, GQA group; n_kv_heads = 8.
void BM_DecodeAttention(benchmark::State& state) {
  DecodeCase c(static_cast<int32_t>(state.range(0)), static_cast<int32_t>(state.range(1)),
               static_cast<int32_t>(state.range(2)), static_cast<int32_t>(state.range(3)));
  for (auto _ : state) {
    if (!c.Run()) state.SkipWithError("PagedDecodeAttention failed");
    benchmark::DoNotOptimize(c.out.data());
  }
  const double keys = static_cast<double>(c.batch) * (c.ctx + 1);
  SetCounters(state, c.KvBytes(), 4.0 * c.n_heads * c.d * keys);
}

// Args: context before the chunk, chunk length, batch, head_dim, GQA group; n_kv_heads = 8.
void BM_FlashPrefill(benchmark::State& state) {
  const int32_t ctx = static_cast<int32_t>(state.range(0));
  const int32_t chunk = static_cast<int32_t>(state.range(1));
  const int32_t batch = static_cast<int32_t>(state.range(2));
  const int32_t d = static_cast<int32_t>(state.range(3));
  const int32_t g = static_cast<int32_t>(state.range(4));
  const int32_t n_kv = 8, n_heads = n_kv * g;
  BenchCache cache(batch, ctx, n_kv, d);
  std::vector<AttnSeq> seqs;
  for (int32_t b = 0; b < batch; ++b) seqs.push_back({b * chunk, chunk, ctx, cache.tables[b]});
  const size_t t = static_cast<size_t>(batch) * chunk;
  auto q = Filled(t * n_heads * d, 0.01f);
  auto kn = Filled(t * n_kv * d, 0.02f), vn = kn;
  std::vector<float> out(q.size());
  FlashPagedAttentionArgs a;
  a.seqs = seqs;
  a.q = q;
  a.k = kn;
  a.v = vn;
  a.kv = cache.view;
  a.n_heads = n_heads;
  a.out = out;
  for (auto _ : state) {
    if (!FlashPagedAttention(a).ok()) state.SkipWithError("FlashPagedAttention failed");
    benchmark::DoNotOptimize(out.data());
  }
  const double keys = static_cast<double>(batch) * chunk * (ctx + (chunk + 1) / 2.0);
  SetCounters(state, static_cast<double>(batch) * ctx * n_kv * d * 2 * sizeof(float),
              4.0 * n_heads * d * keys);
}

// The whole fused decode sublayer (f32 weights): Args context, batch; hidden 2048, 32 heads,
// 8 kv heads, d 64. The weights (2048 x 4096 floats) dominate at small contexts.
void BM_AttentionBlockTkg(benchmark::State& state) {
  const int32_t ctx = static_cast<int32_t>(state.range(0));
  const int32_t batch = static_cast<int32_t>(state.range(1));
  const int32_t hidden = 2048, n_heads = 32, n_kv = 8, d = 64;
  const int32_t q_dim = n_heads * d, kv_dim = n_kv * d;
  BenchCache cache(batch, ctx, n_kv, d);
  std::vector<float> wqkv = Filled(static_cast<size_t>(q_dim + 2 * kv_dim) * hidden, 1e-3f);
  std::vector<float> wo = Filled(static_cast<size_t>(hidden) * q_dim, 1e-3f);
  std::vector<float> norm = Filled(hidden, 1.0f);
  auto view = [](const std::vector<float>& w, int64_t rows, int64_t cols) {
    return WeightView{GgmlType::kF32, reinterpret_cast<const uint8_t*>(w.data()), rows, cols,
                      cols * 4};
  };
  TkgWeights w;
  w.attn_norm = norm;
  w.wqkv = view(wqkv, q_dim + 2 * kv_dim, hidden);
  w.wo = view(wo, hidden, q_dim);
  TkgConfig c;
  c.hidden = hidden;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv;
  c.head_dim = d;
  c.rms_eps = 1e-5f;
  c.rope_dim = d;
  std::vector<AttnSeq> seqs;
  std::vector<int32_t> positions, slots;
  for (int32_t b = 0; b < batch; ++b) {
    seqs.push_back({b, 1, ctx, cache.tables[b]});
    positions.push_back(ctx);
    slots.push_back(-1);  // keep the cache unchanged across iterations
  }
  std::vector<float> x = Filled(static_cast<size_t>(batch) * hidden, 0.5f), out(x.size());
  auto ws = TkgWorkspace::Create(Dims(batch, hidden, n_heads, n_kv, d));
  TkgArgs a{seqs, x, positions, slots, cache.view, out};
  for (auto _ : state) {
    if (!AttentionBlockTkg(c, w, a, *ws).ok()) state.SkipWithError("AttentionBlockTkg failed");
    benchmark::DoNotOptimize(out.data());
  }
  const double weight_bytes = (wqkv.size() + wo.size()) * sizeof(float);
  state.counters["KV+W_GB/s"] = benchmark::Counter(
      (static_cast<double>(batch) * ctx * kv_dim * 2 * sizeof(float) + weight_bytes) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate);
}

// Streaming read of a 1 GiB buffer by 2 threads (bench/read_bandwidth.h): the memory-bandwidth
// ceiling decode attention is compared with.
void BM_ReadBandwidth(benchmark::State& state) {
  ReadBuffer buf(size_t{1} << 30);
  for (auto _ : state) benchmark::DoNotOptimize(buf.Sum());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(buf.bytes()) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// The elementwise ops a decode step runs on its calling thread between the parallel loops
// (twice a layer and once a layer at batch 1): one row of n values, in L1.
std::vector<float> RandomRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void BM_RmsNorm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> x = RandomRow(n, 1), w = RandomRow(n, 2);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    RmsNorm(x.data(), w.data(), n, 1e-5f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns/value"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}

// SwiGlu works in place: each iteration takes a fresh copy of the gate row, refilled (untimed)
// once every kCopies iterations rather than pausing the timer around every call.
void BM_SwiGlu(benchmark::State& state) {
  constexpr int kCopies = 32;
  const int64_t n = state.range(0);
  const std::vector<float> gate = RandomRow(n, 3), up = RandomRow(n, 4);
  std::vector<std::vector<float>> rows(kCopies, gate);
  int next = 0;
  for (auto _ : state) {
    if (next == kCopies) {
      state.PauseTiming();
      for (std::vector<float>& r : rows) r = gate;
      next = 0;
      state.ResumeTiming();
    }
    SwiGlu(rows[next].data(), up.data(), n);
    benchmark::DoNotOptimize(rows[next++].data());
  }
  state.counters["ns/value"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}

void DecodeArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"ctx", "batch", "d", "gqa"});
  b->Args({4096, 16, 128, 4});  // the reference case: compare with BM_ReadBandwidth
  for (int64_t ctx : {128, 512, 2048, 8192}) b->Args({ctx, 1, 128, 4});
  for (int64_t ctx : {128, 512, 2048, 8192}) b->Args({ctx, 16, 128, 4});
  for (int64_t batch : {1, 4, 16, 64}) b->Args({1024, batch, 128, 4});
  for (int64_t g : {1, 4, 8}) {
    for (int64_t d : {64, 128}) b->Args({2048, 8, d, g});
  }
  b->Args({8192, 8, 128, 8});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

void PrefillArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"ctx", "chunk", "batch", "d", "gqa"});
  for (int64_t ctx : {0, 128, 1024, 4096, 8192}) b->Args({ctx, 256, 1, 128, 4});
  for (int64_t batch : {1, 4}) b->Args({1024, 128, batch, 128, 4});
  for (int64_t g : {1, 8}) b->Args({2048, 256, 1, 64, g});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RmsNorm)->ArgName("n")->Arg(2048)->Arg(4096)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SwiGlu)->ArgName("n")->Arg(5632)->Arg(14336)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeAttention)->Apply(DecodeArgs);
BENCHMARK(BM_FlashPrefill)->Apply(PrefillArgs);
BENCHMARK(BM_AttentionBlockTkg)
    ->ArgNames({"ctx", "batch"})
    ->Args({512, 1})
    ->Args({512, 16})
    ->Args({4096, 16})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

double Seconds(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best decode KV GB/s over `calls` calls.
double BestDecodeGbps(DecodeCase& c, int calls) {
  double best = 0.0;
  for (int i = 0; i < calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!c.Run()) return 0.0;
    best = std::max(best, c.KvBytes() * 1e-9 / Seconds(t0));
  }
  return best;
}

// The reference decode case against the read bandwidth, measured alternately (5 rounds).
void PrintDecodeSummary() {
  DecodeCase c(4096, 16, 128, 4);
  ReadBuffer buf(size_t{1} << 30);
  if (!c.Run()) {
    std::printf("decode_attention: PagedDecodeAttention failed\n");
    return;
  }
  double bw = 0.0, kv = 0.0;
  for (int round = 0; round < 5; ++round) {
    bw = std::max(bw, buf.BestGbps(2));
    kv = std::max(kv, BestDecodeGbps(c, 4));
  }
  std::printf(
      "decode_attention ctx=4096 batch=16 d=128 gqa=4: KV read %.1f GB/s = %.0f%% of measured read "
      "bandwidth %.1f GB/s (%d threads, best of 20 calls / 10 reads of %.2f GiB; kernels %s, "
      "read loop %s)\n",
      kv, 100.0 * kv / bw, bw, kThreads, static_cast<double>(buf.bytes()) / (1 << 30),
      SimdLevelName(attn::EffectiveSimdLevel(kMaxSimdLevel, c.d)), ReadBuffer::KernelName());
}

}  // namespace
}  // namespace pagoda::cpu

// Removes `flag` from argv; true if it was there.
bool TakeFlag(int* argc, char** argv, const char* flag) {
  for (int i = 1; i < *argc; ++i) {
    if (std::strcmp(argv[i], flag) == 0) {
      std::copy(argv + i + 1, argv + *argc, argv + i);
      --*argc;
      return true;
    }
  }
  return false;
}

int main(int argc, char** argv) {
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, pagoda::cpu::kThreads);
  const bool summary_only = TakeFlag(&argc, argv, "--summary_only");
  const bool no_summary = TakeFlag(&argc, argv, "--no_summary");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!summary_only) benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!no_summary) pagoda::cpu::PrintDecodeSummary();
  return 0;
}
