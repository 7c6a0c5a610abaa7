#include "runtime/runtime.h"

#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/neuron/neuron_backend.h"

namespace pagoda {
namespace {

// An error naming `key` when the selected backend would ignore its (non-default) value.
Status RejectIgnored(bool differs, std::string_view key, std::string_view why) {
  if (!differs) return Status::Ok();
  return InvalidArgument(std::string(key) + ": not used with " + std::string(why));
}

Status RejectKeysTheBackendIgnores(const RuntimeConfig& c) {
  if (c.backend == BackendType::kNeuron) {
    constexpr std::string_view kWhy =
        "backend.type neuron (the KV cache geometry comes from the Neuron manifest; leave "
        "kv_cache.* at its defaults)";
    const KvCacheOptions d;
    PAGODA_RETURN_IF_ERROR(
        RejectIgnored(c.kv_cache.block_size != d.block_size, "kv_cache.block_size", kWhy));
    PAGODA_RETURN_IF_ERROR(RejectIgnored(c.kv_cache.dtype != d.dtype, "kv_cache.dtype", kWhy));
    PAGODA_RETURN_IF_ERROR(
        RejectIgnored(c.kv_cache.memory_bytes != d.memory_bytes, "kv_cache.memory_bytes", kWhy));
    PAGODA_RETURN_IF_ERROR(
        RejectIgnored(c.kv_cache.num_blocks != d.num_blocks, "kv_cache.num_blocks", kWhy));
    PAGODA_RETURN_IF_ERROR(
        RejectIgnored(c.cpu.threads != cpu::CpuBackendOptions{}.threads, "backend.threads",
                      "backend.type neuron (it sizes the CPU backend's thread arena)"));
    return RejectIgnored(c.cpu.pack_weights != cpu::CpuBackendOptions{}.pack_weights,
                         "backend.pack_weights", "backend.type neuron (the CPU kernels' layout)");
  }
  if (!(c.neuron == NeuronOptions{})) {
    return InvalidArgument(
        "neuron: the neuron.* keys are used only with backend.type neuron (backend.type is cpu; "
        "leave them at their defaults)");
  }
  return Status::Ok();
}

StepLimits Limits(const SchedulerConfig& s) {
  return StepLimits{s.max_num_batched_tokens, s.max_num_seqs};
}

Result<std::unique_ptr<Backend>> CreateBackend(const Model& model, const RuntimeConfig& c) {
  const StepLimits limits = Limits(c.engine.scheduler);
  if (c.backend == BackendType::kNeuron) {
    return CreateNeuronBackend(model.config, c.neuron, limits);
  }
  KvCacheShape shape;
  shape.n_layers = model.config.n_layers;
  shape.n_kv_heads = model.config.n_kv_heads;
  shape.head_dim = model.config.head_dim;
  shape.auto_dtype = ResolveKvDtype(model, KvCacheOptions{});
  shape.max_model_len = model.config.context_length;
  shape.max_num_seqs = c.engine.scheduler.max_num_seqs;
  PAGODA_ASSIGN_OR_RETURN(KvCacheConfig kv, ResolveKvCacheConfig(c.kv_cache, shape));
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<cpu::CpuBackend> b,
                          cpu::CpuBackend::Create(model.config, model.weights, kv, limits, c.cpu));
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace

Status ValidateRuntimeConfig(const RuntimeConfig& c) {
  PAGODA_RETURN_IF_ERROR(ValidateEngineConfig(c.engine));
  PAGODA_RETURN_IF_ERROR(ValidateKvCacheOptions(c.kv_cache));
  PAGODA_RETURN_IF_ERROR(cpu::ValidateCpuBackendOptions(c.cpu));
  PAGODA_RETURN_IF_ERROR(ValidateNeuronOptions(c.neuron));
  return RejectKeysTheBackendIgnores(c);
}

KvDtype ResolveKvDtype(const Model& model, const KvCacheOptions& options) {
  if (options.dtype) return *options.dtype;
  return model.weights.token_embd.type == GgmlType::kF32 ? KvDtype::kF32 : KvDtype::kF16;
}

int StartupExitCode(StartupError error) {
  switch (error) {
    case StartupError::kFailed:
      return kExitStartupFailed;
    case StartupError::kBadConfig:
      return kExitBadConfig;
    case StartupError::kBackendUnavailable:
      return kExitBackendUnavailable;
    case StartupError::kBackendArtifacts:
      return kExitBackendArtifacts;
  }
  return kExitStartupFailed;
}

StartupError BackendStartupError(const Status& status) {
  switch (status.code()) {
    case StatusCode::kUnavailable:
      return StartupError::kBackendUnavailable;
    case StatusCode::kFailedPrecondition:
      return StartupError::kBackendArtifacts;
    case StatusCode::kInvalidArgument:
      return StartupError::kBadConfig;
    default:
      return StartupError::kFailed;
  }
}

Result<Runtime> BuildRuntime(const Model& model, const RuntimeConfig& c, StartupError* error) {
  StartupError ignored;
  StartupError& kind = error != nullptr ? *error : ignored;
  kind = StartupError::kBadConfig;
  PAGODA_RETURN_IF_ERROR(ValidateRuntimeConfig(c));
  Runtime rt;
  Result<std::unique_ptr<Backend>> backend = CreateBackend(model, c);
  if (!backend.ok()) {
    kind = BackendStartupError(backend.status());
    return backend.status();
  }
  rt.backend = std::move(backend).value();
  EngineConfig ec = c.engine;
  // The model's stop tokens: EOS ids, end-of-turn, end-of-message (model/generation_defaults.h).
  std::vector<int32_t>& stops = ec.eos_token_ids;
  for (int32_t id : model.generation.stop_token_ids) stops.push_back(id);
  if (model.tokenizer->eos_id() >= 0) stops.push_back(model.tokenizer->eos_id());
  std::sort(stops.begin(), stops.end());
  stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  kind = StartupError::kFailed;
  PAGODA_ASSIGN_OR_RETURN(rt.engine, Engine::Create(*model.tokenizer, *rt.backend, ec));
  return rt;
}

}  // namespace pagoda
