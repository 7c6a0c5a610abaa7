// Runtime: a loaded model wired to a backend and an engine -- what `pagoda generate` (and the
// server) run on. BuildRuntime sizes the KV pool from the options and the model.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "kernels/backend.h"
#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/simd_level.h"
#include "kernels/neuron/neuron_options.h"
#include "kvcache/kv_cache_config.h"
#include "model/model.h"
#include "scheduler/engine.h"

namespace pagoda {

struct RuntimeOptions {
  int32_t block_size = 16;
  std::string kv_dtype = "auto";        // auto | f32 | bf16 | f16 | fp8_e4m3
  int64_t num_blocks = 0;               // 0: from kv_memory_bytes
  int64_t kv_memory_bytes = 1ll << 30;  // pool budget when num_blocks is 0 (capped at need)
  bool enable_prefix_caching = true;
  SchedulerConfig scheduler;
  int32_t max_waiting_requests = 1024;
  int32_t max_model_len = 0;    // 0: the model's context length
  std::string backend = "cpu";  // cpu | neuron
  int32_t threads = 0;          // CPU backend arena workers (0: one per core)
  NeuronOptions neuron;         // backend == "neuron"
  // CPU backend kernels (kernels/cpu/cpu_backend.h CpuBackendOptions): the SIMD level cap and
  // the F16 batch mode, set from the command line (tools/kernels_flag.h).
  cpu::SimdLevel max_simd_level = cpu::kMaxSimdLevel;
  cpu::mm::F16Matmul f16_matmul = cpu::mm::kDefaultF16Matmul;
};

struct Runtime {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Engine> engine;
};

// The KV cache dtype BuildRuntime uses for `kv_dtype`: "auto" is f32 for a model with an F32
// embedding, else f16; an unknown name is INVALID_ARGUMENT.
Result<KvDtype> ResolveKvDtype(const Model& model, const std::string& kv_dtype);

// Errors name the bad option. `model` must outlive the runtime.
Result<Runtime> BuildRuntime(const Model& model, const RuntimeOptions& options);

}  // namespace pagoda
