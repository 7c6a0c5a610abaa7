#include "kernels/cpu/attention/attention_block_tkg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/cpu/attention/attention_core.h"
#include "kernels/cpu/attention/kv_convert.h"
#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/ops.h"

namespace pagoda::cpu {
namespace {

constexpr int64_t kMinSplit = 256;  // smallest context split worth a task
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

size_t Floats(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

Status CheckSize(const std::string& name, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) == want) return Status::Ok();
  return InvalidArgument(name + ": expected " + std::to_string(want) + " elements, got " +
                         std::to_string(got));
}

Status CheckOptional(const std::string& name, std::span<const float> s, int64_t want) {
  return s.empty() ? Status::Ok() : CheckSize(name, s.size(), want);
}

// The block's matmuls run at the workspace's level cap and F16 mode.
mm::MatMulOptions MatMulOptionsOf(const TkgWorkspaceDims& d) {
  mm::MatMulOptions options;
  options.max_level = d.max_simd;
  options.f16 = d.f16_matmul;
  options.batch_invariant = d.batch_invariant;
  options.team = d.team;
  return options;
}

}  // namespace

// Internal stages; a friend class so it can reach the workspace buffers.
class TkgRunner {
 public:
  // any_q_len: sequences longer than max_tokens_per_seq are allowed (Block cuts them).
  static Status ValidateAttention(const PagedDecodeAttentionArgs& a, const TkgWorkspace& ws,
                                  bool any_q_len = false);
  static std::span<const AttnSeq> CutSequences(std::span<const AttnSeq> seqs, TkgWorkspace& ws);
  static void Attention(const PagedDecodeAttentionArgs& a, TkgWorkspace& ws);
  static Status Block(const TkgConfig& c, const TkgWeights& w, const TkgArgs& a, TkgWorkspace& ws);
  // keys_in_cache: the new tokens' K/V are already in the cache (AttentionBlockTkg): each task
  // scans cache positions only, split at fixed positions (batch-invariant); else the new keys
  // come from a.k / a.v (PagedDecodeAttention) and splits follow the thread count.
  static Status PlanTasks(const PagedDecodeAttentionArgs& a, TkgWorkspace& ws,
                          bool keys_in_cache = false);
  static int64_t FixedSplitLen(const TkgWorkspaceDims& d, int64_t len);
  static void RunTask(const PagedDecodeAttentionArgs& a, TkgWorkspace& ws,
                      const TkgWorkspace::Task& task, float scale, int member);
  static void Combine(const PagedDecodeAttentionArgs& a, const TkgWorkspace& ws,
                      const TkgWorkspace::Group& group);
  static Status ValidateBlock(const TkgConfig& c, const TkgWeights& w, const TkgArgs& a,
                              const TkgWorkspace& ws);
  static Status ValidateWeights(const TkgConfig& c, const TkgWeights& w);
  static PagedDecodeAttentionArgs AttentionArgs(const TkgConfig& c, const TkgWeights& w,
                                                const TkgArgs& a, int64_t n, TkgWorkspace& ws);
  static void Project(const TkgConfig& c, const TkgWeights& w, int64_t n, TkgWorkspace& ws);
  static void TokenStages(const TkgConfig& c, const TkgWeights& w, const TkgArgs& a, int64_t t,
                          TkgWorkspace& ws);
  static void WriteCache(const TkgArgs& a, int64_t n, const TkgWorkspace& ws);
};

