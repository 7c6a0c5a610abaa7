#include "scheduler/draft_proposer.h"

#include <algorithm>

namespace pagoda {

DraftProposer::DraftProposer(Backend& backend)
    : backend_(backend),
      kv_(backend.capabilities().num_blocks, backend.capabilities().block_size,
          /*enable_prefix_caching=*/false) {}

void DraftProposer::Propose(std::span<const DraftRequest> requests) {
  std::vector<Work> works;
  works.reserve(requests.size());
  for (const DraftRequest& r : requests) {
    r.seq->draft_token_ids.clear();
    Work w;
    w.seq = r.seq;
    w.num_tokens = r.num_tokens;
    if (Reconcile(w)) works.push_back(std::move(w));
  }
  if (works.empty()) return;
  RunCatchUp(works);
  RunDecodeRounds(works);
  for (Work& w : works) {
    if (!w.failed) w.seq->draft_token_ids = std::move(w.proposals);
  }
}

void DraftProposer::Release(int64_t seq_id) {
  if (kv_.HasSequence(seq_id)) (void)kv_.Free(seq_id);
  cached_.erase(seq_id);
}

// Keeps the longest prefix of the sequence's draft KV that matches its tokens (at most all but
// the last token, which must run to give logits): the rest is caught up on; limits num_tokens to
// the draft model's context. False: no proposals for this sequence now.
bool DraftProposer::Reconcile(Work& w) {
  const std::vector<int32_t>& tokens = w.seq->token_ids;
  const int64_t max_len = backend_.capabilities().max_model_len;
  // Proposal i (1-based) needs positions up to tokens.size() + i - 2 to have run.
  const int64_t room = max_len - static_cast<int64_t>(tokens.size()) + 1;
  w.num_tokens = static_cast<int32_t>(std::min<int64_t>(w.num_tokens, room));
  if (w.num_tokens <= 0 || tokens.empty()) return false;
  const int64_t seq_id = w.seq->seq_id;
  std::vector<int32_t>& cached = cached_[seq_id];
  const size_t common =
      std::mismatch(cached.begin(), cached.end(), tokens.begin(), tokens.end()).first -
      cached.begin();
  const size_t keep = std::min(common, tokens.size() - 1);
  if (keep < cached.size()) {
    if (!kv_.TruncateSlots(seq_id, static_cast<int32_t>(keep)).ok()) {
      Release(seq_id);
      return false;
    }
    cached.resize(keep);
  }
  w.cached = &cached;  // unordered_map values stay put while others are added
  return true;
}

// Runs every work's tokens past its draft KV as prefill chunks, as many sequences and tokens per
// step as the draft backend's caps allow; the step that runs its last token gives proposal 1.
void DraftProposer::RunCatchUp(std::vector<Work>& works) {
  const BackendCapabilities& caps = backend_.capabilities();
  for (;;) {
    std::vector<size_t> members;
    std::vector<int32_t> lens;
    std::vector<char> wants;  // 1: the chunk ends the catch-up (its last row gives a proposal)
    int32_t budget = caps.max_num_batched_tokens;
    for (size_t i = 0; i < works.size() && budget > 0; ++i) {
      Work& w = works[i];
      if (w.failed || w.left_to_catch_up() == 0) continue;
      if (static_cast<int32_t>(members.size()) == caps.max_num_seqs) break;
      const size_t left = w.left_to_catch_up();
      const int32_t n = static_cast<int32_t>(std::min<size_t>(left, budget));
      members.push_back(i);
      lens.push_back(n);
      wants.push_back(static_cast<size_t>(n) == left);
      budget -= n;
    }
    if (members.empty()) return;
    RunStep(works, members, lens, wants, /*decode=*/false);
  }
}

// Proposals 2..k: one single-token decode step per round over the works that want more.
void DraftProposer::RunDecodeRounds(std::vector<Work>& works) {
  const BackendCapabilities& caps = backend_.capabilities();
  const int32_t per_step = std::min(caps.max_num_seqs, caps.max_num_batched_tokens);
  for (;;) {
    std::vector<size_t> members;
    for (size_t i = 0; i < works.size(); ++i) {
      const Work& w = works[i];
      const int32_t have = static_cast<int32_t>(w.proposals.size());
      if (!w.failed && have >= 1 && have < w.num_tokens) members.push_back(i);
    }
    if (members.empty()) return;
    for (size_t from = 0; from < members.size(); from += static_cast<size_t>(per_step)) {
      const size_t to = std::min(members.size(), from + static_cast<size_t>(per_step));
      const std::span<const size_t> part(members.data() + from, to - from);
      const std::vector<int32_t> lens(part.size(), 1);
      const std::vector<char> wants(part.size(), 1);
      RunStep(works, part, lens, wants, /*decode=*/true);
    }
  }
}

void DraftProposer::RunStep(std::vector<Work>& works, std::span<const size_t> members,
                            std::span<const int32_t> lens, std::span<const char> wants_logits,
                            bool decode) {
  // Reserve first (a sequence the cache cannot hold drops out), then lay out the batch: block
  // tables are read after every allocation of the step.
  std::vector<size_t> ran;
  std::vector<int32_t> ran_lens;
  std::vector<char> ran_wants;
  for (size_t m = 0; m < members.size(); ++m) {
    Work& w = works[members[m]];
    const int64_t seq_id = w.seq->seq_id;
    const int32_t* first = StepTokens(w, decode);
    const Status st = kv_.HasSequence(seq_id)
                          ? kv_.AllocateSlots(seq_id, lens[m])
                          : kv_.AllocatePrompt(seq_id, {first, size_t(lens[m])}, lens[m]).status();
    if (!st.ok()) {
      // The draft cache is full: a decode round keeps the proposals so far, a catch-up has none.
      if (decode) {
        w.num_tokens = static_cast<int32_t>(w.proposals.size());
      } else {
        Drop(w);
      }
      continue;
    }
    ran.push_back(members[m]);
    ran_lens.push_back(lens[m]);
    ran_wants.push_back(wants_logits[m]);
  }
  if (ran.empty()) return;
  token_ids_.clear();
  slot_mapping_.clear();
  step_seqs_.clear();
  int32_t rows = 0;
  for (size_t m = 0; m < ran.size(); ++m) {
    Work& w = works[ran[m]];
    const int64_t seq_id = w.seq->seq_id;
    const int32_t start = static_cast<int32_t>(token_ids_.size());
    const int32_t computed = static_cast<int32_t>(w.cached->size());
    const int32_t* first = StepTokens(w, decode);
    token_ids_.insert(token_ids_.end(), first, first + ran_lens[m]);
    slot_mapping_.resize(token_ids_.size());
    (void)kv_.GetSlotMapping(seq_id, computed,
                             std::span<int32_t>(slot_mapping_).subspan(start, ran_lens[m]));
    const int32_t num_logits = ran_wants[m] ? 1 : 0;
    step_seqs_.push_back(
        {start, ran_lens[m], computed, kv_.block_table(seq_id), decode, num_logits});
    rows += num_logits;
  }
  const size_t vocab = static_cast<size_t>(backend_.vocab_size());
  logits_.resize(static_cast<size_t>(rows) * vocab);
  const std::vector<BlockCopy> copies = kv_.TakePendingBlockCopies();
  const StepBatch batch{token_ids_, slot_mapping_, step_seqs_, copies};
  if (!backend_.Execute(batch, logits_).ok()) {
    for (size_t i : ran) Drop(works[i]);
    return;
  }
  size_t row = 0;
  for (size_t m = 0; m < ran.size(); ++m) {
    Work& w = works[ran[m]];
    const StepSequence& s = step_seqs_[m];
    w.cached->insert(w.cached->end(), token_ids_.begin() + s.query_start,
                     token_ids_.begin() + s.query_start + s.query_len);
    if (s.num_logits == 0) continue;
    const float* r = logits_.data() + row++ * vocab;
    w.proposals.push_back(static_cast<int32_t>(std::max_element(r, r + vocab) - r));
  }
}

// A step's tokens of w: its last proposal (decode), else the next ones it catches up on.
const int32_t* DraftProposer::StepTokens(const Work& w, bool decode) {
  return decode ? &w.proposals.back() : w.seq->token_ids.data() + w.cached->size();
}

// A draft-side failure: the sequence gets no proposals now; its draft KV is rebuilt later.
void DraftProposer::Drop(Work& w) {
  w.failed = true;
  Release(w.seq->seq_id);
}

}  // namespace pagoda
