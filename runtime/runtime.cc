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
    PAGODA_RETURN_IF_ERROR(RejectIgnored(c.cpu.spin_us != cpu::CpuBackendOptions{}.spin_us,
                                         "backend.spin_us",
                                         "backend.type neuron (the CPU backend's thread team)"));
    PAGODA_RETURN_IF_ERROR(
        RejectIgnored(c.cpu.batch_invariance != cpu::CpuBackendOptions{}.batch_invariance,
                      "backend.batch_invariant", "backend.type neuron (the CPU kernels' plans)"));
    return RejectIgnored(c.cpu.pack_weights != cpu::CpuBackendOptions{}.pack_weights,
                         "backend.pack_weights", "backend.type neuron (the CPU kernels' layout)");
  }
  if (c.engine.speculative.method == SpeculativeMethod::kDraft && c.backend != BackendType::kCpu) {
    return InvalidArgument(
        "speculative.method: draft needs backend.type cpu (on Neuron the draft model would need "
        "its own compiled artifacts; ngram works there)");
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

// A CPU backend for `model` with the pool `kv_options` describes, on `team` (cpu_backend.h
// MakeThreadTeam; null: its oneTBB arena).
Result<std::unique_ptr<Backend>> CreateCpuBackend(const Model& model, const RuntimeConfig& c,
                                                  const KvCacheOptions& kv_options,
                                                  std::shared_ptr<cpu::ThreadTeam> team) {
  const StepLimits limits = Limits(c.engine.scheduler);
  KvCacheShape shape;
  shape.n_layers = model.config.n_layers;
  shape.n_kv_heads = model.config.n_kv_heads;
  shape.head_dim = model.config.head_dim;
  shape.auto_dtype = ResolveKvDtype(model, KvCacheOptions{});
  shape.max_model_len = model.config.context_length;
  shape.max_num_seqs = c.engine.scheduler.max_num_seqs;
  PAGODA_ASSIGN_OR_RETURN(KvCacheConfig kv, ResolveKvCacheConfig(kv_options, shape));
  PAGODA_ASSIGN_OR_RETURN(
      std::unique_ptr<cpu::CpuBackend> b,
      cpu::CpuBackend::Create(model.config, model.weights, kv, limits, c.cpu, std::move(team)));
  return std::unique_ptr<Backend>(std::move(b));
}

Result<std::unique_ptr<Backend>> CreateBackend(const Model& model, const RuntimeConfig& c,
                                               std::shared_ptr<cpu::ThreadTeam> team) {
  if (c.backend == BackendType::kNeuron) {
    return CreateNeuronBackend(model.config, c.neuron, Limits(c.engine.scheduler));
  }
  return CreateCpuBackend(model, c, c.kv_cache, std::move(team));
}

// INVALID_ARGUMENT naming speculative.draft_model unless both tokenizers have the same tokens.
Status CheckSameVocabulary(const Tokenizer& target, const Tokenizer& draft) {
  constexpr std::string_view kKey = "speculative.draft_model: ";
  if (target.vocab_size() != draft.vocab_size()) {
    return InvalidArgument(std::string(kKey) + "its vocabulary has " +
                           std::to_string(draft.vocab_size()) + " tokens, the model's " +
                           std::to_string(target.vocab_size()) + " (they must be the same)");
  }
  for (int32_t id = 0; id < target.vocab_size(); ++id) {
    if (target.TokenBytes(id) != draft.TokenBytes(id)) {
      return InvalidArgument(std::string(kKey) + "token " + std::to_string(id) +
                             " differs from the model's (the vocabularies must be the same)");
    }
  }
  return Status::Ok();
}

// speculative.method draft: loads the draft model and builds its CPU backend with as many KV
// blocks as the target's pool (the same block size; its own dtype rule), on the target's thread
// team (the engine steps them in turn; a second spinning team would contend for the cores).
Status BuildDraft(const Model& model, const RuntimeConfig& c, std::shared_ptr<cpu::ThreadTeam> team,
                  Runtime& rt) {
  const std::string& path = c.engine.speculative.draft_model;
  Result<std::unique_ptr<Model>> draft = LoadModel(path);
  if (!draft.ok()) {
    return InvalidArgument("speculative.draft_model: " + draft.status().message());
  }
  rt.draft_model = std::move(draft).value();
  PAGODA_RETURN_IF_ERROR(CheckSameVocabulary(*model.tokenizer, *rt.draft_model->tokenizer));
  KvCacheOptions kv = c.kv_cache;
  kv.num_blocks = rt.backend->capabilities().num_blocks;
  PAGODA_ASSIGN_OR_RETURN(rt.draft_backend,
                          CreateCpuBackend(*rt.draft_model, c, kv, std::move(team)));
  return Status::Ok();
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
  // One CPU thread team for the model's backend and a draft model's (speculative.method draft).
  std::shared_ptr<cpu::ThreadTeam> team =
      c.backend == BackendType::kCpu ? cpu::MakeThreadTeam(c.cpu) : nullptr;
  Result<std::unique_ptr<Backend>> backend = CreateBackend(model, c, team);
  if (!backend.ok()) {
    kind = BackendStartupError(backend.status());
    return backend.status();
  }
  rt.backend = std::move(backend).value();
  if (c.engine.speculative.method == SpeculativeMethod::kDraft) {
    kind = StartupError::kBadConfig;
    PAGODA_RETURN_IF_ERROR(BuildDraft(model, c, team, rt));
  }
  EngineConfig ec = c.engine;
  // The model's stop tokens: EOS ids, end-of-turn, end-of-message (model/generation_defaults.h).
  std::vector<int32_t>& stops = ec.eos_token_ids;
  for (int32_t id : model.generation.stop_token_ids) stops.push_back(id);
  if (model.tokenizer->eos_id() >= 0) stops.push_back(model.tokenizer->eos_id());
  std::sort(stops.begin(), stops.end());
  stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  kind = StartupError::kFailed;
  PAGODA_ASSIGN_OR_RETURN(
      rt.engine, Engine::Create(*model.tokenizer, *rt.backend, ec, rt.draft_backend.get()));
  return rt;
}

}  // namespace pagoda
