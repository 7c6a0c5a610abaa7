#include "tests/scheduler/fake_backend.h"

#include <algorithm>

#include "kernels/step_batch_check.h"

namespace pagoda::testing {

std::unique_ptr<Tokenizer> MakeByteTokenizer() {
  SpmVocab v;
  v.pieces = {"<unk>", "<s>", "</s>"};
  v.kinds = {TokenKind::kUnknown, TokenKind::kControl, TokenKind::kControl};
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    v.pieces.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    v.kinds.push_back(TokenKind::kByte);
  }
  v.scores.assign(v.pieces.size(), 0.0f);
  v.add_dummy_prefix = false;
  return std::move(MakeSpmTokenizer(std::move(v))).value();
}

int32_t FakeNextToken(const std::vector<int32_t>& context) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : context) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  h ^= h >> 29;
  return ByteToken(static_cast<char>('a' + h % 26));
}

std::vector<int32_t> FakeGreedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_tokens; ++i) {
    out.push_back(FakeNextToken(prompt));
    prompt.push_back(out.back());
  }
  return out;
}

FakeBackend::FakeBackend(int32_t num_blocks, int32_t block_size, const SchedulerConfig& limits,
                         int32_t max_model_len)
    : slots_(static_cast<size_t>(num_blocks) * block_size, -1) {
  caps_.name = "fake";
  caps_.multi_token_logits = true;
  caps_.num_blocks = num_blocks;
  caps_.block_size = block_size;
  caps_.max_model_len = max_model_len;
  caps_.max_num_batched_tokens = limits.max_num_batched_tokens;
  caps_.max_num_seqs = limits.max_num_seqs;
}

int32_t FakeBackend::NextToken(const std::vector<int32_t>& context) const {
  const size_t n = context.size(), period = static_cast<size_t>(copy_period);
  if (period > 0 && n >= period && context[n - period] >= ByteToken('a') &&
      context[n - period] <= ByteToken('z')) {
    return context[n - period];
  }
  return FakeNextToken(context);
}

Status FakeBackend::Execute(const StepBatch& b, std::span<float> logits) {
  if (on_step) on_step(static_cast<int64_t>(steps.size()));
  if (fail_next_step) {
    fail_next_step = false;
    return Internal("injected failure");
  }
  const Status valid =
      ValidateStepBatch(b, logits.size(), caps_, kFakeVocab, caps_.max_model_len,
                        [](int64_t) { return OutOfRange("seqs: past max_model_len"); });
  if (!valid.ok()) {
    rejected_steps.push_back(valid);
    return valid;
  }
  const int32_t bs = caps_.block_size;
  for (const BlockCopy& c : b.block_copies) {
    std::copy_n(slots_.begin() + c.src_block * bs, bs, slots_.begin() + c.dst_block * bs);
  }
  FakeStepRecord rec;
  rec.num_tokens = static_cast<int32_t>(b.token_ids.size());
  rec.num_seqs = static_cast<int32_t>(b.seqs.size());
  for (size_t t = 0; t < b.token_ids.size(); ++t) {
    if (b.slot_mapping[t] >= 0) slots_[b.slot_mapping[t]] = b.token_ids[t];
  }
  tokens_computed += rec.num_tokens;
  size_t row = 0;
  for (const StepSequence& s : b.seqs) {
    if (s.is_decode) {
      ++rec.num_decode_seqs;
    } else {
      rec.prefill_chunk_lens.push_back(s.query_len);
    }
    const int32_t end = s.num_computed_tokens + s.query_len;
    for (int32_t last = end - s.num_logits; last < end; ++last) {
      std::vector<int32_t> context;  // positions [0, last]
      for (int32_t p = 0; p <= last; ++p) {
        context.push_back(slots_[s.block_table[p / bs] * bs + p % bs]);
      }
      std::span<float> l = logits.subspan(row++ * kFakeVocab, kFakeVocab);
      std::fill(l.begin(), l.end(), 0.0f);
      const int32_t next = NextToken(context);
      l[next] = 10.0f;
      l[3 + 'a' + (next - 3 - 'a' + 1) % 26] = 9.0f;  // a close second for sampling tests
    }
  }
  steps.push_back(rec);
  return Status::Ok();
}

}  // namespace pagoda::testing
