// `pagoda bench`: (a) `limits` measures this machine's read bandwidth and peak compute with its
// own loops; (b) `model` runs prefill + decode in-process and relates tok/s to those limits;
// (c) `verify` times a speculative verification step against a 1-token decode step
// (tools/bench_verify.h); (d) `serve` drives a running server over gRPC and reports TTFT /
// inter-token latency / tok/s. Progress goes to stderr; --json prints one JSON object on stdout.
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/peak_compute.h"
#include "bench/read_bandwidth.h"
#include "kernels/cpu/matmul/matmul.h"
#include "model/model.h"
#include "runtime/runtime.h"
#include "tools/bench_serve.h"
#include "tools/bench_verify.h"
#include "tools/commands.h"
#include "tools/constraint_flag.h"
#include "tools/kernels_flag.h"
#include "tools/speculative_flag.h"

namespace pagoda::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Secs(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

constexpr size_t kReadBufferBytes = size_t{1} << 30;

// `buf`: the read loop's buffer (kReadBufferBytes), reused by the caller for later readings.
json MeasureLimits(const cpu::ReadBuffer& buf, bool quiet) {
  if (!quiet) std::fprintf(stderr, "[bench] measuring read bandwidth (1 GiB, 5 passes)...\n");
  const double gbps = buf.BestGbps(5);
  if (!quiet) std::fprintf(stderr, "[bench] measuring peak compute...\n");
  const bench::PeakCompute p = bench::MeasurePeakCompute();
  return {{"threads", tbb::this_task_arena::max_concurrency()},
          {"read_bandwidth_gbps", gbps},
          {"read_kernel", cpu::ReadBuffer::KernelName()},
          {"fp32_gflops", p.fp32_gflops},
          {"bf16_gflops", p.bf16_gflops},
          {"int8_gops", p.int8_gops},
          {"amx_int8_gops", p.amx_int8_gops}};
}

struct ModelBenchArgs {
  std::string model;
  int32_t prompt_len = 128, gen_len = 32, batch = 1;
  int32_t repetitions = 1;  // timed runs (different prompts each, so no prefix-cache hits)
  RuntimeConfig runtime;
  std::string kv_dtype = "auto";  // --kv-dtype (kv_cache.dtype)
  bool json = false, quiet = false;
  bool interleave_bandwidth = false;  // a read-loop pass after every decode step
  KernelFlags kernel_flags;
  SpeculativeFlags speculative_flags;
  ConstraintFlags constraint_flags;                 // structured output for every request
  std::shared_ptr<const grammar::Grammar> grammar;  // ... compiled from them
};

// The compute peak that bounds this model's matmuls (named as in `bench limits`): the int8
// dot-product peak for integer-quantized weights, bf16 for F16 / BF16, fp32 for F32. Decided by
// the type of the largest matrices (the FFN).
std::string ComputePeakKey(const Model& m) {
  const GgmlType t = m.weights.layers.empty() ? GgmlType::kF32 : m.weights.layers[0].w_gate.type;
  if (t == GgmlType::kF32) return "fp32_gflops";
  if (t == GgmlType::kF16 || t == GgmlType::kBF16) return "bf16_gflops";
  return "int8_gops";
}

struct Phases {
  double prefill_s = 0, decode_s = 0;  // until every request has its first token; the rest
  int64_t decode_steps = 0, decode_tokens = 0;
  // --interleave-bandwidth: the read-loop passes run between decode steps (not in decode_s).
  double read_bytes = 0, read_s = 0, read_best_gbps = 0;

  // Another run's phases, added (times, counts and bytes summed; the best pass kept).
  void Add(const Phases& o) {
    prefill_s += o.prefill_s, decode_s += o.decode_s;
    decode_steps += o.decode_steps, decode_tokens += o.decode_tokens;
    read_bytes += o.read_bytes, read_s += o.read_s;
    read_best_gbps = std::max(read_best_gbps, o.read_best_gbps);
  }
};

// One timed pass of the read loop over `buf`, added to ph.
void InterleavedRead(const cpu::ReadBuffer& buf, Phases& ph) {
  const double gbps = buf.BestGbps(1);
  ph.read_bytes += static_cast<double>(buf.bytes());
  ph.read_s += static_cast<double>(buf.bytes()) / 1e9 / gbps;
  ph.read_best_gbps = std::max(ph.read_best_gbps, gbps);
}

// Submits a.batch random prompts and steps the engine to the end. The prefill phase ends when
// every request has produced its first token (a request that is already decoding while others
// still prefill counts toward prefill, not decode). With `reads`, one pass of the read loop
// follows every decode step, timed apart from it: the bandwidth over the same seconds.
Result<Phases> RunPhases(Engine& engine, const ModelBenchArgs& a, int32_t vocab, uint32_t seed,
                         const cpu::ReadBuffer* reads) {
  std::mt19937 rng(seed);
  std::vector<std::shared_ptr<RequestStream>> streams;
  auto started = std::make_shared<std::vector<char>>(a.batch, 0);
  auto num_started = std::make_shared<int32_t>(0);
  const auto t0 = Clock::now();
  for (int32_t i = 0; i < a.batch; ++i) {
    Request r;
    r.request_id = std::to_string(i);
    for (int32_t t = 0; t < a.prompt_len; ++t)
      r.prompt_token_ids.push_back(3 + rng() % (vocab - 3));
    r.sampling.temperature = 0;
    r.stopping.max_tokens = a.gen_len;
    r.stopping.ignore_eos = true;
    r.grammar = a.grammar;
    PAGODA_ASSIGN_OR_RETURN(auto s, engine.Submit(std::move(r)));
    s->SetListener([started, num_started, i] {  // on this thread, inside Step()
      if (!(*started)[i]) (*started)[i] = 1, ++*num_started;
    });
    streams.push_back(s);
  }
  Phases ph;
  Clock::time_point prefill_done{};
  int64_t steps = 0, gen_at_prefill_done = 0;
  while (engine.HasWork()) {
    const auto step_start = Clock::now();
    PAGODA_RETURN_IF_ERROR(engine.Step());
    ++steps;
    if (prefill_done != Clock::time_point{}) {
      ph.decode_s += Secs(step_start, Clock::now());
      if (reads != nullptr) InterleavedRead(*reads, ph);
    } else if (*num_started == a.batch) {
      prefill_done = Clock::now();
      ph.decode_steps = -steps;
      gen_at_prefill_done = engine.stats().generation_tokens;
      if (!a.quiet)
        std::fprintf(stderr, "[bench] prefill done in %.2f s\n", Secs(t0, prefill_done));
    }
  }
  if (prefill_done == Clock::time_point{})
    return Internal("bench: a request never produced a token");
  ph.prefill_s = Secs(t0, prefill_done);
  ph.decode_steps += steps;
  ph.decode_tokens = engine.stats().generation_tokens - gen_at_prefill_done;
  return ph;
}

// One short request before timing (like llama-bench's warm-up run): touches every weight page
// of the mapped file and sizes the kernels' buffers, so the timed prefill is not a cold start.
Status WarmUp(Engine& engine, int32_t vocab_size, bool quiet) {
  if (!quiet) std::fprintf(stderr, "[bench] warm-up request...\n");
  Request r;
  r.request_id = "warm-up";
  for (int32_t t = 1; t <= 4; ++t) r.prompt_token_ids.push_back(t % vocab_size);
  r.sampling.temperature = 0;
  r.stopping.max_tokens = 2;
  r.stopping.ignore_eos = true;
  PAGODA_ASSIGN_OR_RETURN(auto stream, engine.Submit(std::move(r)));
  while (engine.HasWork()) PAGODA_RETURN_IF_ERROR(engine.Step());
  return Status::Ok();
}

Status RunModelBench(ModelBenchArgs a, json* out) {
  PAGODA_ASSIGN_OR_RETURN(const grammar::ConstraintSpec constraint,
                          FlagsConstraint(a.constraint_flags));
  PAGODA_ASSIGN_OR_RETURN(a.grammar, grammar::CompileConstraint(constraint));
  PAGODA_ASSIGN_OR_RETURN(auto model, LoadModel(a.model));  // first: a bad path fails fast
  const cpu::ReadBuffer reads(kReadBufferBytes);  // also the readings after / between decodes
  const json limits = MeasureLimits(reads, a.quiet);
  RuntimeConfig rc = a.runtime;
  PAGODA_ASSIGN_OR_RETURN(rc.kv_cache.dtype, ParseKvDtypeOption(a.kv_dtype));
  SchedulerConfig& sc = rc.engine.scheduler;
  sc.max_num_seqs = a.batch;
  sc.max_num_batched_tokens = std::max(sc.max_num_batched_tokens, a.batch);
  rc.engine.max_waiting_requests = a.batch;
  PAGODA_ASSIGN_OR_RETURN(Runtime rt, BuildRuntime(*model, rc));
  const KvDtype kv_dtype = ResolveKvDtype(*model, rc.kv_cache);
  PAGODA_RETURN_IF_ERROR(WarmUp(*rt.engine, model->config.vocab_size, a.quiet));
  // Each repetition: one batch of fresh prompts, then the bandwidth read again right after its
  // decode phase (the host's bandwidth can change during a run: a busy neighbour).
  Phases ph;
  double gbps_after = 0;
  json prefill_runs = json::array(), decode_runs = json::array();
  for (int32_t rep = 0; rep < a.repetitions; ++rep) {
    PAGODA_ASSIGN_OR_RETURN(const Phases one,
                            RunPhases(*rt.engine, a, model->config.vocab_size, 1 + rep,
                                      a.interleave_bandwidth ? &reads : nullptr));
    if (!a.quiet) std::fprintf(stderr, "[bench] measuring read bandwidth again...\n");
    gbps_after += reads.BestGbps(3) / a.repetitions;
    prefill_runs.push_back(double(a.batch) * a.prompt_len / std::max(one.prefill_s, 1e-9));
    decode_runs.push_back(one.decode_tokens / std::max(one.decode_s, 1e-9));
    ph.Add(one);
  }
  const double prefill_s = ph.prefill_s, decode_s = ph.decode_s;
  const int64_t decode_steps = ph.decode_steps, decode_tokens = ph.decode_tokens;
  const int64_t ctx_avg = a.prompt_len + a.gen_len / 2;
  const int64_t kv_bytes = int64_t{model->config.n_layers} * 2 * model->config.kv_dim() * ctx_avg *
                           a.batch * static_cast<int64_t>(KvDtypeSize(kv_dtype));
  const StepWeights weights = WeightsPerToken(model->weights);
  const int64_t step_bytes = weights.bytes + kv_bytes;
  const double steps_per_s = decode_steps / std::max(decode_s, 1e-9);
  const double flops_per_token = 2.0 * weights.params;
  const double decode_tps = decode_tokens / std::max(decode_s, 1e-9);
  const double prefill_tps =
      double(a.batch) * a.prompt_len * a.repetitions / std::max(prefill_s, 1e-9);
  *out = {{"model", a.model},
          {"kernels", rt.backend->capabilities().kernels},
          {"f16_matmul", cpu::mm::F16MatmulName(a.runtime.cpu.f16_matmul)},
          {"pack_weights", a.runtime.cpu.pack_weights},
          {"spin_us", a.runtime.cpu.spin_us},
          {"batch_invariant", rt.backend->capabilities().batch_invariant},
          {"packed_weight_bytes", rt.backend->capabilities().packed_weight_bytes},
          {"prompt_len", a.prompt_len},
          {"gen_len", a.gen_len},
          {"batch", a.batch},
          {"step_time_budget_percent", a.runtime.engine.scheduler.step_time_budget_percent},
          {"limits", limits},
          {"prefill_tokens_per_s", prefill_tps},
          {"prefill_gflops", prefill_tps * flops_per_token / 1e9},
          {"prefill_fraction_of_fp32_peak",
           prefill_tps * flops_per_token / 1e9 / limits["fp32_gflops"].get<double>()},
          {"decode_tokens_per_s", decode_tps},
          {"decode_steps", decode_steps},
          {"bytes_per_decode_step", step_bytes},
          {"decode_gbps", step_bytes * steps_per_s / 1e9},
          {"decode_fraction_of_bandwidth",
           step_bytes * steps_per_s / 1e9 / limits["read_bandwidth_gbps"].get<double>()},
          {"decode_fraction_of_fp32_peak",
           decode_tps * flops_per_token / 1e9 / limits["fp32_gflops"].get<double>()}};
  const SpeculativeStats spec = rt.engine->stats().speculative;
  (*out)["speculative"] = {
      {"method", EnumName(EnumNames<SpeculativeMethod>(kSpeculativeMethodNames),
                          rc.engine.speculative.method)},
      {"num_drafts", spec.num_drafts},
      {"num_draft_tokens", spec.num_draft_tokens},
      {"num_accepted_tokens", spec.num_accepted_tokens}};
  const StructuredOutputStats so = rt.engine->stats().structured_output;
  (*out)["structured_output"] = {
      {"constraint", grammar::ConstraintKindName(constraint.kind)},
      {"num_masks", so.num_masks},
      {"mask_cache_hits", so.mask_cache_hits},
      {"mask_seconds", so.mask_seconds},
      {"trie_seconds", so.trie_seconds},
      {"mask_ms_per_token", so.num_masks ? 1e3 * so.mask_seconds / so.num_masks : 0.0},
      // Masks are computed inside the timed steps (a request's first token in the prefill
      // phase, the rest in decode): their share of both phases.
      {"mask_fraction_of_run", so.mask_seconds / std::max(decode_s + prefill_s, 1e-9)}};
  (*out)["read_bandwidth_gbps_after_decode"] = gbps_after;
  (*out)["decode_fraction_of_bandwidth_after"] = step_bytes * steps_per_s / 1e9 / gbps_after;
  if (a.interleave_bandwidth) {
    // Mean over the passes between decode steps (bytes / seconds, like decode_gbps), and the
    // best single pass.
    const double mean = ph.read_bytes / 1e9 / std::max(ph.read_s, 1e-9);
    (*out)["interleaved_read_bandwidth_gbps"] = mean;
    (*out)["interleaved_read_bandwidth_best_gbps"] = ph.read_best_gbps;
    (*out)["decode_fraction_of_interleaved_bandwidth"] = step_bytes * steps_per_s / 1e9 / mean;
  }
  std::string peak = ComputePeakKey(*model);
  if (!(limits[peak].get<double>() > 0)) peak = "fp32_gflops";  // no bf16 / VNNI on this CPU
  const double peak_g = limits[peak].get<double>();
  (*out)["compute_peak"] = peak;
  // Generated tokens over the whole run (prefill + decode): what `bench serve` reports as
  // tokens_per_s for the same workload.
  (*out)["total_tokens_per_s"] =
      double(a.batch) * a.gen_len * a.repetitions / std::max(prefill_s + decode_s, 1e-9);
  (*out)["repetitions"] = a.repetitions;  // rates above: over all repetitions together
  (*out)["prefill_tokens_per_s_runs"] = prefill_runs;
  (*out)["decode_tokens_per_s_runs"] = decode_runs;
  (*out)["prefill_fraction_of_compute_peak"] = prefill_tps * flops_per_token / 1e9 / peak_g;
  (*out)["decode_fraction_of_compute_peak"] = decode_tps * flops_per_token / 1e9 / peak_g;
  return Status::Ok();
}

void PrintJsonOrTable(const json& j, bool as_json) {
  if (as_json) {
    std::cout << j.dump(2) << std::endl;
    return;
  }
  for (const auto& [k, v] : j.items()) {
    if (v.is_object()) {
      for (const auto& [k2, v2] : v.items())
        std::printf("%-34s %s\n", (k + "." + k2).c_str(), v2.dump().c_str());
    } else {
      std::printf("%-34s %s\n", k.c_str(), v.dump().c_str());
    }
  }
}

void RegisterLimits(CLI::App* bench, int* exit_code) {
  auto as_json = std::make_shared<bool>(false);
  CLI::App* cmd = bench->add_subcommand("limits", "Measure read bandwidth and peak compute");
  cmd->add_flag("--json", *as_json, "Print JSON");
  cmd->callback([as_json, exit_code] {
    PrintJsonOrTable(MeasureLimits(cpu::ReadBuffer(kReadBufferBytes), *as_json), *as_json);
    *exit_code = 0;
  });
}

void RegisterModel(CLI::App* bench, int* exit_code) {
  auto a = std::make_shared<ModelBenchArgs>();
  CLI::App* cmd = bench->add_subcommand("model", "Prefill + decode throughput of a model");
  cmd->add_option("--model,-m", a->model, "GGUF model or Hugging Face directory")->required();
  cmd->add_option("--prompt-len", a->prompt_len, "Prompt tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--gen-len", a->gen_len, "Generated tokens")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--batch", a->batch, "Concurrent sequences")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--kv-dtype", a->kv_dtype, "kv_cache.dtype: auto | f32 | bf16 | f16 | fp8_e4m3")
      ->capture_default_str();
  cmd->add_option("--repetitions,-r", a->repetitions,
                  "Timed runs (fresh prompts each); rates are over all of them, per-run rates "
                  "are listed too")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--threads", a->runtime.cpu.threads,
                  "backend.threads: CPU backend threads (0: one per core)");
  cmd->add_option("--max-num-batched-tokens", a->runtime.engine.scheduler.max_num_batched_tokens,
                  "engine.max_num_batched_tokens: step token budget")
      ->capture_default_str();
  // Off by default here: every prompt is prefilled before decoding starts, so with --batch N the
  // decode phase is N streams in step (as llama-batched-bench measures). With the budget on, the
  // prompts' chunks ride along the first sequences' decodes, those start (and finish) earlier,
  // and the "decode" phase is mostly a tail of fewer streams (medium32k-q8_0, --batch 16
  // --prompt-len 128 --gen-len 64: 17 of 63 decode steps had 16 tokens). bench serve measures
  // the scheduler under load.
  a->runtime.engine.scheduler.step_time_budget_percent = 0;
  cmd->add_option("--step-time-budget-percent",
                  a->runtime.engine.scheduler.step_time_budget_percent,
                  "engine.step_time_budget_percent: while sequences decode, a step with prefill "
                  "chunks may take this % of the predicted time of a decode step of every running "
                  "and waiting sequence (0: off; off by default here, so the decode phase runs "
                  "all --batch sequences in step)")
      ->capture_default_str();
  cmd->add_flag("--interleave-bandwidth", a->interleave_bandwidth,
                "After every decode step, one timed pass of the read loop (1 GiB, not counted "
                "as decode time): the bandwidth over the same seconds as decode, for hosts whose "
                "bandwidth changes during a run");
  cmd->add_flag("--json", a->json, "Print JSON");
  AddKernelFlags(cmd, &a->kernel_flags);
  AddSpeculativeFlags(cmd, &a->speculative_flags);
  AddConstraintFlags(cmd, &a->constraint_flags);
  cmd->callback([a, exit_code] {
    a->quiet = a->json;
    Status st = ApplyKernelFlags(a->kernel_flags, &a->runtime.cpu);
    if (st.ok()) st = ApplySpeculativeFlags(a->speculative_flags, &a->runtime.engine.speculative);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      *exit_code = 2;
      return;
    }
    json out;
    st = RunModelBench(*a, &out);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
      *exit_code = 1;
      return;
    }
    PrintJsonOrTable(out, a->json);
    *exit_code = 0;
  });
}

}  // namespace

void RegisterBench(CLI::App& app, int* exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: limits | model | verify | serve");
  bench->require_subcommand(1);
  RegisterLimits(bench, exit_code);
  RegisterModel(bench, exit_code);
  RegisterBenchVerify(bench, exit_code);
  RegisterBenchServe(bench, exit_code);
}

}  // namespace pagoda::cli
