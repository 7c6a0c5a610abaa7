#include "kernels/cpu/attention/flash_paged_attention.h"

#include <tbb/enumerable_thread_specific.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/attention/attention_core.h"

namespace pagoda::cpu {
namespace {

struct Task {
  int32_t seq;
  int32_t kv_head;
  int32_t q_first;  // first token of the query tile within the sequence's chunk
  int32_t n_q;
};

Status CheckSize(const char* name, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) == want) return Status::Ok();
  return InvalidArgument(std::string(name) + ": expected " + std::to_string(want) +
                         " elements, got " + std::to_string(got));
}

Status Validate(const FlashPagedAttentionArgs& a, int64_t* n_rows) {
  PAGODA_RETURN_IF_ERROR(ValidatePagedKv(a.kv).WithPrefix("flash_paged_attention"));
  const int64_t d = a.kv.head_dim;
  if (a.n_heads <= 0 || a.n_heads % a.kv.n_kv_heads != 0) {
    return InvalidArgument("n_heads " + std::to_string(a.n_heads) +
                           " must be a positive multiple of n_kv_heads " +
                           std::to_string(a.kv.n_kv_heads));
  }
  if (a.q.size() % (a.n_heads * d) != 0)
    return InvalidArgument("q: size not a multiple of n_heads*d");
  const int64_t t = static_cast<int64_t>(a.q.size()) / (a.n_heads * d);
  *n_rows = t;
  if (!a.k.empty() || !a.v.empty()) {
    PAGODA_RETURN_IF_ERROR(CheckSize("k", a.k.size(), t * a.kv.n_kv_heads * d));
    PAGODA_RETURN_IF_ERROR(CheckSize("v", a.v.size(), t * a.kv.n_kv_heads * d));
  }
  PAGODA_RETURN_IF_ERROR(CheckSize("out", a.out.size(), t * a.n_heads * d));
  if (!a.max.empty()) PAGODA_RETURN_IF_ERROR(CheckSize("max", a.max.size(), t * a.n_heads));
  if (!a.lse.empty()) PAGODA_RETURN_IF_ERROR(CheckSize("lse", a.lse.size(), t * a.n_heads));
  if (!a.sinks.empty()) {
    PAGODA_RETURN_IF_ERROR(CheckSize("sinks", a.sinks.size(), a.n_heads));
    for (float s : a.sinks) {
      if (!std::isfinite(s)) return InvalidArgument("sinks: values must be finite");
    }
  }
  if (a.softmax_scale && !(std::isfinite(*a.softmax_scale) && *a.softmax_scale > 0.0f)) {
    return InvalidArgument("softmax_scale must be finite and > 0 (use nullopt for the default)");
  }
  if (a.sliding_window < 0) return InvalidArgument("sliding_window must be >= 0");
  return ValidateAttnSeqs(a.seqs, t, a.kv);
}

// Query tile: about 64 rows (tokens x group heads) per task so each K/V tile read is reused.
int32_t QueryTile(int32_t g) { return std::clamp(64 / g, 4, 32); }

std::vector<Task> MakeTasks(const FlashPagedAttentionArgs& a, int32_t g) {
  std::vector<Task> tasks;
  const int32_t tile = QueryTile(g);
  for (size_t s = 0; s < a.seqs.size(); ++s) {
    for (int32_t q0 = 0; q0 < a.seqs[s].q_len; q0 += tile) {
      for (int32_t h = 0; h < a.kv.n_kv_heads; ++h) {
        tasks.push_back({static_cast<int32_t>(s), h, q0, std::min(tile, a.seqs[s].q_len - q0)});
      }
    }
  }
  return tasks;
}