Result<TkgWorkspace> TkgWorkspace::Create(const TkgWorkspaceDims& dims) {
  TkgWorkspaceDims d = dims;
  if (d.max_threads == 0) d.max_threads = Concurrency(d.team);
  if (d.max_tokens <= 0 || d.max_seqs <= 0 || d.max_tokens_per_seq <= 0 || d.hidden <= 0 ||
      d.n_heads <= 0 || d.n_kv_heads <= 0 || d.head_dim <= 0 || d.max_splits <= 0 ||
      d.max_threads <= 0 || d.n_heads % d.n_kv_heads != 0) {
    return InvalidArgument("TkgWorkspaceDims: all dims must be > 0, n_heads % n_kv_heads == 0");
  }
  TkgWorkspace ws;
  ws.dims_ = d;
  const int64_t q_dim = static_cast<int64_t>(d.n_heads) * d.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(d.n_kv_heads) * d.head_dim;
  ws.xn_.resize(Floats(d.max_tokens, d.hidden));
  ws.qkv_.resize(Floats(d.max_tokens, q_dim + 2 * kv_dim));
  ws.q_.resize(Floats(d.max_tokens, q_dim));
  ws.k_.resize(Floats(d.max_tokens, kv_dim));
  ws.v_.resize(Floats(d.max_tokens, kv_dim));
  ws.attn_.resize(Floats(d.max_tokens, q_dim));
  ws.ones_.assign(static_cast<size_t>(d.head_dim), 1.0f);
  ws.partials_.resize(
      Floats(static_cast<int64_t>(d.max_tokens) * d.n_heads * d.max_splits, d.head_dim + 2));
  const int32_t rows = d.n_heads / d.n_kv_heads * d.max_tokens_per_seq;
  ws.thread_scratch_floats_ = attn::TileScratchFloats(rows, d.head_dim);
  ws.thread_scratch_.resize(Floats(d.max_threads, static_cast<int64_t>(ws.thread_scratch_floats_)));
  const int64_t max_pieces = int64_t{d.max_seqs} + d.max_tokens / d.max_tokens_per_seq;
  ws.pieces_.reserve(static_cast<size_t>(max_pieces));
  ws.tasks_.reserve(Floats(max_pieces * d.n_kv_heads, d.max_splits));
  ws.groups_.reserve(Floats(max_pieces, d.n_kv_heads));
  return ws;
}

Status TkgRunner::ValidateAttention(const PagedDecodeAttentionArgs& a, const TkgWorkspace& ws,
                                    bool any_q_len) {
  PAGODA_RETURN_IF_ERROR(ValidatePagedKv(a.kv).WithPrefix("attention_block_tkg"));
  const TkgWorkspaceDims& wd = ws.dims_;
  const int64_t d = a.kv.head_dim;
  if (a.n_heads != wd.n_heads || a.kv.n_kv_heads != wd.n_kv_heads || d != wd.head_dim) {
    return InvalidArgument("n_heads / kv.n_kv_heads / kv.head_dim differ from the workspace's");
  }
  if (a.q.size() % Floats(a.n_heads, d) != 0) return InvalidArgument("q: size not a multiple");
  const int64_t t = static_cast<int64_t>(a.q.size() / Floats(a.n_heads, d));
  PAGODA_RETURN_IF_ERROR(CheckSize("k", a.k.size(), t * a.kv.n_kv_heads * d));
  PAGODA_RETURN_IF_ERROR(CheckSize("v", a.v.size(), t * a.kv.n_kv_heads * d));
  PAGODA_RETURN_IF_ERROR(CheckSize("out", a.out.size(), t * a.n_heads * d));
  PAGODA_RETURN_IF_ERROR(CheckOptional("sinks", a.sinks, a.n_heads));
  for (float s : a.sinks) {
    if (!std::isfinite(s)) return InvalidArgument("sinks: values must be finite");
  }
  if (a.softmax_scale && !(std::isfinite(*a.softmax_scale) && *a.softmax_scale > 0.0f)) {
    return InvalidArgument("softmax_scale must be finite and > 0 (use nullopt for the default)");
  }
  if (a.sliding_window < 0) return InvalidArgument("sliding_window must be >= 0");
  PAGODA_RETURN_IF_ERROR(ValidateAttnSeqs(a.seqs, t, a.kv));
  if (t > wd.max_tokens || static_cast<int64_t>(a.seqs.size()) > wd.max_seqs) {
    return ResourceExhausted("workspace holds " + std::to_string(wd.max_tokens) + " tokens and " +
                             std::to_string(wd.max_seqs) + " sequences");
  }
  for (const AttnSeq& s : a.seqs) {
    if (s.q_len > wd.max_tokens_per_seq && !any_q_len) {
      return ResourceExhausted("q_len " + std::to_string(s.q_len) + " > max_tokens_per_seq");
    }
  }
  if (Concurrency(wd.team) > wd.max_threads) {
    return FailedPrecondition("workspace was sized for fewer threads than the current arena");
  }
  return Status::Ok();
}

