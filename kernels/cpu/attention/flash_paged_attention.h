// flash_paged_attention: prefill / context-encoding attention over a paged KV cache for a varlen
// batch of sequence chunks (docs/seed-kernels.md section 1, CPU port with structured metadata
// instead of a dense mask).
//
// Per sequence s (AttnSeq): its chunk's new tokens are rows [q_start, q_start + q_len) of Q/K/V/O;
// its context is the ctx_len tokens at logical positions [0, ctx_len) already in the paged cache
// (logical block j = position / block_size lives in physical block block_table[j]; entries < 0
// contribute nothing and are never read). New token i sits at logical position ctx_len + i.
//
//   q   [T][n_heads][d]      fp32      (T = rows of q / (n_heads * d))
//   k,v [T][n_kv_heads][d]   fp32      new tokens' K/V (empty spans: context-only attention)
//   kv  paged cache view, see paged_kv.h ([num_blocks][n_kv_heads][block_size][d], any dtype)
//   out [T][n_heads][d]      fp32      rows not covered by any sequence are left untouched
//   max, lse [T][n_heads]    fp32      optional (empty spans: not written)
//
// Maths for query row (token i of sequence s, head h, kv head h / (n_heads / n_kv_heads)):
//   s_k = scale * <q, K_k> over the visible keys: context positions p < ctx_len with a valid
//   block and new tokens j <= i (causal); with sliding_window W > 0 only keys at positions
//   > pos(i) - W. Masked keys inside a scanned tile score kMaskedScore (-9984, docs/seed-kernels.md
//   1.3); as every row sees at least its own token, this equals -inf masking unless real scores
//   fall below about -9880 (accepted deviation, docs/seed-kernels.md section 4 item 10).
//   With sinks, sink[h] (a raw logit, not scaled) joins the softmax denominator only.
//   out = sum_k exp(s_k - lse) V_k; max = max(max_k s_k, sink_h); lse = log(sum_k exp(s_k)
//   [+ exp(sink_h)]) -- the denominator actually used for `out` (sink included when given).
//   A row with no visible key at all (context-only call, ctx_len 0) gets out = 0, max = lse = -inf.
// fp32 accumulation whatever the KV dtype (fp8 dequantized with kv.k_scale/v_scale, see
// paged_kv.h). Online softmax in tiles of 64 keys; parallel (args.team, else oneTBB) over
// (sequence, kv head, query tile).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "common/status.h"
#include "kernels/cpu/attention/paged_kv.h"
#include "kernels/cpu/simd_level.h"
#include "kernels/cpu/thread_team.h"

namespace pagoda::cpu {

inline constexpr float kMaskedScore = -9984.0f;

struct FlashPagedAttentionArgs {
  std::span<const AttnSeq> seqs;       // q ranges in increasing order, non-overlapping
  std::span<const float> q;            // [T][n_heads][head_dim]
  std::span<const float> k;            // [T][n_kv_heads][head_dim], or empty (context only)
  std::span<const float> v;            // same as k
  PagedKvView kv;                      // n_kv_heads and head_dim come from here
  int32_t n_heads = 0;                 // multiple of kv.n_kv_heads
  std::optional<float> softmax_scale;  // default 1/sqrt(head_dim); must be finite and > 0
  int32_t sliding_window = 0;          // 0: none; else keys at positions > pos - window
  std::span<const float> sinks;        // [n_heads] or empty
  std::span<float> out;                // [T][n_heads][head_dim]
  std::span<float> max;                // [T][n_heads] or empty
  std::span<float> lse;                // [T][n_heads] or empty
  // Highest SIMD level (simd_level.h; the CPU's best by default): the backend passes its cap,
  // tests lower it to run every level.
  SimdLevel max_simd = kMaxSimdLevel;
  ThreadTeam* team = nullptr;  // where the loop runs (not owned); null: oneTBB's current arena
};

// Errors (INVALID_ARGUMENT, nothing written): bad kv view, n_heads % n_kv_heads != 0, sizes of
// q/k/v/out/max/lse/sinks, a sequence outside [0, T) or overlapping its predecessor, a block table
// shorter than ceil(ctx_len / block_size) or with an entry >= num_blocks, a bad scale or window.
Status FlashPagedAttention(const FlashPagedAttentionArgs& args);

}  // namespace pagoda::cpu
