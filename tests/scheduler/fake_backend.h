// A deterministic fake Backend for engine/scheduler tests. Its "KV cache" stores token ids per
// slot; the logits for a sequence's last token depend on the whole context READ BACK THROUGH
// THE BLOCK TABLE, so any bookkeeping bug (wrong slot, lost copy-on-write, bad recompute after
// preemption, wrong prefix-cache hit, a stale speculative token) changes the generated tokens.
// With copy_period P > 0 the greedy token repeats the token P positions back when that is a
// lowercase letter (so n-gram speculation finds matches); otherwise FakeNextToken. Every step is
// first checked exactly as the real backends check theirs (kernels/step_batch_check.h
// ValidateStepBatch) against the engine config's caps: a step the CPU backend would reject fails
// here too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "model/tokenizer/spm_tokenizer.h"
#include "scheduler/scheduler.h"

namespace pagoda::testing {

// Vocabulary: <unk>, <s>, </s>, then the 256 byte tokens (id = 3 + byte).
inline constexpr int32_t kFakeVocab = 259;
inline int32_t ByteToken(char c) { return 3 + static_cast<unsigned char>(c); }

std::unique_ptr<Tokenizer> MakeByteTokenizer();

// The greedy next token after `context`: a lowercase letter chosen by a hash of the context.
int32_t FakeNextToken(const std::vector<int32_t>& context);
// Greedy continuation of `prompt` for max_tokens tokens (no end token ever wins).
std::vector<int32_t> FakeGreedy(std::vector<int32_t> prompt, int32_t max_tokens);

struct FakeStepRecord {
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_decode_seqs = 0;
  std::vector<int32_t> prefill_chunk_lens;
};

class FakeBackend : public Backend {
 public:
  // Its step caps are the engine's (`limits`), as runtime/ gives the real backends.
  FakeBackend(int32_t num_blocks, int32_t block_size, const SchedulerConfig& limits,
              int32_t max_model_len = 4096);

  Status Execute(const StepBatch& batch, std::span<float> logits) override;
  const BackendCapabilities& capabilities() const override { return caps_; }
  int32_t vocab_size() const override { return kFakeVocab; }

  std::vector<FakeStepRecord> steps;
  std::vector<Status> rejected_steps;  // steps ValidateStepBatch refused (also returned)
  int64_t tokens_computed = 0;
  bool fail_next_step = false;
  // Called at the start of every Execute (e.g. to abort a request mid-run).
  std::function<void(int64_t step)> on_step;
  int32_t copy_period = 0;  // see above
  void multi_token_logits(bool on) { caps_.multi_token_logits = on; }

 private:
  int32_t NextToken(const std::vector<int32_t>& context) const;

  BackendCapabilities caps_;
  std::vector<int32_t> slots_;  // token id stored per slot, -1 = never written
};

}  // namespace pagoda::testing
