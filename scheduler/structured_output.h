// StructuredOutput: the engine side of constrained generation (Request::grammar). For the
// OutputProcessor, it answers three questions about one sample's GrammarMatcher:
//   AllowedTokens   which tokens may come next: the text tokens the grammar can take (masked
//                   over a trie of the vocabulary, cached by matcher state) plus the end ids
//                   (EOS unless ignore_eos, the request's stop_token_ids) only where the grammar
//                   accepts. Control / unknown / unused tokens never appear as text;
//   Advance         feeds a sampled token's bytes to the matcher;
//   PruneProposals  cuts speculative proposals at the first token the grammar would refuse
//                   (verification would reject it anyway: this only saves the wasted slots).
// Masks are cached per grammar (the kMaxGrammarCaches most recently used grammars) and per
// state. The vocabulary trie is built from the tokenizer on first use (a server that never sees a
// constrained request never pays for it). Not thread-safe: the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/tokenizer.h"
#include "scheduler/grammar/grammar.h"
#include "scheduler/grammar/token_mask.h"
#include "scheduler/request.h"

namespace pagoda {

// Cost counters of constrained sampling (the engine's stats, `bench model --json`).
struct StructuredOutputStats {
  int64_t num_masks = 0;        // allowed-token masks computed or fetched (one per sampled token)
  double mask_seconds = 0.0;    // time spent on them
  int64_t mask_cache_hits = 0;  // of those, found in the cache of recent grammar states
  double trie_seconds = 0.0;    // building the vocabulary trie (once, at the first mask)
};

class StructuredOutput {
 public:
  static constexpr size_t kMaxGrammarCaches = 8;

  // `tokenizer` must outlive this; `eos_token_ids` are the model's end tokens.
  StructuredOutput(const Tokenizer& tokenizer, std::vector<int32_t> eos_token_ids);
  ~StructuredOutput();

  // The allowed-token bitmask for `matcher`'s next token under `stopping` (valid until the next
  // call). No bit set: nothing can continue the output (the caller ends the sample).
  std::span<const uint64_t> AllowedTokens(const grammar::GrammarMatcher& matcher,
                                          const StoppingCriteria& stopping);
  // Feeds text token `token` to `matcher`; false if the grammar refuses it (state unchanged).
  bool Advance(grammar::GrammarMatcher& matcher, int32_t token) const;
  // The longest prefix of `proposals` the grammar takes after `matcher`'s state.
  void PruneProposals(const grammar::GrammarMatcher& matcher,
                      std::vector<int32_t>* proposals) const;

  const StructuredOutputStats& stats() const { return stats_; }

 private:
  const std::shared_ptr<const grammar::TokenTrie>& Trie();
  grammar::TokenMaskCache& CacheFor(const grammar::GrammarMatcher& matcher);

  const Tokenizer& tokenizer_;
  const std::vector<int32_t> eos_token_ids_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  // One mask cache per recently used grammar, most recent first (a masker's automaton serves
  // one grammar: sharing one across concurrent constraints would rebuild it at every switch).
  // Each entry keeps its grammar alive, so a pointer is never reused while it is a key.
  struct MaskCacheEntry {
    std::shared_ptr<const grammar::Grammar> grammar;
    std::unique_ptr<grammar::TokenMaskCache> cache;
  };
  std::vector<MaskCacheEntry> caches_;
  grammar::TokenMask mask_;
  StructuredOutputStats stats_;
};

}  // namespace pagoda
