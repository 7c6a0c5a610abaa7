#include "kernels/cpu/cpu_backend.h"

#include <tbb/info.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <thread>

#include "kernels/cpu/attention/flash_paged_attention.h"
#include "kernels/cpu/attention/kv_convert.h"
#include "kernels/cpu/ops.h"
#include "kernels/step_batch_check.h"

namespace pagoda::cpu {
namespace {

// Writes new K/V rows [n][n_kv_heads][d] (logical fp32) into the paged cache at `slots`
// (slots < 0 or past the pool are skipped).
void WriteKv(const PagedKvView& kv, const float* k, const float* v,
             std::span<const int32_t> slots) {
  const size_t elem = KvDtypeSize(kv.dtype);
  const int64_t d = kv.head_dim;
  for (size_t t = 0; t < slots.size(); ++t) {
    const int32_t slot = slots[t];
    if (slot < 0 || slot >= kv.num_slots()) continue;
    const int32_t block = slot / kv.block_size, off = slot % kv.block_size;
    for (int32_t h = 0; h < kv.n_kv_heads; ++h) {
      const int64_t src = (static_cast<int64_t>(t) * kv.n_kv_heads + h) * d;
      const int64_t dst = kv.offset(block, h, off) * static_cast<int64_t>(elem);
      kv::EncodeRow(kv.dtype, k + src, kv.k_scale, static_cast<std::byte*>(kv.k) + dst, d);
      kv::EncodeRow(kv.dtype, v + src, kv.v_scale, static_cast<std::byte*>(kv.v) + dst, d);
    }
  }
}

// Bytes of the step buffers sized by max_num_batched_tokens: the backend's activations and layer
// scratch, and the TKG workspace's (float rows of n_embd, q, k, v and n_ff per token).
int64_t StepBufferBytes(const ModelConfig& c, int64_t max_tokens) {
  const int64_t floats_per_token =
      4 * int64_t{c.n_embd} + 4 * int64_t{c.q_dim()} + 4 * int64_t{c.kv_dim()} + 2 * c.n_ff + 1;
  return max_tokens * floats_per_token * static_cast<int64_t>(sizeof(float));
}

int64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t{pages} * page : kInt64Max;
}

// Refuses a step budget whose buffers cannot fit this machine's memory, before allocating them
// (zero-filling them could otherwise bring in the OOM killer, or the allocator throw).
Status CheckStepBuffers(const ModelConfig& config, const StepLimits& limits) {
  const int64_t need = StepBufferBytes(config, limits.max_num_batched_tokens);
  const int64_t have = PhysicalMemoryBytes();
  if (need <= have / 2) return Status::Ok();
  return ResourceExhausted(
      "engine.max_num_batched_tokens: " + std::to_string(limits.max_num_batched_tokens) +
      " tokens per step need " + std::to_string(need >> 20) +
      " MiB of step buffers for this model, more than half of this machine's " +
      std::to_string(have >> 20) + " MiB of memory");
}

// Compute workers beyond a few per hardware thread only add switching (a small oversubscription
// is allowed: tests run 3 workers on 2 cores); thousands of threads are refused.
constexpr int64_t kMaxThreadsPerHardwareThread = 4;

Status CheckThreads(const CpuBackendOptions& options) {
  const int64_t hw = std::thread::hardware_concurrency();
  const int64_t max = hw * kMaxThreadsPerHardwareThread;
  if (hw == 0 || options.threads <= max) return Status::Ok();
  return InvalidArgument("backend.threads: " + std::to_string(options.threads) + " exceeds " +
                         std::to_string(kMaxThreadsPerHardwareThread) + " per hardware thread (" +
                         std::to_string(max) + " on this machine's " + std::to_string(hw) +
                         "; 0: one per core)");
}

}  // namespace

// Spinning threads that outnumber the cores would wait on each other's time slices.
std::shared_ptr<ThreadTeam> MakeThreadTeam(const CpuBackendOptions& options) {
  const int hw = tbb::info::default_concurrency();  // the hardware threads this process may use
  const int threads = options.threads > 0 ? int{options.threads} : hw;
  if (hw <= 0 || threads > hw || options.spin_us <= 0) return nullptr;
  return std::make_shared<ThreadTeam>(threads, std::chrono::microseconds(options.spin_us));
}

Status ValidateCpuBackendOptions(const CpuBackendOptions& options) {
  PAGODA_RETURN_IF_ERROR(CheckRange("backend.threads", options.threads, kCpuThreadsRange));
  return CheckRange("backend.spin_us", options.spin_us, kCpuSpinUsRange);
}

