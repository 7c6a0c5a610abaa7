// NeuronBackend: one engine step (docs/neuron-backend.md 5.6).
#include "kernels/neuron/neuron_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "kernels/neuron/bucketing.h"
#include "kernels/neuron/nrt_status.h"
#include "kernels/step_batch_check.h"

namespace pagoda::neuron {
namespace {

enum Role { kIds = 0, kPos, kSlots, kTable, kCtx, kLogits };
constexpr int kMaxRetries = 3;

}  // namespace

Status NeuronBackend::Check(NRT_STATUS s, const std::string& what) {
  switch (ActionForStatus(s)) {
    case NrtAction::kOk:
      return Status::Ok();
    case NrtAction::kRetry:
    case NrtAction::kFailStep:
      return Internal("neuron backend: " + what + " failed: " + NrtStatusName(s, &api_) +
                      " (this step's requests fail; the backend keeps serving)");
    case NrtAction::kFatal:
      break;
  }
  healthy_ = false;
  spdlog::error("neuron backend: {} failed: {}; marking the backend unhealthy", what,
                NrtStatusName(s, &api_));
  return Internal("neuron backend: " + what + " failed: " + NrtStatusName(s, &api_) +
                  " (fatal: the backend is unhealthy)");
}

Status NeuronBackend::Validate(const StepBatch& b, std::span<float> logits) const {
  PAGODA_RETURN_IF_ERROR(ValidateStepBatch(
      b, logits.size(), caps_, manifest_.vocab, caps_.max_model_len, [&](int64_t end) {
        return OutOfRange("seqs: " + std::to_string(end) + " tokens exceed the largest bucket (" +
                          std::to_string(caps_.max_model_len) + ")");
      }));
  for (const StepSequence& s : b.seqs) {
    if (!s.is_decode && s.num_logits > 1) {
      return InvalidArgument(
          "seqs: num_logits > 1 needs a decode sequence (prefill programs return the last "
          "token's logits only)");
    }
  }
  return Status::Ok();
}

Status NeuronBackend::Execute(const StepBatch& b, std::span<float> logits) {
  if (!healthy_) return Internal("neuron backend: unhealthy after a fatal runtime error");
  PAGODA_RETURN_IF_ERROR(Validate(b, logits));
  PAGODA_RETURN_IF_ERROR(CopyBlocks(b.block_copies));
  float* out = logits.data();
  size_t next = 0;
  while (next < b.seqs.size() && b.seqs[next].is_decode) {
    PAGODA_RETURN_IF_ERROR(RunDecodes(b, next, out));
  }
  for (size_t i = next; i < b.seqs.size(); ++i) {
    PAGODA_RETURN_IF_ERROR(RunPrefill(b, b.seqs[i], out));
  }
  return Status::Ok();
}

Status NeuronBackend::CopyBlocks(std::span<const BlockCopy> copies) {
  const size_t bb = kv_block_bytes_;
  for (const BlockCopy& c : copies) {
    for (nrt_tensor_t* t : kv_) {
      PAGODA_RETURN_IF_ERROR(
          Check(api_.tensor_copy(t, c.src_block * bb, t, c.dst_block * bb, bb), "nrt_tensor_copy"));
    }
  }
  return Status::Ok();
}

void NeuronBackend::ResetStaging(const Program& p) {
  const size_t t = p.spec.tokens(), rows = p.spec.rows();
  std::fill_n(ids_.begin(), t, 0);
  std::fill_n(pos_.begin(), t, 0);
  std::fill_n(slots_.begin(), t, manifest_.slot_pad);
  std::fill_n(table_.begin(), rows * p.spec.max_ctx_blocks, manifest_.table_pad);
  std::fill_n(ctx_.begin(), rows, 0);
}

// Greedy groups: a sequence joins while some decode program takes the group, i.e. has
// max_seqs >= its size, tokens_per_seq >= its longest query and max_ctx_blocks >= its widest
// context. A sequence that no program takes alone runs split (RunSplitDecode).
Status NeuronBackend::RunDecodes(const StepBatch& b, size_t& next, float*& out) {
  pieces_.clear();
  int32_t q = 0, blocks = 0;
  for (; next < b.seqs.size() && b.seqs[next].is_decode; ++next) {
    const StepSequence& s = b.seqs[next];
    const int32_t need_q = std::max(q, s.query_len);
    const int32_t need_blocks =
        std::max(blocks, CeilDiv(s.num_computed_tokens + s.query_len, caps_.block_size));
    const int32_t n = static_cast<int32_t>(pieces_.size()) + 1;
    if (PickDecodeProgram(manifest_.programs, n, need_q, need_blocks) < 0) break;
    pieces_.push_back({&s, 0, s.query_len});
    q = need_q;
    blocks = need_blocks;
  }
  if (pieces_.empty()) return RunSplitDecode(b, b.seqs[next++], out);
  return RunDecodePieces(b, q, blocks, out);
}

// A query longer than every decode program wide enough for the sequence: pieces of the largest
// tokens_per_seq, one execution each, in order (a piece's KV is written before the next piece
// attends to it).
Status NeuronBackend::RunSplitDecode(const StepBatch& b, const StepSequence& s, float*& out) {
  const int32_t blocks = CeilDiv(s.num_computed_tokens + s.query_len, caps_.block_size);
  const int32_t piece_max = MaxTokensPerSeq(manifest_.programs, blocks);
  if (piece_max < 1) return Internal("neuron backend: no decode program for the step");
  for (int32_t off = 0; off < s.query_len; off += piece_max) {
    pieces_.assign(1, DecodePiece{&s, off, std::min(piece_max, s.query_len - off)});
    PAGODA_RETURN_IF_ERROR(RunDecodePieces(b, pieces_[0].len, blocks, out));
  }
  return Status::Ok();
}

// Stages pieces_[row] into sequence row `row`: token entries [row * tokens_per_seq, + len) get
// its tokens, positions and slots (the rest of the row stays padding), context_lens[row] the
// length after the piece, and the block table row its table (truncated to the program's width).
// Appends the piece's token entries that need logits (the sequence's last num_logits) to wanted_.
void NeuronBackend::StageDecodePiece(const StepBatch& b, const ManifestProgram& spec, int32_t row) {
  const DecodePiece& d = pieces_[row];
  const StepSequence& s = *d.seq;
  const int32_t base = row * spec.tokens_per_seq;
  const int32_t first_wanted = s.query_len - s.num_logits;
  for (int32_t i = 0; i < d.len; ++i) {
    const int32_t t = s.query_start + d.off + i;
    ids_[base + i] = b.token_ids[t];
    pos_[base + i] = s.num_computed_tokens + d.off + i;
    slots_[base + i] = b.slot_mapping[t];
    if (d.off + i >= first_wanted) wanted_.push_back(base + i);
  }
  ctx_[row] = s.num_computed_tokens + d.off + d.len;
  const int32_t width = spec.max_ctx_blocks;
  const size_t w = std::min<size_t>(s.block_table.size(), width);
  std::copy_n(s.block_table.begin(), w, table_.begin() + static_cast<size_t>(row) * width);
}

Status NeuronBackend::RunDecodePieces(const StepBatch& b, int32_t query_len, int32_t ctx_blocks,
                                      float*& out) {
  const int32_t n = static_cast<int32_t>(pieces_.size());
  const int idx = PickDecodeProgram(manifest_.programs, n, query_len, ctx_blocks);
  if (idx < 0) return Internal("neuron backend: no decode program for the step");
  Program& p = programs_[idx];
  ResetStaging(p);
  wanted_.clear();
  for (int32_t r = 0; r < n; ++r) StageDecodePiece(b, p.spec, r);
  return RunProgramRows(p, wanted_, out);
}

// Reads rows [rows.front(), rows.back()] with one nrt_tensor_read: straight into `out` when every
// row in between is wanted, else into a scratch buffer whose wanted rows are copied out.
Status NeuronBackend::RunProgramRows(Program& p, const std::vector<int32_t>& rows, float*& out) {
  if (rows.empty()) return RunProgram(p, 0, 0, nullptr);
  const size_t vocab = static_cast<size_t>(manifest_.vocab);
  const int32_t lo = rows.front(), span = rows.back() + 1 - lo;
  if (span == static_cast<int32_t>(rows.size())) {
    PAGODA_RETURN_IF_ERROR(RunProgram(p, lo, span, out));
    out += static_cast<size_t>(span) * vocab;
    return Status::Ok();
  }
  std::vector<float>& tmp = decode_logits_;
  tmp.resize(static_cast<size_t>(span) * vocab);
  PAGODA_RETURN_IF_ERROR(RunProgram(p, lo, span, tmp.data()));
  for (int32_t r : rows)
    out = std::copy_n(tmp.begin() + static_cast<size_t>(r - lo) * vocab, vocab, out);
  return Status::Ok();
}

Status NeuronBackend::RunPrefill(const StepBatch& b, const StepSequence& s, float*& out) {
  const int32_t end = s.num_computed_tokens + s.query_len;
  const int32_t blocks = CeilDiv(end, caps_.block_size);
  const int32_t piece_max = MaxPrefillTokens(manifest_.programs, blocks);
  if (piece_max < 1) return Internal("neuron backend: no prefill program for the step");
  for (int32_t off = 0; off < s.query_len; off += piece_max) {
    const int32_t len = std::min(piece_max, s.query_len - off);
    const int idx = PickPrefillProgram(manifest_.programs, len, blocks);
    Program& p = programs_[idx];
    ResetStaging(p);
    for (int32_t i = 0; i < len; ++i) {
      ids_[i] = b.token_ids[s.query_start + off + i];
      pos_[i] = s.num_computed_tokens + off + i;
      slots_[i] = b.slot_mapping[s.query_start + off + i];
    }
    ctx_[0] = s.num_computed_tokens + off + len;
    const size_t w = std::min<size_t>(s.block_table.size(), p.spec.max_ctx_blocks);
    std::copy_n(s.block_table.begin(), w, table_.begin());
    const bool last = off + len == s.query_len;
    PAGODA_RETURN_IF_ERROR(RunProgram(p, 0, last ? s.num_logits : 0, out));
    if (last) out += static_cast<size_t>(s.num_logits) * manifest_.vocab;
  }
  return Status::Ok();
}

// Writes the staged inputs, executes (retrying NRT_QUEUE_FULL) and reads logits rows
// [first_row, first_row + n_rows) (the tensor is [logit_rows][vocab] f32).
Status NeuronBackend::RunProgram(Program& p, int32_t first_row, int32_t n_rows, float* out) {
  const size_t t = p.spec.tokens() * sizeof(int32_t), rows = p.spec.rows() * sizeof(int32_t);
  const size_t table = rows * p.spec.max_ctx_blocks;
  const std::pair<const void*, size_t> inputs[] = {{ids_.data(), t},
                                                   {pos_.data(), t},
                                                   {slots_.data(), t},
                                                   {table_.data(), table},
                                                   {ctx_.data(), rows}};
  // The error labels are built only on failure (Check is OK for kNrtSuccess alone).
  for (int role = kIds; role <= kCtx; ++role) {
    const NRT_STATUS w = api_.tensor_write(p.io[role], inputs[role].first, 0, inputs[role].second);
    if (w != kNrtSuccess) {
      return Check(w, "nrt_tensor_write(" + p.spec.id + "." + IoRoles()[role] + ")");
    }
  }
  NRT_STATUS st = api_.execute(p.model, p.inputs, p.outputs);
  for (int attempt = 1; st == kNrtQueueFull && attempt <= kMaxRetries; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1 << attempt));
    st = api_.execute(p.model, p.inputs, p.outputs);
  }
  ++num_executions_;
  if (st != kNrtSuccess) return Check(st, "nrt_execute(" + p.spec.id + ")");
  const size_t row_bytes = static_cast<size_t>(manifest_.vocab) * sizeof(float);
  if (n_rows == 0) return Status::Ok();
  st = api_.tensor_read(p.io[kLogits], out, first_row * row_bytes, n_rows * row_bytes);
  return st == kNrtSuccess ? Status::Ok() : Check(st, "nrt_tensor_read(logits)");
}

}  // namespace pagoda::neuron