// With every key in the cache, a sequence's tokens are independent queries: each sequence is cut
// into pieces of at most max_tokens_per_seq tokens (piece i: the tokens from offset o = i * max,
// with o more tokens of context), which the tasks' tile scratch holds. Returns ws.pieces_.
std::span<const AttnSeq> TkgRunner::CutSequences(std::span<const AttnSeq> seqs, TkgWorkspace& ws) {
  ws.pieces_.clear();
  const int32_t max = ws.dims_.max_tokens_per_seq;
  for (const AttnSeq& s : seqs) {
    for (int32_t o = 0; o < s.q_len || (o == 0 && s.q_len == 0); o += max) {
      ws.pieces_.push_back(
          AttnSeq{s.q_start + o, std::min(max, s.q_len - o), s.ctx_len + o, s.block_table});
    }
  }
  return ws.pieces_;
}

// The split length of keys_in_cache plans: fixed by the workspace (max_context), or, when that
// is unknown, by the context itself beyond max_splits * kMinSplit keys; a multiple of kKeyTile.
int64_t TkgRunner::FixedSplitLen(const TkgWorkspaceDims& d, int64_t len) {
  const int64_t cap = d.max_context > 0 ? d.max_context : len;
  const int64_t per_split = (cap + d.max_splits - 1) / d.max_splits;
  const int64_t split = std::max<int64_t>(kMinSplit, per_split);
  return (split + attn::kKeyTile - 1) / attn::kKeyTile * attn::kKeyTile;
}

// Splits each (sequence, kv head) context into tasks. keys_in_cache: at multiples of
// FixedSplitLen from position 0, over [window start rounded down to a tile, ctx_len + q_len),
// so every query's keys are scanned in the same tiles and splits whichever step it runs in;
// else about 4 tasks per thread.
Status TkgRunner::PlanTasks(const PagedDecodeAttentionArgs& a, TkgWorkspace& ws,
                            bool keys_in_cache) {
  ws.tasks_.clear();
  ws.groups_.clear();
  const int32_t n_kv = a.kv.n_kv_heads;
  const int32_t g = a.n_heads / n_kv;
  int64_t n_groups = 0;
  for (const AttnSeq& s : a.seqs) n_groups += s.q_len > 0 ? n_kv : 0;
  const int64_t want = 4LL * Concurrency(ws.dims_.team);
  const int64_t desired = n_groups >= want || n_groups == 0 ? 1 : (want + n_groups - 1) / n_groups;
  int64_t offset = 0;
  for (size_t b = 0; b < a.seqs.size(); ++b) {
    const AttnSeq& s = a.seqs[b];
    if (s.q_len == 0) continue;
    const int64_t end = keys_in_cache ? s.ctx_len + s.q_len : s.ctx_len;
    int64_t lo = std::max<int64_t>(0, attn::WindowLow(s.ctx_len, a.sliding_window));
    int64_t split_len = 0, first = 0;
    if (keys_in_cache) {
      lo = lo / attn::kKeyTile * attn::kKeyTile;
      split_len = FixedSplitLen(ws.dims_, end);
      first = lo / split_len * split_len;
    } else {
      const int64_t len = std::max<int64_t>(0, end - lo);
      const int64_t splits =
          std::clamp<int64_t>(std::min(desired, len / kMinSplit), 1, ws.dims_.max_splits);
      split_len =
          std::max<int64_t>(attn::kKeyTile, ((len + splits - 1) / splits + attn::kKeyTile - 1) /
                                                attn::kKeyTile * attn::kKeyTile);
      first = lo;
    }
    const int64_t splits = std::max<int64_t>(1, (end - first + split_len - 1) / split_len);
    if (splits > ws.dims_.max_splits) {
      return ResourceExhausted("context of " + std::to_string(end) + " positions needs " +
                               std::to_string(splits) + " splits; the workspace holds " +
                               std::to_string(ws.dims_.max_splits));
    }
    const int64_t rows = static_cast<int64_t>(g) * s.q_len;
    for (int32_t h = 0; h < n_kv; ++h) {
      ws.groups_.push_back({static_cast<int32_t>(b), h, static_cast<int32_t>(ws.tasks_.size()),
                            static_cast<int32_t>(splits)});
      for (int64_t sp = 0; sp < splits; ++sp) {
        const int64_t begin = std::max(lo, first + sp * split_len);
        const bool last = sp == splits - 1;
        ws.tasks_.push_back({static_cast<int32_t>(b), h, begin,
                             std::min<int64_t>(end, first + (sp + 1) * split_len),
                             last && !keys_in_cache, offset});
        offset += rows * (a.kv.head_dim + 2);
      }
    }
  }
  if (offset > static_cast<int64_t>(ws.partials_.size())) {
    return ResourceExhausted("workspace partial buffer too small");  // not reachable by sizing
  }
  return Status::Ok();
}

