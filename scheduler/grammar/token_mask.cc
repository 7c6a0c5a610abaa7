// Token masks (token_mask.h): the trie walk and the LRU cache of masks.
#include "scheduler/grammar/token_mask.h"

#include <algorithm>
#include <bit>

#include "scheduler/grammar/grammar_internal.h"
#include "scheduler/grammar/mask_automaton.h"

namespace pagoda::grammar {

size_t TokenMask::Count() const {
  size_t n = 0;
  for (uint64_t w : words) n += static_cast<size_t>(std::popcount(w));
  return n;
}

// ---------------------------------------------------------------------------------------------
// TokenMasker

struct TokenMasker::Impl {
  explicit Impl(size_t max_memo_positions) : automaton(max_memo_positions) {}
  internal::MaskAutomaton automaton;
  std::vector<int32_t> handle_at;  // per trie depth: the state after the path's bytes
};

TokenMasker::TokenMasker(size_t max_memo_positions)
    : impl_(std::make_unique<Impl>(max_memo_positions)) {}
TokenMasker::~TokenMasker() = default;
TokenMasker::TokenMasker(TokenMasker&&) noexcept = default;
TokenMasker& TokenMasker::operator=(TokenMasker&&) noexcept = default;

// Walks the trie in preorder; a rejected node skips its subtree, and a node below which every
// byte leads back to its state takes its whole subtree at once.
void TokenMasker::Compute(const GrammarMatcher& matcher, const TokenTrie& trie, TokenMask* mask) {
  using internal::MaskAutomaton;
  mask->words.assign((static_cast<size_t>(trie.vocab_size_) + 63) / 64, 0);
  uint64_t* words = mask->words.data();
  if (matcher.IsAccepting()) {
    for (int32_t id : trie.end_ids_) words[id >> 6] |= uint64_t{1} << (id & 63);
  }
  MaskAutomaton& a = impl_->automaton;
  std::vector<int32_t>& handle_at = impl_->handle_at;
  handle_at.assign(trie.max_depth_ + 1, MaskAutomaton::kDead);
  handle_at[0] =
      a.Reset(matcher.grammar(), internal::MatcherAccess::Stacks(matcher), trie.max_depth_);
  if (handle_at[0] == MaskAutomaton::kDead) return;
  const TokenTrie::Node* nodes = trie.nodes_.data();
  const int32_t* tokens = trie.tokens_.data();
  const size_t end = trie.nodes_.size() - 1;  // the sentinel
  size_t i = 1;
  while (i < end) {
    const TokenTrie::Node& node = nodes[i];
    const int32_t h =
        a.Next(handle_at[node.depth - 1], static_cast<uint8_t>(node.byte), node.depth);
    if (h == MaskAutomaton::kDead) {
      i = node.subtree_end;
      continue;
    }
    size_t next = i + 1;
    if (node.below_set != TokenTrie::kNoSet &&
        a.Loops(h, trie.below_sets_[node.below_set], node.depth)) {
      next = node.subtree_end;
    }
    handle_at[node.depth] = h;
    for (uint32_t k = node.token_begin; k < nodes[next].token_begin; ++k) {
      words[tokens[k] >> 6] |= uint64_t{1} << (tokens[k] & 63);
    }
    i = next;
  }
}

void ComputeTokenMask(const GrammarMatcher& matcher, const TokenTrie& trie, TokenMask* mask) {
  TokenMasker masker;
  masker.Compute(matcher, trie, mask);
}

// ---------------------------------------------------------------------------------------------
// TokenMaskCache

struct TokenMaskCache::Entry {
  uint64_t hash;
  GrammarMatcher matcher;
  TokenMask mask;
  uint64_t last_used;
};

TokenMaskCache::TokenMaskCache(std::shared_ptr<const TokenTrie> trie, size_t capacity)
    : trie_(std::move(trie)), capacity_(std::max<size_t>(capacity, 1)) {}

TokenMaskCache::~TokenMaskCache() = default;

const TokenMask& TokenMaskCache::Get(const GrammarMatcher& matcher) {
  const uint64_t h = matcher.StateHash();
  for (Entry& e : entries_) {
    if (e.hash == h && e.matcher.SameState(matcher)) {
      e.last_used = ++clock_;
      ++hits_;
      return e.mask;
    }
  }
  ++misses_;
  Entry* slot = nullptr;
  if (entries_.size() < capacity_) {
    entries_.push_back(Entry{h, matcher, {}, 0});
    slot = &entries_.back();
  } else {
    slot = &*std::min_element(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
      return a.last_used < b.last_used;
    });
    slot->hash = h;
    slot->matcher = matcher;
  }
  masker_.Compute(matcher, *trie_, &slot->mask);
  slot->last_used = ++clock_;
  return slot->mask;
}

}  // namespace pagoda::grammar
