// attention_block_tkg: the fused decode (token generation) attention sublayer of one layer for
// all decode tokens of a step (docs/seed-kernels.md section 2, CPU port). No residual add.
//
// Per token t (rows of x/out; sequence b owns rows [q_start, q_start + q_len), q_len = S_tkg >= 1,
// ragged S per sequence allowed):
//   1. xn  = RmsNorm(x_t) * attn_norm                          (eps always explicit: rms_eps)
//   2. q,k,v = Wq xn (+bq), Wk xn (+bk), Wv xn (+bv)            three WeightViews [out][in] like
//      LayerWeights, or ONE packed WeightView wqkv [q_dim + 2*kv_dim][hidden] whose rows are
//      Q | K | V, head-major (row n*d + i = Q head n; q_dim + k*d + i = K head k; ...)
//   3. optional per-head RmsNorm of Q and K (gammas q_norm_pre / k_norm_pre, [head_dim], empty =
//      no gamma), eps qk_norm_eps; V is never normalised
//   4. RoPE of Q and K at positions[t] exactly as ops.h ApplyRope (rope_dim dims of each head,
//      theta_i = pos * rope_inv_freq[i] when the table is given (RopeInvFreq: RoPE scaling),
//      else pos * rope_base^(-2i/rope_dim); halves or interleaved); rope_dim 0 disables it
//   5. optional per-head RmsNorm of Q and K after RoPE (q_norm_post / k_norm_post)
//   6. K, V rounded to the cache dtype (fp8: quantized with kv.k_scale / v_scale): these values
//      are what attention uses and what is written (docs/seed-kernels.md 2.7.0)
//   7. attention of every new token over its sequence's cache context [0, ctx_len) (through its
//      block table; entries < 0 skipped) plus the new tokens 0..s of the same step (causal),
//      GQA kv head h / g, sliding window (keys at logical positions > pos - window, where new
//      token s sits at ctx_len + s), sinks (raw logit per q head in the denominator only),
//      masked = -inf, a row with no visible key gives 0. Flash-decoding: the context is split
//      into tiles of >= 256 keys when there are fewer (sequence, kv head) pairs than
//      4 * threads; partials are merged with their (max, sum) statistics. Each task handles all
//      g query heads (x S tokens) of its kv head together, so every K/V row is read once per
//      task (register-blocked AVX-512 / AVX2 / portable tile kernels, attention_simd.h).
//   8. cache write AFTER attention: slot = slots[t] = block * block_size + offset writes K/V of
//      every kv head at [block][h][offset]; skipped when slot < 0 or >= num_blocks * block_size
//   9. out_t = Wo attn_t (+bo)
// Softmax scale default 1/sqrt(head_dim); fp8 scales are handled inside (paged_kv.h), so the
// caller passes the logical scale and an unscaled Wo.
//
// Layouts: x, out [T][hidden]; positions, slots [T]; attention output (internal, and the
// PagedDecodeAttention API) [T][n_heads][head_dim]; new K/V [T][n_kv_heads][head_dim].
// No heap allocation per call in this file: every buffer lives in the TkgWorkspace (mm::MatMul
// keeps its conversion buffers per thread, grown to the largest shape seen).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/attention/paged_kv.h"
#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/simd_level.h"
#include "kernels/cpu/thread_team.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace pagoda::cpu {

struct TkgConfig {
  int32_t hidden = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;  // must equal kv.n_kv_heads
  int32_t head_dim = 0;    // must equal kv.head_dim
  float rms_eps = 0.0f;    // input RmsNorm eps, > 0
  bool qk_norm_pre_rope = false;
  bool qk_norm_post_rope = false;
  float qk_norm_eps = 1e-6f;
  int32_t rope_dim = 0;  // 0: no RoPE; else even and <= head_dim
  float rope_base = 10000.0f;
  // [rope_dim / 2] inverse frequencies (model_config.h RopeInvFreq), or empty to use rope_base
  // unscaled. Not owned: must outlive the call.
  std::span<const double> rope_inv_freq;
  RopeLayout rope_layout = RopeLayout::kHalves;
  std::optional<float> softmax_scale;  // default 1/sqrt(head_dim); finite and > 0
  int32_t sliding_window = 0;          // 0: none
};

struct TkgWeights {
  std::span<const float> attn_norm;   // [hidden]
  WeightView wq, wk, wv;              // used when wqkv.data == nullptr
  WeightView wqkv;                    // packed [q_dim + 2*kv_dim][hidden], optional
  std::span<const float> bq, bk, bv;  // [q_dim], [kv_dim] x2, each optional
  WeightView wo;                      // [hidden][q_dim]
  std::span<const float> bo;          // [hidden], optional
  std::span<const float> q_norm_pre, k_norm_pre, q_norm_post, k_norm_post;  // [head_dim] or empty
  std::span<const float> sinks;                                             // [n_heads] or empty
};