Result<std::unique_ptr<CpuBackend>> CpuBackend::Create(const ModelConfig& config,
                                                       const ModelWeights& weights,
                                                       const KvCacheConfig& kv_cache,
                                                       const StepLimits& limits,
                                                       const CpuBackendOptions& options) {
  return Create(config, weights, kv_cache, limits, options, MakeThreadTeam(options));
}

Result<std::unique_ptr<CpuBackend>> CpuBackend::Create(
    const ModelConfig& config, const ModelWeights& weights, const KvCacheConfig& kv_cache,
    const StepLimits& limits, const CpuBackendOptions& options, std::shared_ptr<ThreadTeam> team) {
  PAGODA_RETURN_IF_ERROR(ValidateCpuBackendOptions(options));
  PAGODA_RETURN_IF_ERROR(CheckThreads(options));
  if (limits.max_num_batched_tokens < 1 || limits.max_num_seqs < 1) {
    return InvalidArgument("step limits: max_num_batched_tokens and max_num_seqs must be >= 1");
  }
  PAGODA_RETURN_IF_ERROR(CheckStepBuffers(config, limits));
  try {
    return CreateChecked(config, weights, kv_cache, limits, options, std::move(team));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(
        "cpu backend: cannot allocate the KV pool, step buffers and packed weights (" +
        std::to_string(StepBufferBytes(config, limits.max_num_batched_tokens) >> 20) +
        " MiB for engine.max_num_batched_tokens)");
  }
}

bool BatchInvariant(const CpuBackendOptions& options, const ModelWeights& weights) {
  if (options.batch_invariance != BatchInvariance::kAuto) {
    return options.batch_invariance == BatchInvariance::kOn;
  }
  const SimdLevel level = EffectiveSimdLevel(options.max_simd_level);
  const auto free = [&](const WeightView& w) {
    const bool packed = options.pack_weights && mm::ReadsPackedRows(w.type, level);
    return w.data == nullptr || mm::FreeBatchInvariance(w.type, level, packed);
  };
  for (const LayerWeights& layer : weights.layers) {
    for (const WeightView* m : layer.matrices()) {
      if (!free(*m)) return false;
    }
  }
  return free(weights.output);
}

Result<std::unique_ptr<CpuBackend>> CpuBackend::CreateChecked(
    const ModelConfig& config, const ModelWeights& weights, const KvCacheConfig& kv_cache,
    const StepLimits& limits, const CpuBackendOptions& options, std::shared_ptr<ThreadTeam> team) {
  KvCacheConfig kv = kv_cache;
  kv.n_layers = config.n_layers;
  kv.n_kv_heads = config.n_kv_heads;
  kv.head_dim = config.head_dim;
  PAGODA_ASSIGN_OR_RETURN(KvPool pool, KvPool::Create(kv));
  TkgWorkspaceDims dims;
  dims.max_tokens = limits.max_num_batched_tokens;
  dims.max_seqs = std::min(limits.max_num_seqs, limits.max_num_batched_tokens);
  dims.max_tokens_per_seq = kMaxDecodeTokensPerSeq;  // speculative verification: k + 1
  dims.max_context = config.context_length;
  dims.hidden = config.n_embd;
  dims.n_heads = config.n_heads;
  dims.n_kv_heads = config.n_kv_heads;
  dims.head_dim = config.head_dim;
  dims.max_threads =
      std::max({options.threads, tbb::this_task_arena::max_concurrency(), Concurrency(team.get())});
  dims.team = team.get();
  dims.max_simd = options.max_simd_level;
  dims.f16_matmul = options.f16_matmul;
  dims.batch_invariant = BatchInvariant(options, weights);
  PAGODA_ASSIGN_OR_RETURN(TkgWorkspace ws, TkgWorkspace::Create(dims));
  return std::unique_ptr<CpuBackend>(new CpuBackend(
      config, weights, std::move(pool), std::move(team), std::move(ws), limits, options));
}

