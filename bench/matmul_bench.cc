// Microbenchmarks of kernels/cpu/matmul (y = W x) at TinyLlama-1.1B shapes: q/o 2048x2048,
// gate/up 5632x2048, down 2048x5632, k/v 256x2048, output 32000x2048 ([rows][cols]), for batch
// 1 (decode GEMV), 2 and 5 (speculative verification of 1 and 4 proposals), 16 (batched decode), 32
// / 64 / 128 (where the batch paths take over) and 512 (prefill), per weight type (F32, F16, BF16,
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS).
//
// Counters: W_GB/s = weight bytes (rows * row bytes, read once per call) per second;
// GFLOP/s = 2 * rows * cols * batch per second. Threads: 2 (tbb::global_control), like the
// 2-core target machine, or PAGODA_BENCH_THREADS (1 with k_v: a kernel's rate from its own L2,
// without the other core or the last-level cache). The level is the best the CPU has; cap it with
// PAGODA_KERNELS=avx2 etc. (and choose the F16 batch mode with PAGODA_F16_MATMUL), read by this
// program. Types with packed rows (every block-quantized type) are packed as the CPU backend packs
// them unless PAGODA_PACK_WEIGHTS=0. W_GB/s counts the file's row bytes either way. Those matrices
// stay in the last-level cache between calls. BM_MatMulDram reads from DRAM, as decode does: batch
// 1 and 16 (batched decode) against copies of gate_up laid end to end (DramBytes(), 8 copies or
// more), either as one tall matrix in one call (`one_call`: the kernel's streaming rate) or one
// copy per call in turn (`per_call`: with each call's start-up, tail and join, as a decode step's
// 90-110 calls pay them). Compare W_GB/s with `pagoda bench limits`' read bandwidth of the same
// minutes. BM_MatMulModelDecode (only when PAGODA_BENCH_MODEL names a GGUF file or an HF
// directory): that model's decode GEMVs, one token, in a decode step's order and nothing else
// between them (see there); BM_MatMulModelDecodeTeamVsTbb runs them on oneTBB and on a ThreadTeam
// of the same threads (as the CPU backend runs a step) in turn, and BM_MatMulDram's "per_call_team"
// the per-call matrices on that team. Run: bin/pagoda_bench_matmul [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/numerics.h"
#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/thread_team.h"
#include "model/model.h"
#include "model/tensor_types.h"

namespace pagoda::cpu::mm {
namespace {

// The threads of every benchmark: PAGODA_BENCH_THREADS (1..1024), else 2; nullopt for a value
// that is not such a number.
std::optional<int> ThreadsFromEnv() {
  const char* e = std::getenv("PAGODA_BENCH_THREADS");
  if (e == nullptr) return 2;
  const std::string_view v(e);
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < 1 || n > 1024) return std::nullopt;
  return n;
}

struct Shape {
  const char* name;
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{"q_o", 2048, 2048},
                             {"gate_up", 5632, 2048},
                             {"down", 2048, 5632},
                             {"k_v", 256, 2048},
                             {"output", 32000, 2048}};
constexpr GgmlType kTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,   GgmlType::kQ4_0,
    GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kIQ4_NL, GgmlType::kQ2_K,
    GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,   GgmlType::kIQ4_XS};

// One row of `type` from floats. IQ4_NL / IQ4_XS have no quantizer here (model/tensor_types.h):
// IQ4_NL shares Q4_0's block layout (fp16 scale + 32 4-bit codes), so a Q4_0 row is a valid
// IQ4_NL row; an IQ4_XS block gets its fp16 scale and random 6-bit sub-scales and codes.
void FillRow(GgmlType type, const float* src, uint8_t* dst, int64_t n, std::mt19937& rng) {
  if (type == GgmlType::kIQ4_NL) return QuantizeRow(GgmlType::kQ4_0, src, dst, n);
  if (type != GgmlType::kIQ4_XS) return QuantizeRow(type, src, dst, n);
  const int64_t block_bytes = TypeTraits(type).type_size;
  for (int64_t b = 0; b < n / TypeTraits(type).block_size; ++b) {
    uint8_t* block = dst + b * block_bytes;
    for (int64_t i = 0; i < block_bytes; ++i) block[i] = static_cast<uint8_t>(rng());
    const uint16_t d = Fp32ToFp16(0.0005f);
    std::memcpy(block, &d, sizeof(d));
  }
}

struct Weights {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> packed;  // the PackRows copy the CPU backend makes, if any
  WeightView view;
};

// Whether to multiply from packed rows where the type has them, as the CPU backend does
// (PAGODA_PACK_WEIGHTS=0: the file's rows).
bool PackFromEnv() {
  const char* e = std::getenv("PAGODA_PACK_WEIGHTS");
  return e == nullptr || std::string(e) != "0";
}