struct TkgArgs {
  std::span<const AttnSeq> seqs;       // rows of x/out, increasing and non-overlapping
  std::span<const float> x;            // [T][hidden]
  std::span<const int32_t> positions;  // [T] RoPE positions (normally ctx_len + s)
  std::span<const int32_t> slots;      // [T] cache slots to write (< 0: skip)
  PagedKvView kv;                      // read for the context, written at `slots`
  std::span<float> out;                // [T][hidden]
  // The weights of the caller's next matmul on the team (mm::MatMulOptions::prefetch_next of
  // the block's output projection); empty: none.
  std::span<const WeightView* const> next_weights = {};
};

// Capacity of a workspace; a call fails (RESOURCE_EXHAUSTED) if it needs more.
struct TkgWorkspaceDims {
  int32_t max_tokens = 0;          // T per call
  int32_t max_seqs = 0;            // sequences per call
  int32_t max_tokens_per_seq = 8;  // S_tkg per sequence
  int32_t hidden = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t max_splits = 16;  // flash-decoding context splits per (sequence, kv head)
  // The longest context a call may see (0: not known). AttentionBlockTkg splits a context at
  // fixed positions -- multiples of max(256, max_context / max_splits) rounded up to 64 -- so a
  // query's result does not depend on the batch or on how many tokens its sequence runs.
  int64_t max_context = 0;
  int32_t max_threads = 0;  // 0: Concurrency(team) (thread_team.h) at creation
  // Where the calls' parallel loops run (the attention's and the block's matmuls): this team
  // (not owned: must outlive the workspace; size() <= max_threads), or oneTBB's current arena
  // when null.
  ThreadTeam* team = nullptr;
  // Highest SIMD level (simd_level.h) of the attention and of the block's matmuls; the CPU's
  // best by default. The backend passes its cap; tests lower it to run the AVX2 and portable
  // kernels on an AVX-512 machine.
  SimdLevel max_simd = kMaxSimdLevel;
  mm::F16Matmul f16_matmul = mm::kDefaultF16Matmul;  // the block's F16 matmuls in batches
  bool batch_invariant = false;                      // the block's matmuls (mm::MatMulOptions)
};

// Every buffer attention_block_tkg needs, allocated once. Not thread-safe: one call at a time.
class TkgWorkspace {
 public:
  static Result<TkgWorkspace> Create(const TkgWorkspaceDims& dims);
  const TkgWorkspaceDims& dims() const { return dims_; }

  struct Task {  // one (sequence, kv head, context split)
    int32_t seq, kv_head;
    int64_t ctx_begin, ctx_end;
    bool with_new;    // this split also scans the new tokens
    int64_t partial;  // float offset of its [rows][d] o, then m[rows], l[rows]
  };
  struct Group {  // one (sequence, kv head): tasks [first_task, first_task + n_tasks)
    int32_t seq, kv_head, first_task, n_tasks;
  };

 private:
  friend class TkgRunner;
  TkgWorkspaceDims dims_;
  std::vector<float> xn_, qkv_, q_, k_, v_, attn_, ones_, partials_, thread_scratch_;
  std::vector<Task> tasks_;
  std::vector<Group> groups_;
  std::vector<AttnSeq> pieces_;  // the call's sequences cut to max_tokens_per_seq (keys in cache)
  size_t thread_scratch_floats_ = 0;
};

// Step 7 alone (attention of new tokens whose Q/K/V are given; nothing is written to the cache):
//   q [T][n_heads][d], k, v [T][n_kv_heads][d] (logical values), out [T][n_heads][d].
struct PagedDecodeAttentionArgs {
  std::span<const AttnSeq> seqs;
  std::span<const float> q, k, v;
  PagedKvView kv;
  int32_t n_heads = 0;
  std::optional<float> softmax_scale;
  int32_t sliding_window = 0;
  std::span<const float> sinks;  // [n_heads] or empty
  std::span<float> out;
};
Status PagedDecodeAttention(const PagedDecodeAttentionArgs& args, TkgWorkspace& ws);

// The whole fused sublayer (steps 1-9). INVALID_ARGUMENT for inconsistent shapes/config,
// RESOURCE_EXHAUSTED when the workspace is too small; nothing is written then.
Status AttentionBlockTkg(const TkgConfig& config, const TkgWeights& weights, const TkgArgs& args,
                         TkgWorkspace& ws);

}  // namespace pagoda::cpu
