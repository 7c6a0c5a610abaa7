// Microbenchmarks of the CPU attention kernels, with a streaming read-bandwidth baseline.
//
// Counters: KV_GB/s = unique K+V bytes of the context read per second (each cached K/V element
// once per call), GFLOP/s = 4 * n_heads * d * (keys attended) per second (QK and PV, 2 flops per
// multiply-add). Decode attention is memory-bound: compare its KV_GB/s with BM_ReadBandwidth.
// Threads: 2 (tbb::global_control), like the 2-core target machine.
#include <benchmark/benchmark.h>
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention_block_tkg.h"
#include "kernels/cpu/flash_paged_attention.h"

namespace pagoda::cpu {
namespace {

constexpr int kThreads = 2;
constexpr int32_t kBlockSize = 16;

// A paged f32 cache for `n_seqs` sequences of `ctx` tokens each, with shuffled block tables.
struct BenchCache {
  std::vector<float> k, v;
  std::vector<std::vector<int32_t>> tables;
  PagedKvView view;

  BenchCache(int32_t n_seqs, int32_t ctx, int32_t n_kv, int32_t d) {
    const int32_t per_seq = (ctx + kBlockSize) / kBlockSize;  // room for one more token
    const int32_t blocks = n_seqs * per_seq;
    const size_t n = static_cast<size_t>(blocks) * n_kv * kBlockSize * d;
    k.resize(n);
    v.resize(n);
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
    view.k = k.data();
    view.v = v.data();
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

// Args: context, batch, head_dim, GQA group; n_kv_heads = 8.
void BM_DecodeAttention(benchmark::State& state) {
  const int32_t ctx = static_cast<int32_t>(state.range(0));
  const int32_t batch = static_cast<int32_t>(state.range(1));
  const int32_t d = static_cast<int32_t>(state.range(2));
  const int32_t g = static_cast<int32_t>(state.range(3));
  const int32_t n_kv = 8, n_heads = n_kv * g;
  BenchCache cache(batch, ctx, n_kv, d);
  std::vector<AttnSeq> seqs;
  for (int32_t b = 0; b < batch; ++b) seqs.push_back({b, 1, ctx, cache.tables[b]});
  auto q = Filled(static_cast<size_t>(batch) * n_heads * d, 0.01f);
  auto kn = Filled(static_cast<size_t>(batch) * n_kv * d, 0.02f), vn = kn;
  std::vector<float> out(q.size());
  auto ws = TkgWorkspace::Create(Dims(batch, 64, n_heads, n_kv, d));
  PagedDecodeAttentionArgs a;
  a.seqs = seqs;
  a.q = q;
  a.k = kn;
  a.v = vn;
  a.kv = cache.view;
  a.n_heads = n_heads;
  a.out = out;
  for (auto _ : state) {
    if (!PagedDecodeAttention(a, *ws).ok()) state.SkipWithError("PagedDecodeAttention failed");
    benchmark::DoNotOptimize(out.data());
  }
  const double keys = static_cast<double>(batch) * (ctx + 1);
  SetCounters(state, static_cast<double>(batch) * ctx * n_kv * d * 2 * sizeof(float),
              4.0 * n_heads * d * keys);
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

// Streaming read of a 1 GiB buffer by 2 threads (sum of floats): the memory-bandwidth ceiling.
void BM_ReadBandwidth(benchmark::State& state) {
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> buf(n);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) buf[i] = static_cast<float>(i & 7);
  });
  for (auto _ : state) {
    const float total = tbb::parallel_reduce(
        tbb::blocked_range<size_t>(0, n, size_t{1} << 16), 0.0f,
        [&](const tbb::blocked_range<size_t>& r, float acc) {
          float part[16] = {};
          for (size_t i = r.begin(); i + 16 <= r.end(); i += 16) {
            for (int j = 0; j < 16; ++j) part[j] += buf[i + j];
          }
          for (float p : part) acc += p;
          return acc;
        },
        std::plus<float>());
    benchmark::DoNotOptimize(total);
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n * sizeof(float)) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
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
BENCHMARK(BM_DecodeAttention)->Apply(DecodeArgs);
BENCHMARK(BM_FlashPrefill)->Apply(PrefillArgs);
BENCHMARK(BM_AttentionBlockTkg)
    ->ArgNames({"ctx", "batch"})
    ->Args({512, 1})
    ->Args({512, 16})
    ->Args({4096, 16})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace pagoda::cpu

int main(int argc, char** argv) {
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, pagoda::cpu::kThreads);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
