#include "kernels/cpu/attention/attention_core.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/cpu/attention/kv_convert.h"
#include "kernels/cpu/portable_math.h"

// ExpInPlace is a plain fp32 loop GCC auto-vectorizes, in PAGODA_SIMD_CLONES (portable_math.h).
// The tile kernels live in attention_simd.h.

namespace pagoda::cpu::attn {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A kF16 cache's tiles are read in place (each vector load converts) for up to this many query
// rows, decoded once into fp32 tile buffers for more (their K rows are loaded once per 4 rows).
constexpr int32_t kInPlaceF16MaxRows = 8;

// One tile of up to kKeyTile keys: row pointers (fp32 logical values, or with f16 the kF16
// cache's rows in place) and logical positions (increasing).
struct Tile {
  const float* k[kKeyTile];
  const float* v[kKeyTile];
  const uint16_t* k16[kKeyTile];
  const uint16_t* v16[kKeyTile];
  int64_t pos[kKeyTile];
  int n = 0;
  bool f16 = false;
};

// A run of `count` consecutive cache tokens: physical block, first offset, first position.
struct Run {
  int64_t block;
  int32_t off;
  int64_t pos;
  int count;
};

// The cache runs of one context tile (absent blocks left out).
struct TilePlan {
  Run runs[kKeyTile];
  int n_runs = 0;
  int n = 0;
};

// Raw row addresses of a planned tile, for prefetching.
struct PrefetchList {
  const char* k[kKeyTile];
  const char* v[kKeyTile];
};

// Plans the tile starting at *p (advanced past it): up to kKeyTile present keys, or none once
// the range is exhausted.
void PlanTile(const KeySet& keys, int64_t* p, TilePlan* plan) {
  const int32_t bs = keys.kv->block_size;
  const int64_t table_len = static_cast<int64_t>(keys.block_table.size());
  plan->n_runs = 0;
  plan->n = 0;
  while (plan->n < kKeyTile && *p < keys.ctx_end) {
    const int64_t blk = *p / bs;
    const int32_t off = static_cast<int32_t>(*p % bs);
    const int run = static_cast<int>(
        std::min<int64_t>({bs - off, keys.ctx_end - *p, static_cast<int64_t>(kKeyTile - plan->n)}));
    const int64_t phys = blk < table_len ? keys.block_table[blk] : -1;
    if (phys >= 0 && phys < keys.kv->num_blocks) {
      plan->runs[plan->n_runs++] = {phys, off, *p, run};
      plan->n += run;
    }
    *p += run;
  }
}

// Appends a run to the tile: fp32 and (t.f16) fp16 rows in place, other dtypes decoded into the
// tile buffers.
void AddCacheRun(const KeySet& keys, const Run& run, const TileScratch& s, Tile& t) {
  const PagedKvView& kv = *keys.kv;
  const int32_t d = kv.head_dim;
  const int64_t e = kv.offset(run.block, keys.kv_head, run.off);
  if (t.f16) {
    const uint16_t* kb = static_cast<const uint16_t*>(kv.k) + e;
    const uint16_t* vb = static_cast<const uint16_t*>(kv.v) + e;
    for (int i = 0; i < run.count; ++i) {
      t.k16[t.n + i] = kb + static_cast<int64_t>(i) * d;
      t.v16[t.n + i] = vb + static_cast<int64_t>(i) * d;
    }
  } else if (kv.dtype == KvDtype::kF32) {
    const float* kb = static_cast<const float*>(kv.k) + e;
    const float* vb = static_cast<const float*>(kv.v) + e;
    for (int i = 0; i < run.count; ++i) {
      t.k[t.n + i] = kb + static_cast<int64_t>(i) * d;
      t.v[t.n + i] = vb + static_cast<int64_t>(i) * d;
    }
  } else {
    const size_t es = KvDtypeSize(kv.dtype);
    float* kd = s.kbuf + static_cast<int64_t>(t.n) * d;
    float* vd = s.vbuf + static_cast<int64_t>(t.n) * d;
    const int64_t n = static_cast<int64_t>(run.count) * d;
    kv::DecodeRow(kv.dtype, static_cast<const uint8_t*>(kv.k) + e * es, 1.0f / kv.k_scale, kd, n);
    kv::DecodeRow(kv.dtype, static_cast<const uint8_t*>(kv.v) + e * es, 1.0f / kv.v_scale, vd, n);
    for (int i = 0; i < run.count; ++i) {
      t.k[t.n + i] = kd + static_cast<int64_t>(i) * d;
      t.v[t.n + i] = vd + static_cast<int64_t>(i) * d;
    }
  }
  for (int i = 0; i < run.count; ++i) t.pos[t.n + i] = run.pos + i;
  t.n += run.count;
}

// The prefetch list of a planned tile (raw storage rows of any dtype).
Prefetch MakePrefetch(const KeySet& keys, const TilePlan& plan, PrefetchList& list) {
  const PagedKvView& kv = *keys.kv;
  const int64_t es = static_cast<int64_t>(KvDtypeSize(kv.dtype));
  int j = 0;
  for (int i = 0; i < plan.n_runs; ++i) {
    const Run& run = plan.runs[i];
    const int64_t e = kv.offset(run.block, keys.kv_head, run.off) * es;
    for (int x = 0; x < run.count; ++x, ++j) {
      list.k[j] = static_cast<const char*>(kv.k) + e + static_cast<int64_t>(x) * kv.head_dim * es;
      list.v[j] = static_cast<const char*>(kv.v) + e + static_cast<int64_t>(x) * kv.head_dim * es;
    }
  }
  return Prefetch{list.k, list.v, plan.n, static_cast<int32_t>(kv.head_dim * es)};
}

// True when some key of the tile is invisible to some row (causality or the window).
bool TileNeedsMask(const RowSet& rows, const Tile& t) {
  const int64_t last_q = rows.first_pos + rows.n_q - 1;
  const bool causal_ok = t.pos[t.n - 1] <= rows.first_pos;
  const bool window_ok = rows.window == 0 || t.pos[0] > last_q - rows.window;
  return !(causal_ok && window_ok);
}

// scores[r][j] = masked_score where key j is invisible to row r.
void ApplyMask(const RowSet& rows, const Tile& t, float* scores) {
  for (int32_t qi = 0; qi < rows.n_q; ++qi) {
    const int64_t qpos = rows.first_pos + qi;
    const int64_t lo = rows.window > 0 ? qpos - rows.window : INT64_MIN;
    for (int32_t hi = 0; hi < rows.g; ++hi) {
      float* s = scores + static_cast<int64_t>(qi * rows.g + hi) * kKeyTile;
      for (int j = 0; j < t.n; ++j) {
        if (!(t.pos[j] <= qpos && t.pos[j] > lo)) s[j] = rows.masked_score;
      }
    }
  }
}

// Turns row r's scores p[0, n) into exp(s - m_new) and folds the tile into its (m, l) and the
// scale of its o; p[n, n16) is padding. A tile that contributes nothing leaves p all zero.
void SoftmaxRow(const RowSet& rows, int32_t r, int n, float* p, const TileKernels& kern) {
  const int n16 = (n + 15) & ~15;
  std::fill(p + n, p + n16, kNegInf);
  const float mx = kern.row_max(p, n16);
  float& m = rows.m[r];
  // All keys of the tile masked: with -inf masking, or when a real score already dominates
  // (exp(-9984 - m) == 0 exactly), the tile contributes nothing.
  const float m_new = std::max(m, mx);
  if ((mx <= rows.masked_score && m >= rows.masked_score + 128.0f) || m_new == kNegInf) {
    std::fill(p, p + n, 0.0f);
    return;
  }
  const float alpha = std::exp(m - m_new);
  rows.l[r] = rows.l[r] * alpha + kern.exp_sum(p, n16, m_new);
  m = m_new;
  if (alpha != 1.0f) {
    kern.scale(rows.o + (r / rows.g) * rows.o_stride + static_cast<int64_t>(r % rows.g) * rows.d,
               rows.d, alpha);
  }
}

void ProcessTile(const RowSet& rows, const Tile& t, const TileScratch& s, const TileKernels& kern,
                 const Prefetch& pf) {
  const RowBlock rb{rows.q, rows.q_stride, rows.o, rows.o_stride, rows.g, rows.d, rows.rows()};
  if (t.f16) {
    kern.scores_f16(rb, t.k16, t.n, rows.scale, s.scores, kKeyTile, pf);
  } else {
    kern.scores(rb, t.k, t.n, rows.scale, s.scores, kKeyTile, pf);
  }
  if (TileNeedsMask(rows, t)) ApplyMask(rows, t, s.scores);
  for (int32_t r = 0; r < rows.rows(); ++r) {
    SoftmaxRow(rows, r, t.n, s.scores + static_cast<int64_t>(r) * kKeyTile, kern);
  }
  if (t.f16) {
    kern.accumulate_f16(rb, s.scores, kKeyTile, t.v16, t.n, pf);
  } else {
    kern.accumulate(rb, s.scores, kKeyTile, t.v, t.n, pf);
  }
}

// Context tiles in order; tile i + 1 is planned (and prefetched) while tile i is computed.
void AttendContext(const RowSet& rows, const KeySet& keys, const TileScratch& s,
                   const TileKernels& kern) {
  TilePlan plans[2];
  PrefetchList list;
  Tile t;
  t.f16 = keys.kv->dtype == KvDtype::kF16 && kern.scores_f16 != nullptr &&
          rows.rows() <= kInPlaceF16MaxRows;
  int64_t p = keys.ctx_begin;
  PlanTile(keys, &p, &plans[0]);
  for (int cur = 0; plans[cur].n > 0; cur ^= 1) {
    const TilePlan& plan = plans[cur];
    PlanTile(keys, &p, &plans[cur ^ 1]);
    t.n = 0;
    for (int i = 0; i < plan.n_runs; ++i) AddCacheRun(keys, plan.runs[i], s, t);
    ProcessTile(rows, t, s, kern, MakePrefetch(keys, plans[cur ^ 1], list));
  }
}

void AttendNew(const RowSet& rows, const KeySet& keys, const TileScratch& s,
               const TileKernels& kern) {
  Tile t;
  for (int64_t j0 = keys.new_begin; j0 < keys.new_end; j0 += kKeyTile) {
    t.n = static_cast<int>(std::min<int64_t>(kKeyTile, keys.new_end - j0));
    for (int i = 0; i < t.n; ++i) {
      t.k[i] = keys.new_k + (j0 + i) * keys.new_stride;
      t.v[i] = keys.new_v + (j0 + i) * keys.new_stride;
      t.pos[i] = keys.new_first_pos + j0 + i;
    }
    ProcessTile(rows, t, s, kern, Prefetch{});
  }
}

}  // namespace

