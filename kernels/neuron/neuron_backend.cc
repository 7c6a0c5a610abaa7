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
  return ValidateStepBatch(
      b, logits.size(), caps_, manifest_.vocab, caps_.max_model_len, [&](int64_t end) {
        return OutOfRange("seqs: " + std::to_string(end) + " tokens exceed the largest bucket (" +
                          std::to_string(caps_.max_model_len) + ")");
      });
}

Status NeuronBackend::Execute(const StepBatch& b, std::span<float> logits) {
  if (!healthy_) return Internal("neuron backend: unhealthy after a fatal runtime error");
  PAGODA_RETURN_IF_ERROR(Validate(b, logits));
  for (const StepSequence& s : b.seqs) {
    if (s.num_logits > 1) {  // capabilities().multi_token_logits is false
      return InvalidArgument(
          "seqs: num_logits > 1 needs multi-token decode programs, which the "
          "manifest format has no place for yet");
    }
  }
  PAGODA_RETURN_IF_ERROR(CopyBlocks(b.block_copies));
  float* out = logits.data();
  size_t first = 0;
  while (first < b.seqs.size() && b.seqs[first].is_decode && b.seqs[first].query_len == 1) {
    // Greedy groups: add rows while some decode program takes the group.
    size_t end = first;
    int32_t blocks = 0;
    while (end < b.seqs.size() && b.seqs[end].is_decode && b.seqs[end].query_len == 1) {
      const StepSequence& s = b.seqs[end];
      const int32_t need = std::max(blocks, CeilDiv(s.num_computed_tokens + 1, caps_.block_size));
      if (MaxDecodeSeqs(manifest_.programs, need) < static_cast<int32_t>(end - first + 1)) break;
      blocks = need;
      ++end;
    }
    PAGODA_RETURN_IF_ERROR(RunDecodes(b, first, end, blocks, out));
    first = end;
  }
  for (size_t i = first; i < b.seqs.size(); ++i) {
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

Status NeuronBackend::RunDecodes(const StepBatch& b, size_t first, size_t end, int32_t ctx_blocks,
                                 float*& out) {
  const int32_t n = static_cast<int32_t>(end - first);
  const int idx = PickDecodeProgram(manifest_.programs, n, ctx_blocks);
  if (idx < 0) return Internal("neuron backend: no decode program for the step");
  Program& p = programs_[idx];
  ResetStaging(p);
  const int32_t width = p.spec.max_ctx_blocks;
  int32_t logit_rows = 0, wanted = 0;
  for (int32_t r = 0; r < n; ++r) {
    const StepSequence& s = b.seqs[first + r];
    ids_[r] = b.token_ids[s.query_start];
    pos_[r] = s.num_computed_tokens;
    slots_[r] = b.slot_mapping[s.query_start];
    ctx_[r] = s.num_computed_tokens + 1;
    const size_t w = std::min<size_t>(s.block_table.size(), width);
    std::copy_n(s.block_table.begin(), w, table_.begin() + static_cast<size_t>(r) * width);
    logit_rows = s.num_logits > 0 ? r + 1 : logit_rows;
    wanted += s.num_logits;
  }
  const size_t vocab = static_cast<size_t>(manifest_.vocab);
  if (wanted == logit_rows) {  // rows [0, logit_rows) all wanted: read straight into `out`
    PAGODA_RETURN_IF_ERROR(RunProgram(p, logit_rows, out));
    out += static_cast<size_t>(logit_rows) * vocab;
    return Status::Ok();
  }
  // Rows are read densely up to the last wanted one; rows not wanted are skipped after.
  std::vector<float>& tmp = decode_logits_;
  tmp.resize(static_cast<size_t>(logit_rows) * vocab);
  PAGODA_RETURN_IF_ERROR(RunProgram(p, logit_rows, tmp.data()));
  for (int32_t r = 0; r < logit_rows; ++r) {
    if (b.seqs[first + r].num_logits == 0) continue;
    out = std::copy_n(tmp.begin() + static_cast<size_t>(r) * vocab, vocab, out);
  }
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
    PAGODA_RETURN_IF_ERROR(RunProgram(p, last ? s.num_logits : 0, out));
    if (last) out += static_cast<size_t>(s.num_logits) * manifest_.vocab;
  }
  return Status::Ok();
}

// Writes the staged inputs, executes (retrying NRT_QUEUE_FULL) and reads `logit_rows` rows.
Status NeuronBackend::RunProgram(Program& p, int32_t logit_rows, float* out) {
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
  const size_t bytes = static_cast<size_t>(logit_rows) * manifest_.vocab * sizeof(float);
  if (bytes == 0) return Status::Ok();
  st = api_.tensor_read(p.io[kLogits], out, 0, bytes);
  return st == kNrtSuccess ? Status::Ok() : Check(st, "nrt_tensor_read(logits)");
}

}  // namespace pagoda::neuron
