// PagedKvView: a non-owning description of ONE layer's paged KV cache, as the CPU attention
// kernels read (and attention_block_tkg writes) it. It deliberately knows nothing about the
// kvcache manager classes: the backend fills it from KvPool (kernels/cpu/kv_pool.h) per layer.
//
// Memory layout (docs/seed-kernels.md 0.1), for K and for V separately:
//   k, v : [num_blocks][n_kv_heads][block_size][head_dim]   elements of `dtype`
// so K of (block b, kv head h, token offset o) starts at element
//   ((b * n_kv_heads + h) * block_size + o) * head_dim.
// With KvPool's per-layer buffer [2][num_blocks][...], k = layer_data, v = k + strides().kv.
//
// Element encodings: kF32 = float, kBf16 / kF16 = uint16_t bits, kFp8E4m3 = uint8_t bits of
// OCP float8_e4m3fn (max 448, round-to-nearest-even, saturating; identical to
// common/numerics.h). fp8 scale convention (docs/seed-kernels.md 2.7.0, same as KvPool): k_scale
// and v_scale are MULTIPLIERS on the way into fp8, stored = fp8(clamp(x * scale)). The kernels
// dequantize to the logical value decode(stored) / scale, so callers never compensate for the
// scales themselves (no softmax_scale / k_scale, no W_out / v_scale). For other dtypes the
// scales must be 1.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "kvcache/kv_types.h"

namespace pagoda::cpu {

struct PagedKvView {
  void* k = nullptr;  // [num_blocks][n_kv_heads][block_size][head_dim]
  void* v = nullptr;  // same layout
  KvDtype dtype = KvDtype::kF32;
  int32_t num_blocks = 0;
  int32_t n_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;
  float k_scale = 1.0f;  // fp8 only: stored = fp8(k * k_scale)
  float v_scale = 1.0f;  // fp8 only: stored = fp8(v * v_scale)

  int64_t num_slots() const { return static_cast<int64_t>(num_blocks) * block_size; }
  // Element offset of (block, kv head, token offset) in k or v.
  int64_t offset(int64_t block, int32_t kv_head, int32_t token) const {
    return ((block * n_kv_heads + kv_head) * block_size + token) * static_cast<int64_t>(head_dim);
  }
};

// InvalidArgument naming the first bad field: null pointers, non-positive dims,
// non-finite or non-positive scales, or scales != 1 for a non-fp8 dtype.
Status ValidatePagedKv(const PagedKvView& kv);

// One sequence's slice of a varlen attention call (both attention kernels). Its new tokens are
// rows [q_start, q_start + q_len) of the call's token arrays; its context is the ctx_len tokens at
// logical positions [0, ctx_len) already in the cache; new token i sits at position ctx_len + i.
// Logical block j (positions [j*block_size, (j+1)*block_size)) lives in physical block
// block_table[j]; entries < 0 are absent: never read, their positions are masked.
struct AttnSeq {
  int32_t q_start = 0;
  int32_t q_len = 0;
  int32_t ctx_len = 0;
  std::span<const int32_t> block_table;  // >= ceil(ctx_len / block_size) entries
};

// InvalidArgument unless every sequence has q_start, q_len, ctx_len >= 0, lies inside
// [0, n_rows), starts at or after the end of its predecessor, and has a block table covering
// ctx_len whose entries are < kv.num_blocks.
Status ValidateAttnSeqs(std::span<const AttnSeq> seqs, int64_t n_rows, const PagedKvView& kv);

}  // namespace pagoda::cpu