void TkgRunner::RunTask(const PagedDecodeAttentionArgs& a, TkgWorkspace& ws,
                        const TkgWorkspace::Task& task, float scale, int member) {
  const AttnSeq& s = a.seqs[task.seq];
  const int32_t d = a.kv.head_dim;
  const int32_t n_kv = a.kv.n_kv_heads;
  const int32_t g = a.n_heads / n_kv;
  const int32_t n_rows = g * s.q_len;
  attn::RowSet rows;
  rows.q =
      a.q.data() +
      (static_cast<int64_t>(s.q_start) * a.n_heads + static_cast<int64_t>(task.kv_head) * g) * d;
  rows.q_stride = static_cast<int64_t>(a.n_heads) * d;
  rows.o = ws.partials_.data() + task.partial;
  rows.o_stride = static_cast<int64_t>(g) * d;
  rows.m = rows.o + static_cast<int64_t>(n_rows) * d;
  rows.l = rows.m + n_rows;
  rows.n_q = s.q_len;
  rows.g = g;
  rows.d = d;
  rows.first_pos = s.ctx_len;
  rows.scale = scale;
  rows.masked_score = kNegInf;
  rows.window = a.sliding_window;
  rows.simd = ws.dims_.max_simd;

  attn::KeySet keys;
  keys.kv = &a.kv;
  keys.block_table = s.block_table;
  keys.kv_head = task.kv_head;
  keys.ctx_begin = task.ctx_begin;
  keys.ctx_end = task.ctx_end;
  if (task.with_new) {
    const int64_t base = (static_cast<int64_t>(s.q_start) * n_kv + task.kv_head) * d;
    keys.new_k = a.k.data() + base;
    keys.new_v = a.v.data() + base;
    keys.new_stride = static_cast<int64_t>(n_kv) * d;
    keys.new_begin = std::max<int64_t>(0, attn::WindowLow(s.ctx_len, a.sliding_window) - s.ctx_len);
    keys.new_end = s.q_len;
    keys.new_first_pos = s.ctx_len;
  }
  float* scratch = ws.thread_scratch_.data() + Floats(member, ws.thread_scratch_floats_);
  attn::InitRows(rows);
  attn::AttendKeys(rows, keys, attn::MakeTileScratch(scratch, n_rows, d));
}

