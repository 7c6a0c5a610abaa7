#include "runtime/runtime.h"

#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/neuron/neuron_backend.h"

namespace pagoda {
namespace {

Result<KvCacheConfig> KvConfig(const Model& model, const RuntimeOptions& o) {
  KvCacheConfig kv;
  kv.block_size = o.block_size;
  kv.n_layers = model.config.n_layers;
  kv.n_kv_heads = model.config.n_kv_heads;
  kv.head_dim = model.config.head_dim;
  kv.enable_prefix_caching = o.enable_prefix_caching;
  PAGODA_ASSIGN_OR_RETURN(kv.dtype, ResolveKvDtype(model, o.kv_dtype));
  if (o.block_size < 1 || o.block_size > 256 || (o.block_size & (o.block_size - 1))) {
    return InvalidArgument("kv_cache.block_size: " + std::to_string(o.block_size) +
                           " (expected a power of two in 1..256)");
  }
  if (o.num_blocks > 0) {
    kv.num_blocks = o.num_blocks;
  } else {
    // Enough for every sequence slot to reach the full context, within the memory budget.
    const int64_t blocks_per_seq = (model.config.context_length + o.block_size - 1) / o.block_size;
    const int64_t need = blocks_per_seq * o.scheduler.max_num_seqs + 1;
    kv.num_blocks = std::max<int64_t>(1, std::min(need, o.kv_memory_bytes / KvBytesPerBlock(kv)));
  }
  return kv;
}

}  // namespace

Result<KvDtype> ResolveKvDtype(const Model& model, const std::string& kv_dtype) {
  if (kv_dtype != "auto") return ParseKvDtype(kv_dtype);
  return model.weights.token_embd.type == GgmlType::kF32 ? KvDtype::kF32 : KvDtype::kF16;
}

Result<Runtime> BuildRuntime(const Model& model, const RuntimeOptions& o) {
  PAGODA_RETURN_IF_ERROR(ValidateSchedulerConfig(o.scheduler));
  cpu::CpuBackendOptions bo;
  PAGODA_ASSIGN_OR_RETURN(bo.kv_cache, KvConfig(model, o));
  bo.max_num_batched_tokens = o.scheduler.max_num_batched_tokens;
  bo.max_num_seqs = o.scheduler.max_num_seqs;
  bo.threads = o.threads;
  bo.max_simd_level = o.max_simd_level;
  bo.f16_matmul = o.f16_matmul;
  Runtime rt;
  if (o.backend == "neuron") {
    NeuronLimits limits{o.scheduler.max_num_seqs, o.scheduler.max_num_batched_tokens};
    PAGODA_ASSIGN_OR_RETURN(rt.backend, CreateNeuronBackend(model.config, o.neuron, limits));
  } else if (o.backend == "cpu") {
    PAGODA_ASSIGN_OR_RETURN(rt.backend, cpu::CpuBackend::Create(model.config, model.weights, bo));
  } else {
    return InvalidArgument("backend.type: '" + o.backend + "' (expected cpu or neuron)");
  }
  EngineConfig ec;
  ec.scheduler = o.scheduler;
  ec.enable_prefix_caching = o.enable_prefix_caching;
  ec.max_waiting_requests = o.max_waiting_requests;
  ec.max_model_len = o.max_model_len;
  if (model.tokenizer->eos_id() >= 0) ec.eos_token_ids.push_back(model.tokenizer->eos_id());
  PAGODA_ASSIGN_OR_RETURN(rt.engine, Engine::Create(*model.tokenizer, *rt.backend, ec));
  return rt;
}

}  // namespace pagoda
