// Structured output, part 2: which vocabulary tokens keep the output a viable prefix.
//
// A `TokenTrie` is built once per model from every token's bytes (Tokenizer::TokenBytes);
// tokens with empty bytes (control / special tokens) and the end ids are never allowed as text.
// `TokenMasker::Compute` walks the trie from a matcher's state, pruning every subtree whose
// prefix the grammar rejects (as llama.cpp's grammar sampler and xgrammar do); the end-of-output
// ids (EOS, stop ids) are allowed only when the matcher is accepting. The walk memoizes the
// grammar's transitions per call (a lazily built automaton over the stack sets it meets), so a
// state where most tokens are allowed (inside a JSON string) costs about one table lookup per
// trie node. A `TokenMaskCache` keeps the masks of recent states (keyed by
// GrammarMatcher::StateHash + SameState), so the repeated states of a JSON string or number cost
// one lookup. Masker and cache are thread-compatible (one thread at a time, reusable buffers);
// the trie is shared and read-only after construction.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "scheduler/grammar/grammar.h"

namespace pagoda::grammar {

// A bitmask over the vocabulary: bit i of word i / 64 set = token i allowed.
struct TokenMask {
  std::vector<uint64_t> words;
  bool Allowed(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id / 64) < words.size() &&
           ((words[static_cast<size_t>(id / 64)] >> (id % 64)) & 1u);
  }
  size_t Count() const;  // allowed tokens
};

class TokenTrie {
 public:
  // token_bytes[i] = the bytes of token i ("" = never allowed as text); end_ids = EOS and
  // other ids that end the output (allowed only in accepting states; ids outside the vocabulary
  // are ignored).
  TokenTrie(std::span<const std::string> token_bytes, std::span<const int32_t> end_ids);
  int32_t vocab_size() const { return vocab_size_; }
  size_t num_nodes() const { return nodes_.size() - 1; }  // the root included

 private:
  friend class TokenMasker;
  void SetBelowSets(const std::vector<uint32_t>& parent);
  static constexpr uint32_t kNoSet = UINT32_MAX;
  struct Node {
    uint32_t subtree_end;  // nodes are in preorder: the subtree is [this, subtree_end)
    uint32_t token_begin;  // tokens ending here: tokens_[token_begin, next node's token_begin)
    uint32_t depth : 24;   // bytes from the root
    uint32_t byte : 8;     // the byte from the parent
    uint32_t below_set;    // large subtrees: below_sets_ index of the bytes under this node
  };
  std::vector<Node> nodes_;      // nodes_[0] is the root; a last sentinel closes token ranges
  std::vector<int32_t> tokens_;  // in preorder: a subtree's tokens are contiguous
  std::vector<std::array<uint64_t, 4>> below_sets_;
  std::vector<int32_t> end_ids_;
  int32_t vocab_size_ = 0;
  uint32_t max_depth_ = 0;
};

// Computes masks; keeps its buffers, and the grammar states and transitions it has met, between
// calls (for one grammar at a time; memory bounded by `max_memo_positions` stack entries).
class TokenMasker {
 public:
  explicit TokenMasker(size_t max_memo_positions = size_t{1} << 23);
  ~TokenMasker();
  TokenMasker(TokenMasker&&) noexcept;
  TokenMasker& operator=(TokenMasker&&) noexcept;

  // Fills `mask` (sized to the vocabulary) for `matcher`'s state. Allowed = text tokens the
  // matcher can accept (exactly those for which a copy's Accept(bytes) succeeds), plus the end
  // ids when it is accepting. No bit set means nothing can follow (the caller ends the output).
  void Compute(const GrammarMatcher& matcher, const TokenTrie& trie, TokenMask* mask);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-off TokenMasker::Compute (allocates its buffers; prefer a TokenMasker or the cache).
void ComputeTokenMask(const GrammarMatcher& matcher, const TokenTrie& trie, TokenMask* mask);

// The masks of the most recently used `capacity` states (LRU) over one trie.
class TokenMaskCache {
 public:
  explicit TokenMaskCache(std::shared_ptr<const TokenTrie> trie, size_t capacity = 128);
  ~TokenMaskCache();

  // The mask of `matcher`'s state, computed on a miss. Valid until the next call.
  const TokenMask& Get(const GrammarMatcher& matcher);
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }

 private:
  struct Entry;
  std::shared_ptr<const TokenTrie> trie_;
  size_t capacity_;
  std::vector<Entry> entries_;
  TokenMasker masker_;
  uint64_t clock_ = 0;
  size_t hits_ = 0, misses_ = 0;
};

}  // namespace pagoda::grammar