// out = sum_t e^{m_t - M} o_t / (sum_t e^{m_t - M} l_t [+ e^{sink - M}]), M = max(m_t [, sink]).
void TkgRunner::Combine(const PagedDecodeAttentionArgs& a, const TkgWorkspace& ws,
                        const TkgWorkspace::Group& group) {
  const AttnSeq& s = a.seqs[group.seq];
  const int32_t d = a.kv.head_dim;
  const int32_t g = a.n_heads / a.kv.n_kv_heads;
  const int32_t n_rows = g * s.q_len;
  for (int32_t r = 0; r < n_rows; ++r) {
    const int32_t h = group.kv_head * g + r % g;
    float* out = a.out.data() + (static_cast<int64_t>(s.q_start + r / g) * a.n_heads + h) * d;
    float big_m = a.sinks.empty() ? kNegInf : a.sinks[h];
    for (int32_t i = 0; i < group.n_tasks; ++i) {
      const float* p = ws.partials_.data() + ws.tasks_[group.first_task + i].partial;
      big_m = std::max(big_m, p[static_cast<int64_t>(n_rows) * d + r]);
    }
    std::fill(out, out + d, 0.0f);
    if (big_m == kNegInf) continue;  // no visible key and no sink: 0 (docs/seed-kernels.md 2.7.3)
    float denom = a.sinks.empty() ? 0.0f : std::exp(a.sinks[h] - big_m);
    for (int32_t i = 0; i < group.n_tasks; ++i) {
      const float* p = ws.partials_.data() + ws.tasks_[group.first_task + i].partial;
      const float m = p[static_cast<int64_t>(n_rows) * d + r];
      if (m == kNegInf) continue;
      const float c = std::exp(m - big_m);
      denom += c * p[static_cast<int64_t>(n_rows) * d + n_rows + r];
      const float* o = p + static_cast<int64_t>(r) * d;
      for (int32_t x = 0; x < d; ++x) out[x] += c * o[x];
    }
    const float inv = 1.0f / denom;
    for (int32_t x = 0; x < d; ++x) out[x] *= inv;
  }
}

void TkgRunner::Attention(const PagedDecodeAttentionArgs& a, TkgWorkspace& ws) {
  const float scale = a.softmax_scale.value_or(1.0f / std::sqrt(static_cast<float>(a.kv.head_dim)));
  ParallelFor(ws.dims_.team, static_cast<int64_t>(ws.tasks_.size()),
              [&](int64_t begin, int64_t end, int member) {
                for (int64_t i = begin; i < end; ++i) RunTask(a, ws, ws.tasks_[i], scale, member);
              });
  ParallelFor(ws.dims_.team, static_cast<int64_t>(ws.groups_.size()),
              [&](int64_t begin, int64_t end, int) {
                for (int64_t i = begin; i < end; ++i) Combine(a, ws, ws.groups_[i]);
              });
}

Status PagedDecodeAttention(const PagedDecodeAttentionArgs& args, TkgWorkspace& ws) {
  PAGODA_RETURN_IF_ERROR(TkgRunner::ValidateAttention(args, ws));
  PAGODA_RETURN_IF_ERROR(TkgRunner::PlanTasks(args, ws));
  TkgRunner::Attention(args, ws);
  return Status::Ok();
}

namespace {

Status CheckView(const std::string& name, const WeightView& v, int64_t rows, int64_t cols) {
  if (v.data == nullptr || v.rows != rows || v.cols != cols) {
    return InvalidArgument(name + ": expected a [" + std::to_string(rows) + "][" +
                           std::to_string(cols) + "] weight, got [" + std::to_string(v.rows) +
                           "][" + std::to_string(v.cols) + "]" +
                           (v.data == nullptr ? " (null data)" : ""));
  }
  if (!TypeTraits(v.type).can_dequantize) {
    return InvalidArgument(name + ": type " + TypeName(v.type) + " cannot be computed with");
  }
  return Status::Ok();
}

}  // namespace

