#include "scheduler/structured_output.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

namespace pagoda {
namespace {

// Tokens that stand for text in the output; control, unknown and unused ones never do.
bool IsTextToken(TokenKind kind) {
  return kind == TokenKind::kNormal || kind == TokenKind::kByte || kind == TokenKind::kUserDefined;
}

void SetBit(std::vector<uint64_t>& words, int32_t id, bool on) {
  if (id < 0 || static_cast<size_t>(id / 64) >= words.size()) return;
  uint64_t& word = words[static_cast<size_t>(id / 64)];
  const uint64_t bit = uint64_t{1} << (id % 64);
  word = on ? (word | bit) : (word & ~bit);
}

}  // namespace

StructuredOutput::StructuredOutput(const Tokenizer& tokenizer, std::vector<int32_t> eos_token_ids)
    : tokenizer_(tokenizer), eos_token_ids_(std::move(eos_token_ids)) {}

StructuredOutput::~StructuredOutput() = default;

const std::shared_ptr<const grammar::TokenTrie>& StructuredOutput::Trie() {
  if (trie_) return trie_;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer_.vocab_size()));
  for (int32_t id = 0; id < tokenizer_.vocab_size(); ++id) {
    if (IsTextToken(tokenizer_.Kind(id)))
      bytes[static_cast<size_t>(id)] = tokenizer_.TokenBytes(id);
  }
  trie_ = std::make_shared<const grammar::TokenTrie>(bytes, eos_token_ids_);
  stats_.trie_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return trie_;
}

grammar::TokenMaskCache& StructuredOutput::CacheFor(const grammar::GrammarMatcher& matcher) {
  const auto hit = std::find_if(caches_.begin(), caches_.end(), [&](const MaskCacheEntry& c) {
    return c.grammar == matcher.grammar();
  });
  if (hit != caches_.end()) {
    std::rotate(caches_.begin(), hit, hit + 1);  // most recent first
    return *caches_.front().cache;
  }
  if (caches_.size() == kMaxGrammarCaches) caches_.pop_back();
  caches_.insert(caches_.begin(),
                 {matcher.grammar(), std::make_unique<grammar::TokenMaskCache>(Trie())});
  return *caches_.front().cache;
}

std::span<const uint64_t> StructuredOutput::AllowedTokens(const grammar::GrammarMatcher& matcher,
                                                          const StoppingCriteria& stopping) {
  Trie();  // built once, outside the mask timing
  const auto start = std::chrono::steady_clock::now();
  grammar::TokenMaskCache& cache = CacheFor(matcher);
  const size_t hits_before = cache.hits();
  mask_ = cache.Get(matcher);
  const bool accepting = matcher.IsAccepting();
  if (stopping.ignore_eos) {
    for (int32_t id : eos_token_ids_) SetBit(mask_.words, id, false);
  }
  // A stop id ends the output whatever its bytes: allowed exactly where the grammar accepts.
  for (int32_t id : stopping.stop_token_ids) SetBit(mask_.words, id, accepting);
  ++stats_.num_masks;
  stats_.mask_cache_hits += static_cast<int64_t>(cache.hits() - hits_before);
  stats_.mask_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return mask_.words;
}

bool StructuredOutput::Advance(grammar::GrammarMatcher& matcher, int32_t token) const {
  if (!IsTextToken(tokenizer_.Kind(token))) return false;
  return matcher.Accept(tokenizer_.TokenBytes(token));
}

void StructuredOutput::PruneProposals(const grammar::GrammarMatcher& matcher,
                                      std::vector<int32_t>* proposals) const {
  grammar::GrammarMatcher probe = matcher;
  size_t keep = 0;
  while (keep < proposals->size() && Advance(probe, (*proposals)[keep])) ++keep;
  proposals->resize(keep);
}

}  // namespace pagoda
