#include "model/tokenizer/special_tokens.h"

#include <algorithm>

namespace pagoda {

void SpecialTokenMatcher::Add(std::string_view text, int32_t id, bool anywhere) {
  if (text.empty() || !tokens_.emplace(text, Entry{id, anywhere}).second) return;
  const auto at = std::lower_bound(lengths_.begin(), lengths_.end(), text.size(), std::greater<>());
  if (at == lengths_.end() || *at != text.size()) lengths_.insert(at, text.size());
  first_byte_[static_cast<uint8_t>(text[0])] = true;
}

size_t SpecialTokenMatcher::Match(std::string_view rest, size_t span_room, int32_t* id) const {
  if (rest.empty() || !first_byte_[static_cast<uint8_t>(rest[0])]) return 0;
  for (const size_t len : lengths_) {
    if (len > rest.size()) continue;
    const auto it = tokens_.find(rest.substr(0, len));
    if (it == tokens_.end() || (!it->second.anywhere && len > span_room)) continue;
    *id = it->second.id;
    return len;
  }
  return 0;
}

void SplitOnSpecials(std::string_view text, std::span<const TextSpan> special_spans,
                     const SpecialTokenMatcher& matcher,
                     const std::function<void(std::string_view)>& plain,
                     const std::function<void(int32_t)>& token) {
  if (matcher.empty()) {
    if (!text.empty()) plain(text);
    return;
  }
  size_t fragment_start = 0;
  size_t pos = 0;
  size_t span = 0;
  while (pos < text.size()) {
    while (span < special_spans.size() &&
           special_spans[span].offset + special_spans[span].length <= pos) {
      ++span;
    }
    const bool in_span = span < special_spans.size() && special_spans[span].offset <= pos;
    const size_t room = in_span ? special_spans[span].offset + special_spans[span].length - pos : 0;
    int32_t id = -1;
    const size_t len = matcher.Match(text.substr(pos), room, &id);
    if (len == 0) {
      ++pos;
      continue;
    }
    if (pos > fragment_start) plain(text.substr(fragment_start, pos - fragment_start));
    token(id);
    pos += len;
    fragment_start = pos;
  }
  if (pos > fragment_start) plain(text.substr(fragment_start, pos - fragment_start));
}

}  // namespace pagoda