Status TkgRunner::ValidateWeights(const TkgConfig& c, const TkgWeights& w) {
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  PAGODA_RETURN_IF_ERROR(CheckSize("attn_norm", w.attn_norm.size(), c.hidden));
  if (w.wqkv.data != nullptr) {
    PAGODA_RETURN_IF_ERROR(CheckView("wqkv", w.wqkv, q_dim + 2 * kv_dim, c.hidden));
  } else {
    PAGODA_RETURN_IF_ERROR(CheckView("wq", w.wq, q_dim, c.hidden));
    PAGODA_RETURN_IF_ERROR(CheckView("wk", w.wk, kv_dim, c.hidden));
    PAGODA_RETURN_IF_ERROR(CheckView("wv", w.wv, kv_dim, c.hidden));
  }
  PAGODA_RETURN_IF_ERROR(CheckView("wo", w.wo, c.hidden, q_dim));
  PAGODA_RETURN_IF_ERROR(CheckOptional("bq", w.bq, q_dim));
  PAGODA_RETURN_IF_ERROR(CheckOptional("bk", w.bk, kv_dim));
  PAGODA_RETURN_IF_ERROR(CheckOptional("bv", w.bv, kv_dim));
  PAGODA_RETURN_IF_ERROR(CheckOptional("bo", w.bo, c.hidden));
  PAGODA_RETURN_IF_ERROR(CheckOptional("q_norm_pre", w.q_norm_pre, c.head_dim));
  PAGODA_RETURN_IF_ERROR(CheckOptional("k_norm_pre", w.k_norm_pre, c.head_dim));
  PAGODA_RETURN_IF_ERROR(CheckOptional("q_norm_post", w.q_norm_post, c.head_dim));
  return CheckOptional("k_norm_post", w.k_norm_post, c.head_dim);
}

Status TkgRunner::ValidateBlock(const TkgConfig& c, const TkgWeights& w, const TkgArgs& a,
                                const TkgWorkspace& ws) {
  const TkgWorkspaceDims& wd = ws.dims_;
  if (c.hidden != wd.hidden || c.n_heads != wd.n_heads || c.n_kv_heads != wd.n_kv_heads ||
      c.head_dim != wd.head_dim || c.n_kv_heads != a.kv.n_kv_heads || c.head_dim != a.kv.head_dim) {
    return InvalidArgument("config dims differ from the workspace's or the kv view's");
  }
  if (!(c.rms_eps > 0.0f) || !(c.qk_norm_eps > 0.0f)) {
    return InvalidArgument("rms_eps and qk_norm_eps must be > 0");
  }
  if (c.rope_dim < 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim) {
    return InvalidArgument("rope_dim must be 0 or even and <= head_dim");
  }
  if (!c.rope_inv_freq.empty() &&
      static_cast<int64_t>(c.rope_inv_freq.size()) * 2 != int64_t{c.rope_dim}) {
    return InvalidArgument("rope_inv_freq: expected rope_dim / 2 values or none");
  }
  PAGODA_RETURN_IF_ERROR(ValidateWeights(c, w));
  if (a.x.size() % static_cast<size_t>(c.hidden) != 0) {
    return InvalidArgument("x: size not a multiple of hidden");
  }
  const int64_t n = static_cast<int64_t>(a.x.size()) / c.hidden;
  if (n > wd.max_tokens) return ResourceExhausted("x: more tokens than the workspace holds");
  PAGODA_RETURN_IF_ERROR(CheckSize("positions", a.positions.size(), n));
  PAGODA_RETURN_IF_ERROR(CheckSize("slots", a.slots.size(), n));
  return CheckSize("out", a.out.size(), n * c.hidden);
}