// Normalises the rows of one task in place (adds the sinks) and writes max / lse.
void Finalize(const FlashPagedAttentionArgs& a, const attn::RowSet& rows, int32_t row0,
              int32_t head0) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int32_t r = 0; r < rows.rows(); ++r) {
    const int32_t qi = r / rows.g;
    const int32_t h = head0 + r % rows.g;
    float* o = rows.o + qi * rows.o_stride + static_cast<int64_t>(r % rows.g) * rows.d;
    float m = rows.m[r];
    float l = rows.l[r];
    if (!a.sinks.empty()) {
      const float m2 = std::max(m, a.sinks[h]);
      l = l * std::exp(m - m2) + std::exp(a.sinks[h] - m2);
      const float c = std::exp(m - m2);
      for (int32_t x = 0; x < rows.d; ++x) o[x] *= c;
      m = m2;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int32_t x = 0; x < rows.d; ++x) o[x] *= inv;
    const int64_t idx = static_cast<int64_t>(row0 + qi) * a.n_heads + h;
    if (!a.max.empty()) a.max[idx] = l > 0.0f ? m : neg_inf;
    if (!a.lse.empty()) a.lse[idx] = l > 0.0f ? m + std::log(l) : neg_inf;
  }
}

void RunTask(const FlashPagedAttentionArgs& a, const Task& task, float scale,
             std::vector<float>& scratch) {
  const AttnSeq& seq = a.seqs[task.seq];
  const int32_t d = a.kv.head_dim;
  const int32_t n_kv = a.kv.n_kv_heads;
  const int32_t g = a.n_heads / n_kv;
  const int64_t row0 = seq.q_start + task.q_first;
  const int32_t n_rows = task.n_q * g;
  const size_t need = attn::TileScratchFloats(n_rows, d) + 2 * static_cast<size_t>(n_rows);
  if (scratch.size() < need) scratch.resize(need);

  attn::RowSet rows;
  rows.q = a.q.data() + (row0 * a.n_heads + static_cast<int64_t>(task.kv_head) * g) * d;
  rows.q_stride = static_cast<int64_t>(a.n_heads) * d;
  rows.o = a.out.data() + (row0 * a.n_heads + static_cast<int64_t>(task.kv_head) * g) * d;
  rows.o_stride = rows.q_stride;
  rows.m = scratch.data() + attn::TileScratchFloats(n_rows, d);
  rows.l = rows.m + n_rows;
  rows.n_q = task.n_q;
  rows.g = g;
  rows.d = d;
  rows.first_pos = static_cast<int64_t>(seq.ctx_len) + task.q_first;
  rows.scale = scale;
  rows.masked_score = kMaskedScore;
  rows.window = a.sliding_window;
  rows.simd = a.max_simd;

  attn::KeySet keys;
  keys.kv = &a.kv;
  keys.block_table = seq.block_table;
  keys.kv_head = task.kv_head;
  const int64_t lo = attn::WindowLow(rows.first_pos, a.sliding_window);
  keys.ctx_begin = std::max<int64_t>(0, lo);
  keys.ctx_end = seq.ctx_len;
  if (!a.k.empty()) {
    keys.new_k = a.k.data() + (static_cast<int64_t>(seq.q_start) * n_kv + task.kv_head) * d;
    keys.new_v = a.v.data() + (static_cast<int64_t>(seq.q_start) * n_kv + task.kv_head) * d;
    keys.new_stride = static_cast<int64_t>(n_kv) * d;
    keys.new_begin = std::max<int64_t>(0, lo - seq.ctx_len);
    keys.new_end = task.q_first + task.n_q;
    keys.new_first_pos = seq.ctx_len;
  }
  attn::InitRows(rows);
  attn::AttendKeys(rows, keys, attn::MakeTileScratch(scratch.data(), n_rows, d));
  Finalize(a, rows, static_cast<int32_t>(row0), task.kv_head * g);
}

}  // namespace

Status FlashPagedAttention(const FlashPagedAttentionArgs& args) {
  int64_t n_rows = 0;
  PAGODA_RETURN_IF_ERROR(Validate(args, &n_rows));
  const int32_t g = args.n_heads / args.kv.n_kv_heads;
  const float scale =
      args.softmax_scale.value_or(1.0f / std::sqrt(static_cast<float>(args.kv.head_dim)));
  const std::vector<Task> tasks = MakeTasks(args, g);
  tbb::enumerable_thread_specific<std::vector<float>> scratch;
  ParallelFor(args.team, static_cast<int64_t>(tasks.size()), [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) RunTask(args, tasks[i], scale, scratch.local());
  });
  return Status::Ok();
}

}  // namespace pagoda::cpu