// The options the environment asks for (unknown values are ignored).
MatMulOptions OptionsFromEnv() {
  MatMulOptions o;
  if (const char* e = std::getenv("PAGODA_KERNELS"))
    o.max_level = ParseSimdLevel(e).value_or(o.max_level);
  if (const char* e = std::getenv("PAGODA_F16_MATMUL")) o.f16 = ParseF16Matmul(e).value_or(o.f16);
  return o;
}

// The most recently used matrix, kept between benchmarks (they run type/shape-major).
std::unique_ptr<Weights>& Cache() {
  static std::unique_ptr<Weights> w;
  return w;
}

const Weights& GetWeights(GgmlType type, const Shape& s) {
  std::unique_ptr<Weights>& w = Cache();
  if (w && w->type == type && w->rows == s.rows && w->cols == s.cols) return *w;
  w.reset();
  w = std::make_unique<Weights>();
  w->type = type;
  w->rows = s.rows;
  w->cols = s.cols;
  const int64_t rb = *RowBytes(type, s.cols);
  w->bytes.resize(static_cast<size_t>(s.rows * rb));
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> row(static_cast<size_t>(s.cols));
  for (int64_t r = 0; r < s.rows; ++r) {
    for (float& v : row) v = normal(rng);
    FillRow(type, row.data(), w->bytes.data() + r * rb, s.cols, rng);
  }
  w->view = WeightView{type, w->bytes.data(), s.rows, s.cols, rb};
  if (PackFromEnv() && ReadsPackedRows(type, EffectiveSimdLevel(OptionsFromEnv()))) {
    w->packed.resize(static_cast<size_t>(PackedBytes(type, s.rows, s.cols)));
    PackRows(w->view, w->packed.data());
    w->view.packed = w->packed.data();
  }
  return *w;
}

void BM_MatMul(benchmark::State& state, GgmlType type, Shape shape, MatMulOptions options) {
  const int64_t n = state.range(0);
  const Weights& w = GetWeights(type, shape);
  std::vector<float> x(static_cast<size_t>(n * shape.cols));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  std::vector<float> y(static_cast<size_t>(n * shape.rows));
  for (auto _ : state) {
    MatMul(w.view, x.data(), n, y.data(), options);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double calls = static_cast<double>(state.iterations());
  const double bytes = static_cast<double>(w.view.row_bytes * shape.rows) * calls;
  const double flops = 2.0 * static_cast<double>(shape.rows * shape.cols * n) * calls;
  state.counters["W_GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(KernelName(type, EffectiveSimdLevel(options), w.view.packed != nullptr));
}

// `copies` copies of w laid end to end: the file's rows and, if w has one, the packed copy
// (every packed layout is whole rows, or Q8_0's groups of 16, and gate_up's 5632 rows are
// whole groups), so the buffer is also one matrix of copies x w.rows rows.
struct DramWeights {
  GgmlType type;
  std::vector<uint8_t> bytes, packed;
  size_t copies = 0;
};

// The least bytes of BM_MatMulDram's copies: 1 GiB (as `pagoda bench limits`' read buffer) or 4
// times the last-level cache where that is larger. 256 MiB was too few on a host with 260 MiB of
// L3: gate_up_per_call_team batch 1 read Q8_0 at 38.8-42.3 and Q4_K at 33.9-36.5 GB/s while `bench
// limits` read 31.6-31.8; with 1 GiB, 31.4-31.7 and 29.4-30.3 as it read 32.0-32.4 (3 rounds each).
size_t DramBytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);  // 0 or -1 where unknown
  return std::max<size_t>(size_t{1} << 30, l3 > 0 ? 4 * static_cast<size_t>(l3) : 0);
}

// The copies of the most recent type (at least DramBytes() and 8 copies), kept like Cache().
const DramWeights& GetDramWeights(const Weights& w) {
  static std::unique_ptr<DramWeights> cache;
  if (cache && cache->type == w.type) return *cache;
  cache.reset();
  cache = std::make_unique<DramWeights>();
  cache->type = w.type;
  const size_t one = w.bytes.size(), one_packed = w.packed.size();
  cache->copies = std::max<size_t>(8, DramBytes() / std::max(one, one_packed) + 1);
  cache->bytes.resize(one * cache->copies);
  cache->packed.resize(one_packed * cache->copies);
  for (size_t c = 0; c < cache->copies; ++c) {
    std::memcpy(cache->bytes.data() + one * c, w.bytes.data(), one);
    if (one_packed > 0)
      std::memcpy(cache->packed.data() + one_packed * c, w.packed.data(), one_packed);
  }
  return *cache;
}