void TkgRunner::Project(const TkgConfig& c, const TkgWeights& w, int64_t n, TkgWorkspace& ws) {
  const int64_t hidden = w.attn_norm.size();
  for (int64_t t = 0; t < n; ++t) {
    RmsNorm(ws.xn_.data() + t * hidden, w.attn_norm.data(), hidden, c.rms_eps,
            ws.xn_.data() + t * hidden);
  }
  if (w.wqkv.data == nullptr) {
    const WeightView* qkv[] = {&w.wq, &w.wk, &w.wv};
    float* const out[] = {ws.q_.data(), ws.k_.data(), ws.v_.data()};
    mm::MatMulOptions options = MatMulOptionsOf(ws.dims_);
    const WeightView* next[] = {&w.wo};
    options.prefetch_next = next;
    mm::MatMulSameInput(qkv, ws.xn_.data(), n, out, options);
    return;
  }
  const int64_t q_dim = w.wo.cols;
  const int64_t kv_dim = (w.wqkv.rows - q_dim) / 2;
  mm::MatMul(w.wqkv, ws.xn_.data(), n, ws.qkv_.data(), MatMulOptionsOf(ws.dims_));
  for (int64_t t = 0; t < n; ++t) {
    const float* row = ws.qkv_.data() + t * w.wqkv.rows;
    std::copy(row, row + q_dim, ws.q_.data() + t * q_dim);
    std::copy(row + q_dim, row + q_dim + kv_dim, ws.k_.data() + t * kv_dim);
    std::copy(row + q_dim + kv_dim, row + q_dim + 2 * kv_dim, ws.v_.data() + t * kv_dim);
  }
}

namespace {

void AddBias(float* x, std::span<const float> b) {
  for (size_t i = 0; i < b.size(); ++i) x[i] += b[i];
}

void HeadNorms(float* x, int32_t n_heads, int32_t d, std::span<const float> gamma,
               const float* ones, float eps) {
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * d;
    RmsNorm(v, gamma.empty() ? ones : gamma.data(), d, eps, v);
  }
}

}  // namespace

// Bias, per-head norms, RoPE and cache-dtype rounding of token t's q, k, v (in the workspace).
void TkgRunner::TokenStages(const TkgConfig& c, const TkgWeights& w, const TkgArgs& a, int64_t t,
                            TkgWorkspace& ws) {
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  float* q = ws.q_.data() + t * q_dim;
  float* k = ws.k_.data() + t * kv_dim;
  float* v = ws.v_.data() + t * kv_dim;
  AddBias(q, w.bq);
  AddBias(k, w.bk);
  AddBias(v, w.bv);
  const float* ones = ws.ones_.data();
  if (c.qk_norm_pre_rope) {
    HeadNorms(q, c.n_heads, c.head_dim, w.q_norm_pre, ones, c.qk_norm_eps);
    HeadNorms(k, c.n_kv_heads, c.head_dim, w.k_norm_pre, ones, c.qk_norm_eps);
  }
  if (c.rope_dim > 0 && !c.rope_inv_freq.empty()) {
    ApplyRope(q, c.n_heads, c.head_dim, a.positions[t], c.rope_inv_freq, c.rope_layout);
    ApplyRope(k, c.n_kv_heads, c.head_dim, a.positions[t], c.rope_inv_freq, c.rope_layout);
  } else if (c.rope_dim > 0) {
    ApplyRope(q, c.n_heads, c.head_dim, c.rope_dim, a.positions[t], c.rope_base, c.rope_layout);
    ApplyRope(k, c.n_kv_heads, c.head_dim, c.rope_dim, a.positions[t], c.rope_base, c.rope_layout);
  }
  if (c.qk_norm_post_rope) {
    HeadNorms(q, c.n_heads, c.head_dim, w.q_norm_post, ones, c.qk_norm_eps);
    HeadNorms(k, c.n_kv_heads, c.head_dim, w.k_norm_post, ones, c.qk_norm_eps);
  }
  kv::RoundTripRow(a.kv.dtype, a.kv.k_scale, k, kv_dim);
  kv::RoundTripRow(a.kv.dtype, a.kv.v_scale, v, kv_dim);
}

