#include "tools/bench_verify.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/read_bandwidth.h"
#include "kvcache/kv_cache_manager.h"
#include "model/model.h"
#include "runtime/runtime.h"
#include "tools/kernels_flag.h"

namespace pagoda::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct VerifyBenchArgs {
  std::string model;
  int32_t context = 512, batch = 1, repetitions = 20;
  std::vector<int32_t> tokens = {1, 2, 3, 5, 9};
  std::string kv_dtype = "auto";
  bool json = false, interleave_bandwidth = false;
  RuntimeConfig runtime;
  KernelFlags kernel_flags;
};

// The backend, a KV bookkeeping of its own over the backend's pool, and one step's buffers.
struct Bench {
  Backend& backend;
  KvCacheManager kv;
  std::mt19937 rng{7};
  std::vector<int32_t> token_ids, slots;
  std::vector<StepSequence> seqs;
  std::vector<float> logits;

  explicit Bench(Backend& b)
      : backend(b), kv(b.capabilities().num_blocks, b.capabilities().block_size, false) {}

  int32_t RandomToken() { return static_cast<int32_t>(rng() % backend.vocab_size()); }

  // Runs a step of `lens[s]` new tokens for sequences 0..lens.size()-1, `computed` tokens cached
  // each; `num_logits` rows per sequence. Returns the seconds Execute took.
  Result<double> Step(std::span<const int32_t> lens, int32_t computed, bool decode,
                      int32_t num_logits) {
    token_ids.clear(), slots.clear(), seqs.clear();
    for (size_t s = 0; s < lens.size(); ++s) {
      const int32_t start = static_cast<int32_t>(token_ids.size());
      for (int32_t i = 0; i < lens[s]; ++i) token_ids.push_back(RandomToken());
      if (kv.HasSequence(static_cast<int64_t>(s))) {
        PAGODA_RETURN_IF_ERROR(kv.AllocateSlots(static_cast<int64_t>(s), lens[s]));
      } else {
        PAGODA_RETURN_IF_ERROR(
            kv.AllocatePrompt(static_cast<int64_t>(s), {&token_ids[start], 1}, lens[s]).status());
      }
      slots.resize(token_ids.size());
      PAGODA_RETURN_IF_ERROR(kv.GetSlotMapping(static_cast<int64_t>(s), computed,
                                               std::span<int32_t>(slots).subspan(start, lens[s])));
    }
    int32_t start = 0;
    for (size_t s = 0; s < lens.size(); ++s) {
      seqs.push_back({start, lens[s], computed, kv.block_table(static_cast<int64_t>(s)), decode,
                      std::min(num_logits, lens[s])});
      start += lens[s];
    }
    logits.resize(lens.size() * static_cast<size_t>(num_logits) * backend.vocab_size());
    const StepBatch batch{token_ids, slots, seqs, {}};
    const auto t0 = Clock::now();
    PAGODA_RETURN_IF_ERROR(backend.Execute(batch, logits));
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
};

// Prefills `batch` sequences of `context` random tokens, in chunks the step budget allows.
Status Prefill(Bench& b, int32_t batch, int32_t context) {
  const int32_t budget = b.backend.capabilities().max_num_batched_tokens;
  for (int32_t done = 0; done < context;) {
    const int32_t n = std::min(context - done, std::max(1, budget / batch));
    const std::vector<int32_t> lens(static_cast<size_t>(batch), n);
    PAGODA_RETURN_IF_ERROR(b.Step(lens, done, /*decode=*/false, 1).status());
    done += n;
  }
  return Status::Ok();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Status RunVerifyBench(const VerifyBenchArgs& a, json* out) {
  for (int32_t q : a.tokens) {
    if (q < 1 || q > kMaxDecodeTokensPerSeq) {
      return InvalidArgument("--tokens: " + std::to_string(q) + " (expected 1.." +
                             std::to_string(kMaxDecodeTokensPerSeq) + ")");
    }
  }
  PAGODA_ASSIGN_OR_RETURN(auto model, LoadModel(a.model));
  RuntimeConfig rc = a.runtime;
  PAGODA_ASSIGN_OR_RETURN(rc.kv_cache.dtype, ParseKvDtypeOption(a.kv_dtype));
  const int32_t max_q = *std::max_element(a.tokens.begin(), a.tokens.end());
  rc.engine.scheduler.max_num_seqs = a.batch;
  rc.engine.scheduler.max_num_batched_tokens =
      std::max(rc.engine.scheduler.max_num_batched_tokens, a.batch * max_q);
  PAGODA_ASSIGN_OR_RETURN(Runtime rt, BuildRuntime(*model, rc));
  Bench b(*rt.backend);
  if (!a.json) std::fprintf(stderr, "[bench] prefilling %d x %d tokens...\n", a.batch, a.context);
  PAGODA_RETURN_IF_ERROR(Prefill(b, a.batch, a.context));
  const cpu::ReadBuffer reads(size_t{1} << 30);
  std::vector<std::vector<double>> secs(a.tokens.size());
  std::vector<double> gbps;
  for (int32_t rep = -2; rep < a.repetitions; ++rep) {  // two warm-up rounds
    for (size_t j = 0; j < a.tokens.size(); ++j) {
      const size_t i = (j + static_cast<size_t>(std::max(rep, 0))) % a.tokens.size();
      const std::vector<int32_t> lens(static_cast<size_t>(a.batch), a.tokens[i]);
      PAGODA_ASSIGN_OR_RETURN(const double s, b.Step(lens, a.context, true, a.tokens[i]));
      for (int32_t seq = 0; seq < a.batch; ++seq) {
        PAGODA_RETURN_IF_ERROR(b.kv.TruncateSlots(seq, a.context));
      }
      if (rep >= 0) secs[i].push_back(s);
    }
    if (rep >= 0 && a.interleave_bandwidth) gbps.push_back(reads.BestGbps(1));
    if (!a.json && rep >= 0) std::fprintf(stderr, "\r[bench] round %d/%d", rep + 1, a.repetitions);
  }
  if (!a.json) std::fprintf(stderr, "\n");
  const auto one = std::find(a.tokens.begin(), a.tokens.end(), 1);
  const double base = Median(secs[one == a.tokens.end() ? 0 : one - a.tokens.begin()]);
  json steps = json::array();
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    const double med = Median(secs[i]);
    steps.push_back({{"tokens_per_seq", a.tokens[i]},
                     {"median_ms", med * 1e3},
                     {"best_ms", *std::min_element(secs[i].begin(), secs[i].end()) * 1e3},
                     {"relative_to_1_token", med / base}});
  }
  *out = {{"model", a.model},
          {"kernels", rt.backend->capabilities().kernels},
          {"context", a.context},
          {"batch", a.batch},
          {"repetitions", a.repetitions},
          {"steps", steps}};
  if (a.interleave_bandwidth) (*out)["interleaved_read_bandwidth_gbps_median"] = Median(gbps);
  return Status::Ok();
}

void Print(const json& j, bool as_json) {
  if (as_json) {
    std::cout << j.dump(2) << std::endl;
    return;
  }
  std::printf("%s (%s), context %d, batch %d, %d rounds\n", j["model"].get<std::string>().c_str(),
              j["kernels"].get<std::string>().c_str(), j["context"].get<int>(),
              j["batch"].get<int>(), j["repetitions"].get<int>());
  if (j.contains("interleaved_read_bandwidth_gbps_median")) {
    std::printf("read bandwidth (median of the interleaved passes): %.1f GB/s\n",
                j["interleaved_read_bandwidth_gbps_median"].get<double>());
  }
  std::printf("%-15s %10s %10s %12s\n", "tokens/seq", "median ms", "best ms", "x 1-token");
  for (const auto& s : j["steps"]) {
    std::printf("%-15d %10.3f %10.3f %12.3f\n", s["tokens_per_seq"].get<int>(),
                s["median_ms"].get<double>(), s["best_ms"].get<double>(),
                s["relative_to_1_token"].get<double>());
  }
}

}  // namespace

