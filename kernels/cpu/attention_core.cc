#include "kernels/cpu/attention_core.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/cpu/kv_convert.h"

// Hot loops are plain fp32 loops GCC auto-vectorizes; PAGODA_SIMD_CLONES adds an AVX2+FMA
// clone chosen at load time by the ifunc resolver (runtime dispatch), keeping a portable default.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PAGODA_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define PAGODA_SIMD_CLONES
#endif

namespace pagoda::cpu::attn {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One tile of up to kKeyTile keys: row pointers (fp32 logical values) and logical positions.
struct Tile {
  const float* k[kKeyTile];
  const float* v[kKeyTile];
  int64_t pos[kKeyTile];
  int n = 0;
};

[[gnu::always_inline]] inline float Dot(const float* a, const float* b, int32_t n) {
  float acc[8] = {};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += a[i] * b[i];
  return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// o[x] += sum_{j<4} p[j] * v[j][x]
[[gnu::always_inline]] inline void Axpy4(float* __restrict o, const float* p, const float* const* v,
                                         int32_t d) {
  const float* __restrict v0 = v[0];
  const float* __restrict v1 = v[1];
  const float* __restrict v2 = v[2];
  const float* __restrict v3 = v[3];
  const float p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
  for (int32_t x = 0; x < d; ++x) o[x] += (p0 * v0[x] + p1 * v1[x]) + (p2 * v2[x] + p3 * v3[x]);
}

[[gnu::always_inline]] inline void Axpy1(float* __restrict o, float p, const float* __restrict v,
                                         int32_t d) {
  for (int32_t x = 0; x < d; ++x) o[x] += p * v[x];
}

// Appends `count` consecutive cache tokens (physical block `block`, offsets from `off`, logical
// positions from `pos`) to the tile, decoding them into the tile buffers unless fp32.
void AddCacheRun(const KeySet& keys, int64_t block, int32_t off, int64_t pos, int count,
                 const TileScratch& s, Tile& t) {
  const PagedKvView& kv = *keys.kv;
  const int32_t d = kv.head_dim;
  const int64_t e = kv.offset(block, keys.kv_head, off);
  if (kv.dtype == PagedKvDtype::kF32) {
    const float* kb = static_cast<const float*>(kv.k) + e;
    const float* vb = static_cast<const float*>(kv.v) + e;
    for (int i = 0; i < count; ++i) {
      t.k[t.n + i] = kb + static_cast<int64_t>(i) * d;
      t.v[t.n + i] = vb + static_cast<int64_t>(i) * d;
    }
  } else {
    const size_t es = PagedKvElementSize(kv.dtype);
    float* kd = s.kbuf + static_cast<int64_t>(t.n) * d;
    float* vd = s.vbuf + static_cast<int64_t>(t.n) * d;
    const int64_t n = static_cast<int64_t>(count) * d;
    kv::DecodeRow(kv.dtype, static_cast<const uint8_t*>(kv.k) + e * es, 1.0f / kv.k_scale, kd, n);
    kv::DecodeRow(kv.dtype, static_cast<const uint8_t*>(kv.v) + e * es, 1.0f / kv.v_scale, vd, n);
    for (int i = 0; i < count; ++i) {
      t.k[t.n + i] = kd + static_cast<int64_t>(i) * d;
      t.v[t.n + i] = vd + static_cast<int64_t>(i) * d;
    }
  }
  for (int i = 0; i < count; ++i) t.pos[t.n + i] = pos + i;
  t.n += count;
}

// Software prefetch of a tile's K/V rows: paged blocks break the hardware prefetcher's streams.
void PrefetchRows(const float* const* p, int n, int32_t d) {
  for (int j = 0; j < n; ++j) {
    for (int32_t x = 0; x < d; x += 16) __builtin_prefetch(p[j] + x);
  }
}

// scores[r][j] = scale * <q_r, k_j>, or masked_score where key j is invisible to row r.
PAGODA_SIMD_CLONES void ScoreTile(const RowSet& rows, const Tile& t, float* scores) {
  const int32_t d = rows.d;
  PrefetchRows(t.k, std::min(t.n, 16), d);
  for (int32_t qi = 0; qi < rows.n_q; ++qi) {
    const int64_t qpos = rows.first_pos + qi;
    const int64_t lo = rows.window > 0 ? qpos - rows.window : INT64_MIN;
    for (int32_t hi = 0; hi < rows.g; ++hi) {
      const float* q = rows.q + qi * rows.q_stride + static_cast<int64_t>(hi) * d;
      float* s = scores + static_cast<int64_t>(qi * rows.g + hi) * kKeyTile;
      for (int j = 0; j < t.n; ++j) {
        const bool visible = t.pos[j] <= qpos && t.pos[j] > lo;
        s[j] = visible ? Dot(q, t.k[j], d) * rows.scale : rows.masked_score;
      }
    }
  }
}

// Folds one scored tile into row r's running (m, l, o).
PAGODA_SIMD_CLONES void UpdateRow(const RowSet& rows, int32_t r, const Tile& t, float* s) {
  float mx = kNegInf;
  for (int j = 0; j < t.n; ++j) mx = std::max(mx, s[j]);
  float& m = rows.m[r];
  // All keys of the tile masked: with -inf masking, or when a real score already dominates
  // (exp(-9984 - m) == 0 exactly), the tile contributes nothing.
  if (mx <= rows.masked_score && m >= rows.masked_score + 128.0f) return;
  const float m_new = std::max(m, mx);
  const float alpha = std::exp(m - m_new);
  for (int j = 0; j < t.n; ++j) s[j] -= m_new;
  ExpInPlace(s, t.n);
  float sum = 0.0f;
  for (int j = 0; j < t.n; ++j) sum += s[j];
  rows.l[r] = rows.l[r] * alpha + sum;
  m = m_new;
  const int32_t d = rows.d;
  float* o = rows.o + (r / rows.g) * rows.o_stride + static_cast<int64_t>(r % rows.g) * d;
  if (alpha != 1.0f) {
    for (int32_t x = 0; x < d; ++x) o[x] *= alpha;
  }
  int j = 0;
  for (; j + 4 <= t.n; j += 4) Axpy4(o, s + j, t.v + j, d);
  for (; j < t.n; ++j) Axpy1(o, s[j], t.v[j], d);
}

void ProcessTile(const RowSet& rows, const Tile& t, const TileScratch& s) {
  PrefetchRows(t.v, t.n, rows.d);
  ScoreTile(rows, t, s.scores);
  for (int32_t r = 0; r < rows.rows(); ++r) {
    UpdateRow(rows, r, t, s.scores + static_cast<int64_t>(r) * kKeyTile);
  }
}

void AttendContext(const RowSet& rows, const KeySet& keys, const TileScratch& s) {
  const int32_t bs = keys.kv->block_size;
  const int64_t table_len = static_cast<int64_t>(keys.block_table.size());
  Tile t;
  int64_t p = keys.ctx_begin;
  while (p < keys.ctx_end) {
    t.n = 0;
    while (t.n < kKeyTile && p < keys.ctx_end) {
      const int64_t blk = p / bs;
      const int32_t off = static_cast<int32_t>(p % bs);
      const int run = static_cast<int>(
          std::min<int64_t>({bs - off, keys.ctx_end - p, static_cast<int64_t>(kKeyTile - t.n)}));
      const int64_t phys = blk < table_len ? keys.block_table[blk] : -1;
      if (phys >= 0 && phys < keys.kv->num_blocks) AddCacheRun(keys, phys, off, p, run, s, t);
      p += run;
    }
    if (t.n > 0) ProcessTile(rows, t, s);
  }
}

void AttendNew(const RowSet& rows, const KeySet& keys, const TileScratch& s) {
  Tile t;
  for (int64_t j0 = keys.new_begin; j0 < keys.new_end; j0 += kKeyTile) {
    t.n = static_cast<int>(std::min<int64_t>(kKeyTile, keys.new_end - j0));
    for (int i = 0; i < t.n; ++i) {
      t.k[i] = keys.new_k + (j0 + i) * keys.new_stride;
      t.v[i] = keys.new_v + (j0 + i) * keys.new_stride;
      t.pos[i] = keys.new_first_pos + j0 + i;
    }
    ProcessTile(rows, t, s);
  }
}

}  // namespace

// Cephes-style expf: n = round(x / ln2), r = x - n ln2 (two-part ln2), e^r by a degree-7
// polynomial; about 1 ulp. Branch-free so it vectorizes.
PAGODA_SIMD_CLONES void ExpInPlace(float* x, int n) {
  for (int i = 0; i < n; ++i) {
    const float in = x[i];
    const float v = std::max(in, -87.0f);
    const float t = v * 1.44269504088896341f + 0.5f;
    int32_t e = static_cast<int32_t>(t);  // trunc toward zero, then fix to floor
    float fe = static_cast<float>(e);
    e = fe > t ? e - 1 : e;
    fe = fe > t ? fe - 1.0f : fe;
    const float r = (v - fe * 0.693359375f) + fe * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = (p * r * r + r) + 1.0f;
    const float res = y * std::bit_cast<float>(static_cast<uint32_t>(e + 127) << 23);
    x[i] = in < -87.0f ? 0.0f : res;
  }
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
  if (keys.ctx_end > keys.ctx_begin) AttendContext(rows, keys, scratch);
  if (keys.new_end > keys.new_begin) AttendNew(rows, keys, scratch);
}

}  // namespace pagoda::cpu::attn