// Writes every token's K/V at its slot (all kv heads); slots < 0 or past the pool are skipped.
void TkgRunner::WriteCache(const TkgArgs& a, int64_t n, const TkgWorkspace& ws) {
  const PagedKvView& kv = a.kv;
  const int32_t d = kv.head_dim;
  const size_t es = KvDtypeSize(kv.dtype);
  const int64_t kv_dim = static_cast<int64_t>(kv.n_kv_heads) * d;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t slot = a.slots[t];
    if (slot < 0 || slot >= kv.num_slots()) continue;
    const int64_t block = slot / kv.block_size;
    const int32_t off = static_cast<int32_t>(slot % kv.block_size);
    for (int32_t h = 0; h < kv.n_kv_heads; ++h) {
      const int64_t e = kv.offset(block, h, off) * static_cast<int64_t>(es);
      const int64_t src = t * kv_dim + static_cast<int64_t>(h) * d;
      kv::EncodeRow(kv.dtype, ws.k_.data() + src, kv.k_scale, static_cast<uint8_t*>(kv.k) + e, d);
      kv::EncodeRow(kv.dtype, ws.v_.data() + src, kv.v_scale, static_cast<uint8_t*>(kv.v) + e, d);
    }
  }
}

PagedDecodeAttentionArgs TkgRunner::AttentionArgs(const TkgConfig& c, const TkgWeights& w,
                                                  const TkgArgs& a, int64_t n, TkgWorkspace& ws) {
  const size_t q_n = Floats(n, static_cast<int64_t>(c.n_heads) * c.head_dim);
  const size_t kv_n = Floats(n, static_cast<int64_t>(c.n_kv_heads) * c.head_dim);
  PagedDecodeAttentionArgs at;
  at.seqs = a.seqs;
  at.q = std::span<const float>(ws.q_.data(), q_n);
  at.k = std::span<const float>(ws.k_.data(), kv_n);
  at.v = std::span<const float>(ws.v_.data(), kv_n);
  at.kv = a.kv;
  at.n_heads = c.n_heads;
  at.softmax_scale = c.softmax_scale;
  at.sliding_window = c.sliding_window;
  at.sinks = w.sinks;
  at.out = std::span<float>(ws.attn_.data(), q_n);
  return at;
}

Status TkgRunner::Block(const TkgConfig& c, const TkgWeights& w, const TkgArgs& a,
                        TkgWorkspace& ws) {
  PAGODA_RETURN_IF_ERROR(ValidateBlock(c, w, a, ws));
  const int64_t n = static_cast<int64_t>(a.x.size()) / c.hidden;
  PagedDecodeAttentionArgs at = AttentionArgs(c, w, a, n, ws);
  // Every token has a slot (the engine's steps): its K/V goes into the cache first and the
  // attention reads all keys from there, in tiles and splits at fixed positions, so a token's
  // result is the same in any step (alone, batched, among its sequence's speculative tokens, or
  // in a prefill chunk of any length: long sequences are cut into pieces, CutSequences).
  const bool keys_in_cache = std::all_of(a.slots.begin(), a.slots.begin() + n,
                                         [&](int32_t s) { return s >= 0 && s < a.kv.num_slots(); });
  PAGODA_RETURN_IF_ERROR(ValidateAttention(at, ws, keys_in_cache));
  if (keys_in_cache) at.seqs = CutSequences(at.seqs, ws);
  PAGODA_RETURN_IF_ERROR(PlanTasks(at, ws, keys_in_cache));
  std::copy(a.x.begin(), a.x.end(), ws.xn_.begin());
  Project(c, w, n, ws);
  for (int64_t t = 0; t < n; ++t) TokenStages(c, w, a, t, ws);
  if (keys_in_cache) WriteCache(a, n, ws);
  Attention(at, ws);
  if (!keys_in_cache) WriteCache(a, n, ws);
  mm::MatMulOptions options = MatMulOptionsOf(ws.dims_);
  options.prefetch_next = a.next_weights;
  mm::MatMul(w.wo, ws.attn_.data(), n, a.out.data(), options);
  if (!w.bo.empty()) {
    for (int64_t t = 0; t < n; ++t) AddBias(a.out.data() + t * c.hidden, w.bo);
  }
  return Status::Ok();
}

Status AttentionBlockTkg(const TkgConfig& config, const TkgWeights& weights, const TkgArgs& args,
                         TkgWorkspace& ws) {
  return TkgRunner::Block(config, weights, args, ws);
}

}  // namespace pagoda::cpu
