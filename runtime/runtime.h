// Runtime: the composition root. BuildRuntime turns a loaded model and a RuntimeConfig into a
// backend (the one the config selects) and an engine driving it -- what `pagoda serve`, `pagoda
// generate` and `pagoda bench` run on. Nothing else includes both backends.
//
// RuntimeConfig gathers the option structs each layer owns (their defaults and ranges live
// there); ValidateRuntimeConfig runs each layer's validation and rejects keys the selected
// backend would ignore. Start-up failures carry a typed StartupError, mapped to the process exit
// code in one place (StartupExitCode).
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/neuron/neuron_options.h"
#include "kvcache/kv_cache_config.h"
#include "model/model.h"
#include "scheduler/engine.h"

namespace pagoda {

enum class BackendType { kCpu, kNeuron };
inline constexpr std::pair<std::string_view, BackendType> kBackendTypeNames[] = {
    {"cpu", BackendType::kCpu}, {"neuron", BackendType::kNeuron}};

struct RuntimeConfig {
  EngineConfig engine;                      // engine.*, server.max_waiting_requests, prefix caching
  KvCacheOptions kv_cache;                  // kv_cache.* (CPU backend; Neuron: from the manifest)
  BackendType backend = BackendType::kCpu;  // backend.type
  cpu::CpuBackendOptions cpu;               // backend.threads (+ the CLI's kernel flags)
  NeuronOptions neuron;                     // neuron.* (backend.type neuron only)
  bool operator==(const RuntimeConfig&) const = default;
};

// Each layer's validation, then: options the selected backend ignores must keep their defaults
// (the Neuron backend takes its KV geometry from the manifest and has no CPU arena; the CPU
// backend reads no neuron.* key). Errors name the key.
Status ValidateRuntimeConfig(const RuntimeConfig& config);

// The KV cache dtype for `options.dtype` (nullopt = auto: f32 for a model with an F32
// embedding, else f16).
KvDtype ResolveKvDtype(const Model& model, const KvCacheOptions& options);

// What failed at start-up; StartupExitCode maps it to the process exit code.
enum class StartupError {
  kFailed,              // exit 1: the model, the backend or a port (anything else)
  kBadConfig,           // exit 2: an invalid option, or one that conflicts with the environment
  kBackendUnavailable,  // exit 3: the device runtime is missing or failed to initialise
  kBackendArtifacts,    // exit 4: compiled artifacts invalid or not matching the config
};
inline constexpr int kExitOk = 0;
inline constexpr int kExitStartupFailed = 1;
inline constexpr int kExitBadConfig = 2;
inline constexpr int kExitBackendUnavailable = 3;
inline constexpr int kExitBackendArtifacts = 4;
int StartupExitCode(StartupError error);
// The kind of a backend Create() failure, by the code contract of kernels/backend.h.
StartupError BackendStartupError(const Status& status);

// Members are destroyed in reverse order: the engine first, the draft model last.
struct Runtime {
  std::unique_ptr<Model> draft_model;      // speculative.method draft only
  std::unique_ptr<Backend> draft_backend;  // its CPU backend (as many KV blocks as `backend`)
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Engine> engine;
};

// Validates `config` and builds the backend and the engine (and for speculative.method draft,
// loads the draft model: INVALID_ARGUMENT naming speculative.draft_model when it cannot be
// loaded or its vocabulary differs). `model` must outlive the runtime.
// On failure `*error` (if not null) says what failed.
Result<Runtime> BuildRuntime(const Model& model, const RuntimeConfig& config,
                             StartupError* error = nullptr);

}  // namespace pagoda