CpuBackend::CpuBackend(const ModelConfig& config, const ModelWeights& weights, KvPool pool,
                       std::shared_ptr<ThreadTeam> team, TkgWorkspace workspace,
                       const StepLimits& limits, const CpuBackendOptions& options)
    : config_(config),
      weights_(options.pack_weights
                   ? packed_.Pack(weights, EffectiveSimdLevel(options.max_simd_level))
                   : weights),
      pool_(std::move(pool)),
      team_(std::move(team)),
      tkg_(std::move(workspace)),
      matmul_{options.max_simd_level, options.f16_matmul, tkg_.dims().batch_invariant, team_.get()},
      rope_inv_freq_(RopeInvFreq(config)),
      arena_(std::make_unique<tbb::task_arena>(
          options.threads > 0 ? int{options.threads} : int{tbb::task_arena::automatic})) {
  caps_.name = "cpu";
  caps_.multi_token_logits = true;
  caps_.batch_invariant = matmul_.batch_invariant;
  caps_.max_num_batched_tokens = limits.max_num_batched_tokens;
  caps_.max_num_seqs = limits.max_num_seqs;
  caps_.max_model_len = config.context_length;
  caps_.num_blocks = pool_.num_blocks();
  caps_.block_size = pool_.config().block_size;
  caps_.kernels = SimdLevelName(EffectiveSimdLevel(options.max_simd_level));
  caps_.packed_weight_bytes = packed_.bytes();
  const size_t n = static_cast<size_t>(limits.max_num_batched_tokens);
  scratch_.Reserve(config, static_cast<int64_t>(n));
  x_.resize(n * config.n_embd);
  attn_out_.resize(n * config.n_embd);
  attn_.resize(n * config.q_dim());
  positions_.resize(n);
}

PagedKvView CpuBackend::LayerView(int layer) {
  PagedKvView kv;
  kv.k = pool_.layer_data(layer);
  kv.v = pool_.layer_data(layer) + pool_.strides().kv * static_cast<int64_t>(pool_.element_size());
  kv.dtype = pool_.dtype();
  kv.num_blocks = pool_.num_blocks();
  kv.n_kv_heads = config_.n_kv_heads;
  kv.block_size = pool_.config().block_size;
  kv.head_dim = config_.head_dim;
  kv.k_scale = pool_.k_scale(layer);
  kv.v_scale = pool_.v_scale(layer);
  return kv;
}

Status CpuBackend::Validate(const StepBatch& b, std::span<float> logits) const {
  return ValidateStepBatch(
      b, logits.size(), caps_, config_.vocab_size, config_.context_length,
      [](int64_t) { return OutOfRange("seqs: past the model's context length"); });
}

Status CpuBackend::Execute(const StepBatch& b, std::span<float> logits) {
  Status status;
  arena_->execute([&] { status = ExecuteInArena(b, logits); });
  return status;
}

Status CpuBackend::ExecuteInArena(const StepBatch& b, std::span<float> logits) {
  PAGODA_RETURN_IF_ERROR(Validate(b, logits));
  PAGODA_RETURN_IF_ERROR(pool_.CopyBlocks(b.block_copies));
  const int64_t n = static_cast<int64_t>(b.token_ids.size());
  // A decode-only step takes the fused TKG path. A step with any prefill chunk runs every row,
  // its decodes too, through the prefill path (flash paged attention takes q_len 1 sequences
  // with cached context), so each weight is read once per step instead of once per path.
  // Batch-invariant: every step takes the TKG path (one summation order for a token wherever it
  // runs).
  const bool tkg_path =
      matmul_.batch_invariant ||
      std::all_of(b.seqs.begin(), b.seqs.end(), [](const StepSequence& s) { return s.is_decode; });
  decode_seqs_.clear();
  prefill_seqs_.clear();
  for (const StepSequence& s : b.seqs) {
    for (int32_t i = 0; i < s.query_len; ++i) {
      positions_[s.query_start + i] = s.num_computed_tokens + i;
    }
    (tkg_path ? decode_seqs_ : prefill_seqs_)
        .push_back(AttnSeq{s.query_start, s.query_len, s.num_computed_tokens, s.block_table});
  }
  for (int64_t t = 0; t < n; ++t) {
    EmbeddingRow(weights_.token_embd, b.token_ids[t], x_.data() + t * config_.n_embd);
  }
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    PAGODA_RETURN_IF_ERROR(tkg_path ? DecodeAttention(layer, b, static_cast<int32_t>(n))
                                    : PrefillAttention(layer, b));
    for (int64_t i = 0; i < n * config_.n_embd; ++i) x_[i] += attn_out_[i];
    Mlp(layer, n);
  }
  Logits(b, logits);
  return Status::Ok();
}

