#include "model/chat/jinja_text.h"

#include <algorithm>
#include <utility>

namespace pagoda::jinja {

Text::Text(std::string s, bool content) : str_(std::move(s)) {
  if (content) AddSpan(0, str_.size());
}

void Text::AddSpan(size_t begin, size_t end) {
  if (begin >= end) return;
  if (!content_.empty() && content_.back().end >= begin) {
    content_.back().end = std::max(content_.back().end, end);
  } else {
    content_.push_back({begin, end});
  }
}

void Text::Append(std::string_view s, bool content) {
  const size_t at = str_.size();
  str_.append(s);
  if (content) AddSpan(at, str_.size());
}

void Text::Append(const Text& t) {
  const size_t at = str_.size();
  str_.append(t.str_);
  for (const Span& s : t.content_) AddSpan(at + s.begin, at + s.end);
}

Text Text::Sub(size_t begin, size_t end) const {
  end = std::min(end, str_.size());
  begin = std::min(begin, end);
  Text out;
  out.str_ = str_.substr(begin, end - begin);
  for (const Span& s : content_) {
    if (s.end <= begin) continue;
    if (s.begin >= end) break;
    out.AddSpan(std::max(s.begin, begin) - begin, std::min(s.end, end) - begin);
  }
  return out;
}

void Text::MarkAllContent() {
  content_.clear();
  AddSpan(0, str_.size());
}

void Text::Clear() {
  str_.clear();
  content_.clear();
}

}  // namespace pagoda::jinja
