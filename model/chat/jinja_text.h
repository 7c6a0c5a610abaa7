// Text: a string together with the byte ranges of it that came from content (the render
// variables: message text, tool definitions...) rather than from the template itself.
//
// Every string value of the renderer is a Text, so provenance follows the data: concatenation,
// slicing, strip/trim and split keep exact ranges; a transformation that rewrites characters
// (upper, replace, tojson, ...) marks its whole result as content when any input byte was
// content (the safe direction: a tokenizer recognises special tokens only outside content).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::jinja {

struct Span {
  size_t begin = 0;
  size_t end = 0;  // exclusive
};

class Text {
 public:
  Text() = default;
  explicit Text(std::string s, bool content = false);

  const std::string& str() const { return str_; }
  size_t size() const { return str_.size(); }
  // Sorted, disjoint, non-adjacent byte ranges of content.
  const std::vector<Span>& content() const { return content_; }
  bool has_content() const { return !content_.empty(); }

  void Append(std::string_view s, bool content);
  void Append(const Text& t);
  // Bytes [begin, end) with their provenance.
  Text Sub(size_t begin, size_t end) const;
  void MarkAllContent();
  void Clear();

 private:
  void AddSpan(size_t begin, size_t end);

  std::string str_;
  std::vector<Span> content_;
};

}  // namespace pagoda::jinja