Status CpuBackend::DecodeAttention(int layer, const StepBatch& b, int32_t rows) {
  const LayerWeights& w = weights_.layers[layer];
  TkgConfig c;
  c.hidden = config_.n_embd;
  c.n_heads = config_.n_heads;
  c.n_kv_heads = config_.n_kv_heads;
  c.head_dim = config_.head_dim;
  c.rms_eps = config_.rms_eps;
  c.rope_dim = config_.rope_dim;
  c.rope_base = config_.rope_theta;
  c.rope_inv_freq = rope_inv_freq_;
  c.rope_layout = config_.rope_layout;
  c.qk_norm_pre_rope = config_.has_qk_norm;
  c.qk_norm_eps = config_.rms_eps;
  c.sliding_window = config_.sliding_window;
  TkgWeights tw;
  tw.attn_norm = w.attn_norm;
  tw.wq = w.wq, tw.wk = w.wk, tw.wv = w.wv, tw.wo = w.wo;
  tw.bq = w.bq, tw.bk = w.bk, tw.bv = w.bv;
  tw.q_norm_pre = w.q_norm, tw.k_norm_pre = w.k_norm;
  TkgArgs args;
  args.seqs = decode_seqs_;
  args.x = std::span<const float>(x_.data(), size_t(rows) * config_.n_embd);
  args.positions = std::span<const int32_t>(positions_.data(), rows);
  args.slots = b.slot_mapping.subspan(0, rows);
  args.kv = LayerView(layer);
  args.out = std::span<float>(attn_out_.data(), size_t(rows) * config_.n_embd);
  const WeightView* gate_up[] = {&w.w_gate, &w.w_up};
  args.next_weights = gate_up;
  return AttentionBlockTkg(c, tw, args, tkg_);
}

Status CpuBackend::PrefillAttention(int layer, const StepBatch& b) {
  const LayerWeights& w = weights_.layers[layer];
  const auto& c = config_;
  const int64_t n = static_cast<int64_t>(b.token_ids.size());
  QkvRope(c, w, x_.data(), n, positions_.data(), rope_inv_freq_, matmul_, scratch_);
  const PagedKvView kv = LayerView(layer);
  // Attention uses the values the cache holds, so chunked and decode paths agree.
  kv::RoundTripRow(kv.dtype, kv.k_scale, scratch_.k.data(), n * c.kv_dim());
  kv::RoundTripRow(kv.dtype, kv.v_scale, scratch_.v.data(), n * c.kv_dim());
  FlashPagedAttentionArgs a;
  a.seqs = prefill_seqs_;
  a.q = std::span<const float>(scratch_.q.data(), n * c.q_dim());
  a.k = std::span<const float>(scratch_.k.data(), n * c.kv_dim());
  a.v = std::span<const float>(scratch_.v.data(), n * c.kv_dim());
  a.kv = kv;
  a.n_heads = c.n_heads;
  a.sliding_window = c.sliding_window;
  a.out = std::span<float>(attn_.data(), n * c.q_dim());
  a.max_simd = matmul_.max_level;
  a.team = team_.get();
  PAGODA_RETURN_IF_ERROR(FlashPagedAttention(a));
  WriteKv(kv, scratch_.k.data(), scratch_.v.data(), b.slot_mapping);
  mm::MatMul(w.wo, attn_.data(), n, attn_out_.data(), matmul_);
  return Status::Ok();
}

// The down projection hands the team the next layer's q, k, v (or the output matrix) to
// prefetch.
void CpuBackend::Mlp(int layer, int64_t n) {
  const WeightView* next[3] = {&weights_.output};
  std::span<const WeightView* const> next_weights(next, 1);
  if (layer + 1 < config_.n_layers) {
    const LayerWeights& w = weights_.layers[layer + 1];
    next[0] = &w.wq, next[1] = &w.wk, next[2] = &w.wv;
    next_weights = std::span<const WeightView* const>(next, 3);
  }
  AddMlp(config_, weights_.layers[layer], x_.data(), n, matmul_, scratch_, next_weights);
}

void CpuBackend::Logits(const StepBatch& b, std::span<float> logits) {
  int64_t rows = 0;
  for (const StepSequence& s : b.seqs) {
    for (int64_t t = s.query_start + s.query_len - s.num_logits; t < s.query_start + s.query_len;
         ++t) {
      RmsNorm(x_.data() + t * config_.n_embd, weights_.output_norm.data(), config_.n_embd,
              config_.rms_eps, scratch_.h.data() + rows * config_.n_embd);
      ++rows;
    }
  }
  if (rows > 0) mm::MatMul(weights_.output, scratch_.h.data(), rows, logits.data(), matmul_);
}

}  // namespace pagoda::cpu