// x[i] = exp(x[i]) with ExpPortable (portable_math.h), about 1 ulp; branch-free so it vectorizes.
PAGODA_SIMD_CLONES void ExpInPlace(float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = ExpPortable(x[i]);
}

size_t TileScratchFloats(int32_t rows, int32_t d) {
  return static_cast<size_t>(rows) * kKeyTile + 2 * static_cast<size_t>(kKeyTile) * d;
}

TileScratch MakeTileScratch(float* base, int32_t rows, int32_t d) {
  TileScratch s;
  s.scores = base;
  s.kbuf = base + static_cast<size_t>(rows) * kKeyTile;
  s.vbuf = s.kbuf + static_cast<size_t>(kKeyTile) * d;
  return s;
}

void InitRows(const RowSet& rows) {
  for (int32_t r = 0; r < rows.rows(); ++r) {
    float* o = rows.o + (r / rows.g) * rows.o_stride + static_cast<int64_t>(r % rows.g) * rows.d;
    std::fill(o, o + rows.d, 0.0f);
    rows.m[r] = kNegInf;
    rows.l[r] = 0.0f;
  }
}

void AttendKeys(const RowSet& rows, const KeySet& keys, const TileScratch& scratch) {
  const TileKernels& kern = GetTileKernels(EffectiveSimdLevel(rows.simd, rows.d));
  if (keys.ctx_end > keys.ctx_begin) AttendContext(rows, keys, scratch, kern);
  if (keys.new_end > keys.new_begin) AttendNew(rows, keys, scratch, kern);
}

}  // namespace pagoda::cpu::attn
