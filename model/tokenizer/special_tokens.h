// Special-token text in a string: which tokens are spelled out where, for the encoders of
// bpe_tokenizer.cc and spm_tokenizer.cc (Tokenizer::EncodeWithSpecials in model/tokenizer.h).
//
// A SpecialTokenMatcher holds token texts with their ids, each either "anywhere" (matched in
// any text: user-defined / added tokens) or "in spans only" (control tokens: matched only when
// the whole match lies inside one of the caller's special spans, e.g. the bytes a chat template
// wrote itself). SplitOnSpecials walks a text leftmost-longest and hands out plain-text
// fragments and matched token ids in order.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/tokenizer.h"

namespace pagoda {

class SpecialTokenMatcher {
 public:
  // Adds `text`, which must outlive the matcher (the tokenizer's own vocabulary); ignored when
  // empty or already present (the first id wins).
  void Add(std::string_view text, int32_t id, bool anywhere);
  // The longest token at the start of `rest`; a span-only token must be at most `span_room`
  // bytes long. Returns its length (0: none) and sets *id.
  size_t Match(std::string_view rest, size_t span_room, int32_t* id) const;
  bool empty() const { return tokens_.empty(); }

 private:
  struct Entry {
    int32_t id;
    bool anywhere;
  };
  std::unordered_map<std::string_view, Entry> tokens_;
  std::vector<size_t> lengths_;  // distinct, longest first
  std::array<bool, 256> first_byte_{};
};

// Splits `text` into plain fragments (`plain`, never empty) and matched tokens (`token`), in
// order. `special_spans` must be sorted and non-overlapping.
void SplitOnSpecials(std::string_view text, std::span<const TextSpan> special_spans,
                     const SpecialTokenMatcher& matcher,
                     const std::function<void(std::string_view)>& plain,
                     const std::function<void(int32_t)>& token);

}  // namespace pagoda