void RegisterBenchVerify(CLI::App* bench, int* exit_code) {
  auto a = std::make_shared<VerifyBenchArgs>();
  CLI::App* cmd = bench->add_subcommand(
      "verify", "Time of a speculative verification step (k + 1 tokens) vs a 1-token decode step");
  cmd->add_option("--model,-m", a->model, "GGUF model or Hugging Face directory")->required();
  cmd->add_option("--context", a->context, "Tokens cached per sequence before the timed steps")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--tokens", a->tokens, "Tokens per sequence of the timed steps (k + 1)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "Sequences per step")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", a->repetitions, "Timed rounds (one step of each count)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--kv-dtype", a->kv_dtype, "kv_cache.dtype: auto | f32 | bf16 | f16 | fp8_e4m3")
      ->capture_default_str();
  cmd->add_option("--threads", a->runtime.cpu.threads,
                  "backend.threads: CPU backend threads (0: one per core)");
  cmd->add_flag("--interleave-bandwidth", a->interleave_bandwidth,
                "After every round, one timed pass of the read loop (1 GiB): the bandwidth of "
                "the same minutes");
  cmd->add_flag("--json", a->json, "Print JSON");
  AddKernelFlags(cmd, &a->kernel_flags);
  cmd->callback([a, exit_code] {
    Status st = ApplyKernelFlags(a->kernel_flags, &a->runtime.cpu);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      *exit_code = 2;
      return;
    }
    json out;
    st = RunVerifyBench(*a, &out);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
      *exit_code = st.code() == StatusCode::kInvalidArgument ? 2 : 1;
      return;
    }
    Print(out, a->json);
    *exit_code = 0;
  });
}

}  // namespace pagoda::cli
