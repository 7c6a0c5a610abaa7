// Shared inner engine of flash_paged_attention and attention_block_tkg (internal to
// kernels/cpu): online-softmax attention of a set of query rows that share one KV head over
// (a) a range of context positions read from the paged cache through a block table and
// (b) a range of the chunk's own new keys, in tiles of kKeyTile keys (the score matrix is never
// materialised beyond one [rows][kKeyTile] tile).
//
// Layouts:
//   rows  r = qi * g + hi  (query token qi of the task, q head hi within the GQA group)
//   q     row r at q + qi * q_stride + hi * d                      (fp32)
//   o     row r at o + qi * o_stride + hi * d, UNNORMALISED sum_k exp(s_k - m) V_k   (fp32)
//   m, l  [rows]: running max of the scores and running sum of exp(s_k - m)
//   paged K/V: see paged_kv.h; new keys j at new_k + j * new_stride (fp32, logical values)
// Scores are s = scale * <q, k>. A key at logical position kp is visible to a query at position
// qp iff kp <= qp and (window == 0 or kp > qp - window); invisible keys inside a scanned tile
// score `masked_score` (-9984 for prefill per docs/seed-kernels.md 1.3, -inf for decode).
// Per tile: scores of all rows x keys (register-blocked SIMD kernels, attention_simd.h), masking
// only when the tile holds a key some row cannot see, one exp pass per row, then the V pass;
// the next context tile's K/V rows are prefetched while the current one is computed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu/attention/attention_simd.h"
#include "kernels/cpu/attention/paged_kv.h"

namespace pagoda::cpu::attn {

inline constexpr int kKeyTile = 64;

struct RowSet {
  const float* q = nullptr;
  int64_t q_stride = 0;
  float* o = nullptr;
  int64_t o_stride = 0;
  float* m = nullptr;
  float* l = nullptr;
  int32_t n_q = 0;
  int32_t g = 1;
  int32_t d = 0;
  int64_t first_pos = 0;  // logical position of query token 0
  float scale = 1.0f;
  float masked_score = -9984.0f;
  int32_t window = 0;              // 0: no sliding window
  SimdLevel simd = kMaxSimdLevel;  // highest kernel level to use (capped by the CPU)
  int32_t rows() const { return n_q * g; }
};

struct KeySet {
  const PagedKvView* kv = nullptr;
  std::span<const int32_t> block_table;  // entries < 0 are skipped (never dereferenced)
  int32_t kv_head = 0;
  int64_t ctx_begin = 0;  // cache positions [ctx_begin, ctx_end)
  int64_t ctx_end = 0;
  const float* new_k = nullptr;  // new key j: new_k + j * new_stride
  const float* new_v = nullptr;
  int64_t new_stride = 0;
  int64_t new_begin = 0;  // new keys [new_begin, new_end)
  int64_t new_end = 0;
  int64_t new_first_pos = 0;  // logical position of new key 0 (= ctx_len)
};

// Per-task scratch: scores [rows][kKeyTile], then K and V tile buffers [kKeyTile][d] each.
struct TileScratch {
  float* scores = nullptr;
  float* kbuf = nullptr;
  float* vbuf = nullptr;
};
size_t TileScratchFloats(int32_t rows, int32_t d);
TileScratch MakeTileScratch(float* base, int32_t rows, int32_t d);

// x[i] = exp(x[i]) for x[i] <= ~88 (softmax use: x <= 0); below -87 (and -inf) gives 0.
// Relative error < 1e-6. Vectorized.
void ExpInPlace(float* x, int n);

// o = 0, m = -inf, l = 0 for every row.
void InitRows(const RowSet& rows);
// Folds every visible key of `keys` into the rows' running state.
void AttendKeys(const RowSet& rows, const KeySet& keys, const TileScratch& scratch);

// The lowest logical key position a query at first_pos (or later) can see; without a window a
// large negative number that is still safe to subtract from.
inline int64_t WindowLow(int64_t first_pos, int32_t window) {
  return window > 0 ? first_pos - window + 1 : -(int64_t{1} << 62);
}

}  // namespace pagoda::cpu::attn