void BM_MatMulDram(benchmark::State& state, GgmlType type, bool one_call, MatMulOptions options) {
  const int64_t batch = state.range(0);
  const Shape& shape = kShapes[1];  // gate_up
  const Weights& w = GetWeights(type, shape);
  const DramWeights& d = GetDramWeights(w);
  std::vector<WeightView> views;
  for (size_t c = 0; c < (one_call ? 1 : d.copies); ++c) {
    WeightView v = w.view;
    v.data = d.bytes.data() + c * w.bytes.size();
    v.packed = w.packed.empty() ? nullptr : d.packed.data() + c * w.packed.size();
    if (one_call) v.rows = shape.rows * static_cast<int64_t>(d.copies);
    views.push_back(v);
  }
  std::vector<float> x(static_cast<size_t>(shape.cols * batch));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  std::vector<float> y(static_cast<size_t>(views.front().rows * batch));
  size_t next = 0;
  for (auto _ : state) {
    MatMul(views[next], x.data(), batch, y.data(), options);
    next = (next + 1) % views.size();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes =
      static_cast<double>(views.front().row_bytes * views.front().rows) * state.iterations();
  state.counters["W_GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  const double flops = 2.0 * static_cast<double>(views.front().rows) * shape.cols * batch *
                       static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(KernelName(type, EffectiveSimdLevel(options), w.view.packed != nullptr));
}

// A model's weights as the CPU backend holds them: packed (PackFromEnv) at the options' level.
struct ModelDecodeWeights {
  std::unique_ptr<Model> model;
  PackedWeights packed;
  ModelWeights weights;
};

// One decode step's GEMVs: per layer q / k / v in one call (as the engine makes it), o, gate /
// up in one call, down; then the output matrix. x and y are one token's buffers.
void DecodeGemvs(const ModelWeights& w, const float* x, float* y, const MatMulOptions& options) {
  for (const LayerWeights& l : w.layers) {
    const WeightView* qkv[] = {&l.wq, &l.wk, &l.wv};
    float* qkv_y[] = {y, y + l.wq.rows, y + l.wq.rows + l.wk.rows};
    MatMulSameInput(qkv, x, 1, qkv_y, options);
    MatMul(l.wo, x, 1, y, options);
    const WeightView* gate_up[] = {&l.w_gate, &l.w_up};
    float* gate_up_y[] = {y, y + l.w_gate.rows};
    MatMulSameInput(gate_up, x, 1, gate_up_y, options);
    MatMul(l.w_down, x, 1, y, options);
  }
  MatMul(w.output, x, 1, y, options);
}

// What a decode step's GEMVs alone cost (PAGODA_BENCH_MODEL's model): W_GB/s against `pagoda
// bench limits`' read bandwidth of the same minutes is how close the GEMVs come to the read
// wall; the time per step against `pagoda bench verify -m M --tokens 1` is what the rest of the
// step (attention, norms, the engine) adds. x is a constant, so only the weights stream.
// PAGODA_BENCH_MODEL's weights, loaded (and packed) once for every benchmark that reads them;
// null after reporting the error on `state`.
const ModelDecodeWeights* LoadedModel(benchmark::State& state, const std::string& path,
                                      const MatMulOptions& options) {
  static std::unique_ptr<ModelDecodeWeights> loaded;
  if (!loaded) {
    Result<std::unique_ptr<Model>> model = LoadModel(path);
    if (!model.ok()) {
      state.SkipWithError(("PAGODA_BENCH_MODEL: " + model.status().message()).c_str());
      return nullptr;
    }
    loaded = std::make_unique<ModelDecodeWeights>();
    loaded->model = std::move(*model);
    loaded->weights = PackFromEnv()
                          ? loaded->packed.Pack(loaded->model->weights, EffectiveSimdLevel(options))
                          : loaded->model->weights;
  }
  return loaded.get();
}

// x (a constant) and y for DecodeGemvs over w.
struct DecodeBuffers {
  std::vector<float> x, y;
  explicit DecodeBuffers(const ModelWeights& w) {
    int64_t widest = w.output.rows, cols = w.output.cols;
    for (const LayerWeights& l : w.layers) {
      widest = std::max({widest, l.wq.rows + l.wk.rows + l.wv.rows, 2 * l.w_gate.rows});
      cols = std::max({cols, l.w_down.cols, l.wo.cols});
    }
    x.assign(static_cast<size_t>(cols), 0.01f);
    y.resize(static_cast<size_t>(widest));
  }
};

void BM_MatMulModelDecode(benchmark::State& state, std::string path, MatMulOptions options) {
  const ModelDecodeWeights* loaded = LoadedModel(state, path, options);
  if (loaded == nullptr) return;
  DecodeBuffers b(loaded->weights);
  for (auto _ : state) {
    DecodeGemvs(loaded->weights, b.x.data(), b.y.data(), options);
    benchmark::DoNotOptimize(b.y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(WeightsPerToken(loaded->model->weights).bytes) *
                       static_cast<double>(state.iterations());
  state.counters["W_GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(path.substr(path.find_last_of('/') + 1));
}

// The same decode GEMVs on oneTBB and on a ThreadTeam (options.team) in alternation, one pass
// each in turn after 1 ms idle, so both see the same seconds of this host's drifting bandwidth:
// W_GB/s of each and team_over_tbb, the ratio of their rates.
void BM_MatMulModelDecodeTeamVsTbb(benchmark::State& state, std::string path,
                                   MatMulOptions options) {
  const ModelDecodeWeights* loaded = LoadedModel(state, path, options);
  if (loaded == nullptr) return;
  DecodeBuffers b(loaded->weights);
  MatMulOptions tbb_options = options;
  tbb_options.team = nullptr;
  double seconds[2] = {0, 0};
  int64_t passes = 0;
  for (auto _ : state) {
    for (int v = 0; v < 2; ++v) {
      // Untimed: each pass starts with the other's threads asleep (the team's helpers spin for
      // 500 us after a loop; TBB's workers sleep sooner), which costs the team one wake-up.
      state.PauseTiming();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      state.ResumeTiming();
      const auto t0 = std::chrono::steady_clock::now();
      DecodeGemvs(loaded->weights, b.x.data(), b.y.data(), v == 0 ? tbb_options : options);
      seconds[v] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      benchmark::DoNotOptimize(b.y.data());
      benchmark::ClobberMemory();
    }
    ++passes;
  }
  const double gb = static_cast<double>(WeightsPerToken(loaded->model->weights).bytes) *
                    static_cast<double>(passes) / 1e9;
  state.counters["tbb_W_GB/s"] = gb / std::max(seconds[0], 1e-9);
  state.counters["team_W_GB/s"] = gb / std::max(seconds[1], 1e-9);
  state.counters["team_over_tbb"] = seconds[0] / std::max(seconds[1], 1e-9);
  state.SetLabel(path.substr(path.find_last_of('/') + 1));
}

// `team`: the threads as a ThreadTeam (as the CPU backend runs a step), for TeamVsTbb and the
// "per_call_team" variants.
void RegisterAll(const MatMulOptions& options, ThreadTeam* team) {
  MatMulOptions on_team = options;
  on_team.team = team;
  if (const char* model = std::getenv("PAGODA_BENCH_MODEL")) {
    benchmark::RegisterBenchmark("BM_MatMulModelDecode", BM_MatMulModelDecode, std::string(model),
                                 options)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_MatMulModelDecodeTeamVsTbb", BM_MatMulModelDecodeTeamVsTbb,
                                 std::string(model), on_team)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0)
        ->UseRealTime();
  }
  for (GgmlType type : kTypes) {
    for (int variant : {0, 1, 2}) {  // one call, per call, per call on the team
      const bool one_call = variant == 0;
      const std::string name = std::string("BM_MatMulDram/") + TypeName(type) + "/gate_up_" +
                               (one_call ? "one_call" : "per_call") + (variant == 2 ? "_team" : "");
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMulDram, type, one_call,
                                   variant == 2 ? on_team : options)
          ->Arg(1)
          ->Arg(16)
          ->ArgName("batch")
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5)
          ->UseRealTime();
    }
  }
  for (GgmlType type : kTypes) {
    for (const Shape& s : kShapes) {
      const std::string name = std::string("BM_MatMul/") + TypeName(type) + "/" + s.name + "_" +
                               std::to_string(s.rows) + "x" + std::to_string(s.cols);
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, type, s, options)
          ->Arg(1)
          ->Arg(2)
          ->Arg(5)
          ->Arg(16)
          ->Arg(32)
          ->Arg(64)
          ->Arg(128)
          ->Arg(256)
          ->Arg(512)
          ->Arg(1024)
          ->Arg(2048)
          ->ArgName("batch")
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.3)
          ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu::mm

int main(int argc, char** argv) {
  const std::optional<int> env_threads = pagoda::cpu::mm::ThreadsFromEnv();
  if (!env_threads) {
    std::fprintf(stderr, "PAGODA_BENCH_THREADS: expected a whole number of threads in 1..1024\n");
    return 2;
  }
  const int num_threads = *env_threads;
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism,
                              static_cast<size_t>(num_threads));
  const pagoda::cpu::mm::MatMulOptions options = pagoda::cpu::mm::OptionsFromEnv();
  std::printf("matmul level: %s (best %s), %d threads\n",
              pagoda::cpu::SimdLevelName(pagoda::cpu::mm::EffectiveSimdLevel(options)),
              pagoda::cpu::SimdLevelName(pagoda::cpu::DetectSimdLevel()), num_threads);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  pagoda::cpu::ThreadTeam team(num_threads);
  pagoda::cpu::mm::RegisterAll(options, &team);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
