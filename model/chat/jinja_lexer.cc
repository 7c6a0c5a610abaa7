#include "model/chat/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// "\r\n" and "\r" become "\n"; one trailing newline is dropped (keep_trailing_newline=False).
std::string NormalizeSource(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// End of the Python-whitespace run starting at `pos`.
size_t SkipSpace(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t next = pos;
    if (!IsPySpace(DecodeUtf8(s, &next))) break;
    pos = next;
  }
  return pos;
}

// Length of `s` without its trailing Python whitespace (str.rstrip()).
size_t RStripLength(std::string_view s) {
  size_t keep = 0;
  for (size_t i = 0; i < s.size();) {
    if (!IsPySpace(DecodeUtf8(s, &i))) keep = i;
  }
  return keep;
}

// End of `(\d+_)*\d+` at pos, or npos.
size_t MatchDigitGroups(std::string_view s, size_t pos) {
  if (pos >= s.size() || !IsDigit(s[pos])) return std::string_view::npos;
  size_t i = pos;
  while (true) {
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i + 1 < s.size() && s[i] == '_' && IsDigit(s[i + 1])) {
      ++i;
      continue;
    }
    return i;
  }
}

// End of jinja2's float_re at pos, or npos.
size_t MatchFloat(std::string_view s, size_t pos) {
  const size_t npos = std::string_view::npos;
  if (pos > 0 && s[pos - 1] == '.') return npos;
  const size_t int_end = MatchDigitGroups(s, pos);
  if (int_end == npos) return npos;
  auto exponent = [&](size_t at) -> size_t {
    if (at >= s.size() || Lower(s[at]) != 'e') return npos;
    ++at;
    if (at < s.size() && (s[at] == '+' || s[at] == '-')) ++at;
    return MatchDigitGroups(s, at);
  };
  size_t frac_end = npos;
  if (int_end < s.size() && s[int_end] == '.') frac_end = MatchDigitGroups(s, int_end + 1);
  if (frac_end != npos) {
    const size_t e = exponent(frac_end);
    return e != npos ? e : frac_end;
  }
  return exponent(int_end);
}

// End of jinja2's integer_re at pos (and its base), or npos.
size_t MatchInteger(std::string_view s, size_t pos, int* base) {
  const size_t npos = std::string_view::npos;
  if (pos >= s.size() || !IsDigit(s[pos])) return npos;
  auto digits = [&](size_t at, auto is_digit) -> size_t {  // (_?D)+
    size_t i = at;
    while (true) {
      if (i < s.size() && is_digit(Lower(s[i]))) {
        ++i;
      } else if (i + 1 < s.size() && s[i] == '_' && is_digit(Lower(s[i + 1]))) {
        i += 2;
      } else {
        return i == at ? npos : i;
      }
    }
  };
  if (s[pos] == '0' && pos + 1 < s.size()) {
    const char p = Lower(s[pos + 1]);
    size_t end = npos;
    if (p == 'b') end = digits(pos + 2, [](char c) { return c == '0' || c == '1'; }), *base = 2;
    if (p == 'o') end = digits(pos + 2, [](char c) { return c >= '0' && c <= '7'; }), *base = 8;
    if (p == 'x') {
      end = digits(pos + 2, [](char c) { return IsDigit(c) || (c >= 'a' && c <= 'f'); });
      *base = 16;
    }
    if (end != npos) return end;
  }
  *base = 10;
  if (s[pos] == '0') {
    const size_t end = digits(pos + 1, [](char c) { return c == '0'; });
    return end == npos ? pos + 1 : end;
  }
  const size_t end = digits(pos + 1, [](char c) { return IsDigit(c); });
  return end == npos ? pos + 1 : end;
}

int HexValue(char c) {
  c = Lower(c);
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The one-character escapes (\n, \t, \', ...): appends the character; false for others.
bool SimpleEscape(char c, std::string* out) {
  static constexpr std::string_view kFrom = "\\'\"abfnrtv";
  static constexpr std::string_view kTo = "\\'\"\a\b\f\n\r\t\v";
  const size_t at = kFrom.find(c);
  if (at == std::string_view::npos) return false;
  out->push_back(kTo[at]);
  return true;
}

// \xhh, \uhhhh, \Uhhhhhhhh at body[*i] (the letter); advances *i to the last digit.
Status HexEscape(std::string_view body, size_t* i, std::string* out) {
  const char c = body[*i];
  const int width = c == 'x' ? 2 : (c == 'u' ? 4 : 8);
  char32_t v = 0;
  for (int k = 1; k <= width; ++k) {
    const int h = *i + k < body.size() ? HexValue(body[*i + k]) : -1;
    if (h < 0) return InvalidArgument(std::string("truncated \\") + c + " escape");
    v = v * 16 + static_cast<char32_t>(h);
  }
  if (v > 0x10FFFF) return InvalidArgument("illegal Unicode character");
  *i += width;
  AppendUtf8(out, v);
  return Status::Ok();
}

// Python's unicode-escape decoding of a string literal's body.
Result<std::string> Unescape(std::string_view body) {
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    if (c == '\n' || SimpleEscape(c, &out)) continue;  // backslash-newline continues the line
    if (c >= '0' && c <= '7') {
      int v = 0, n = 0;
      for (; n < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++n, ++i) {
        v = v * 8 + (body[i] - '0');
      }
      --i;
      AppendUtf8(&out, static_cast<char32_t>(v));
    } else if (c == 'x' || c == 'u' || c == 'U') {
      PAGODA_RETURN_IF_ERROR(HexEscape(body, &i, &out));
    } else if (c == 'N') {
      return InvalidArgument("\\N{...} escapes are not supported");
    } else {
      out += '\\';  // an unknown escape stays as it is
      out += c;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  Result<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      const size_t start = NextTag(pos_);
      if (start == std::string::npos) {
        EmitData(src_.substr(pos_), pos_);
        break;
      }
      PAGODA_RETURN_IF_ERROR(LexAt(start));
    }
    Token eof;
    eof.kind = TokenKind::kEof;
    eof.line = Line(src_.size());
    out_.push_back(std::move(eof));
    return std::move(out_);
  }

 private:
  size_t NextTag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  int Line(size_t pos) {
    if (pos < line_pos_) line_pos_ = 0, line_ = 1;
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_) {
      if (src_[line_pos_] == '\n') ++line_;
    }
    return line_;
  }

  Status Error(size_t pos, const std::string& msg) {
    return InvalidArgument("syntax error, line " + std::to_string(Line(pos)) + ": " + msg);
  }

  void Emit(TokenKind kind, std::string text, size_t pos) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.line = Line(pos);
    out_.push_back(std::move(t));
  }

  void EmitData(std::string text, size_t pos) {
    if (!text.empty()) Emit(TokenKind::kData, std::move(text), pos);
  }

  // Whitespace control on the text in front of a tag ('{', '%' or '#'; sign '-', '+' or 0).
  std::string StripBeforeTag(std::string text, char kind, char sign) const {
    if (sign == '-') {
      text.resize(RStripLength(text));
    } else if (sign != '+' && kind != '{') {  // lstrip_blocks
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() &&
          SkipSpace(text, l_pos) == text.size()) {
        text.resize(l_pos);
      }
    }
    return text;
  }

  // The tag opening at `start` ("{{", "{%" or "{#"), with the text in front of it.
  Status LexAt(size_t start) {
    const char kind = src_[start + 1];
    size_t p = start + 2;
    char sign = 0;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
    size_t raw_body = 0;
    const bool raw = kind == '%' && MatchRawBegin(p, &raw_body);
    EmitData(StripBeforeTag(src_.substr(pos_, start - pos_), kind, sign), pos_);
    if (raw) {
      line_starting_ = src_[raw_body - 1] == '\n';
      return LexRaw(raw_body);
    }
    if (kind == '#') return LexComment(p);
    return LexTag(kind == '%', start, p);
  }

  // `\s*raw\s*(-%}\s*|%})` at p; *body = where the raw text starts.
  bool MatchRawBegin(size_t p, size_t* body) const {
    p = SkipSpace(src_, p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = SkipSpace(src_, p + 3);
    if (src_.compare(p, 3, "-%}") == 0) {
      *body = SkipSpace(src_, p + 3);
      return true;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      *body = p + 2;
      return true;
    }
    return false;
  }

  // The end of a block-style tag whose marker ("%}" / "#}") starts at `at` after `sign`.
  size_t EndOfBlockTag(size_t at, char sign) const {
    const size_t end = at + 2;
    if (sign == '-') return SkipSpace(src_, end);
    if (sign == '+') return end;
    return (end < src_.size() && src_[end] == '\n') ? end + 1 : end;  // trim_blocks
  }

  void FinishTag(size_t end) {
    pos_ = end;
    line_starting_ = end > 0 && src_[end - 1] == '\n';
  }

  Status LexRaw(size_t body) {
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t p = i + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = SkipSpace(src_, p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = SkipSpace(src_, p + 6);
      char end_sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) end_sign = src_[p++];
      if (src_.compare(p, 2, "%}") != 0) continue;
      pos_ = body;
      EmitData(StripBeforeTag(src_.substr(body, i - body), '%', sign), body);
      FinishTag(EndOfBlockTag(p, end_sign));
      return Status::Ok();
    }
    return Error(body, "Missing end of raw directive");
  }

  Status LexComment(size_t body) {
    const size_t q = src_.find("#}", body);
    if (q == std::string::npos) return Error(body, "Missing end of comment tag");
    char sign = 0;
    if (q > body && (src_[q - 1] == '-' || src_[q - 1] == '+')) sign = src_[q - 1];
    FinishTag(EndOfBlockTag(q, sign));
    return Status::Ok();
  }

  // Tries the tag's end marker at p (only outside brackets); true when the tag ended.
  bool TryTagEnd(bool block, size_t p) {
    const char* marker = block ? "%}" : "}}";
    char sign = 0;
    size_t at = p;
    if (src_[p] == '-' || (block && src_[p] == '+')) sign = src_[p], at = p + 1;
    if (src_.compare(at, 2, marker) != 0) return false;
    Emit(block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, "", p);
    FinishTag(block ? EndOfBlockTag(at, sign) : (sign == '-' ? SkipSpace(src_, at + 2) : at + 2));
    return true;
  }

  Status LexTag(bool block, size_t start, size_t p) {
    Emit(block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, "", start);
    brackets_.clear();
    while (true) {
      p = SkipSpace(src_, p);
      if (p >= src_.size()) {
        return Error(
            p, std::string("unexpected end of template, expected '") + (block ? "%}" : "}}") + "'");
      }
      if (brackets_.empty() && TryTagEnd(block, p)) return Status::Ok();
      PAGODA_ASSIGN_OR_RETURN(p, LexToken(p));
    }
  }

  Result<size_t> LexToken(size_t p) {
    const char c = src_[p];
    if (size_t end = MatchFloat(src_, p); end != std::string_view::npos) {
      std::string digits;
      for (size_t i = p; i < end; ++i) {
        if (src_[i] != '_') digits += src_[i];
      }
      Emit(TokenKind::kFloat, src_.substr(p, end - p), p);
      out_.back().float_value = std::strtod(digits.c_str(), nullptr);
      return end;
    }
    int base = 10;
    if (size_t end = MatchInteger(src_, p, &base); end != std::string_view::npos) {
      return LexInteger(p, end, base);
    }
    if (IsNameStart(c)) {
      size_t end = p;
      while (end < src_.size() && IsNameChar(src_[end])) ++end;
      Emit(TokenKind::kName, src_.substr(p, end - p), p);
      return end;
    }
    if (c == '\'' || c == '"') return LexString(p);
    return LexOperator(p);
  }

  Result<size_t> LexInteger(size_t p, size_t end, int base) {
    std::string digits;
    for (size_t i = (base == 10 ? p : p + 2); i < end; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    errno = 0;
    const unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      return Error(p, "integer literal " + src_.substr(p, end - p) + " is too large");
    }
    Emit(TokenKind::kInt, src_.substr(p, end - p), p);
    out_.back().int_value = static_cast<int64_t>(v);
    return end;
  }

  Result<size_t> LexString(size_t p) {
    const char quote = src_[p];
    size_t i = p + 1;
    while (i < src_.size() && src_[i] != quote) i += (src_[i] == '\\') ? 2 : 1;
    if (i >= src_.size())
      return Error(p, std::string("unterminated string starting with ") + quote);
    auto value = Unescape(std::string_view(src_).substr(p + 1, i - p - 1));
    if (!value.ok()) return Error(p, value.status().message());
    Emit(TokenKind::kString, std::move(value).value(), p);
    return i + 1;
  }

  Result<size_t> LexOperator(size_t p) {
    static constexpr std::string_view kTwo[] = {"**", "//", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (src_.compare(p, 2, op) == 0) {
        Emit(TokenKind::kOp, std::string(op), p);
        return p + 2;
      }
    }
    const char c = src_[p];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      size_t next = p;
      std::string ch;
      AppendUtf8(&ch, DecodeUtf8(src_, &next));
      return Error(p, "unexpected char '" + ch + "'");
    }
    PAGODA_RETURN_IF_ERROR(Balance(c, p));
    Emit(TokenKind::kOp, std::string(1, c), p);
    return p + 1;
  }

  Status Balance(char c, size_t p) {
    if (c == '(' || c == '[' || c == '{') {
      brackets_.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets_.empty()) return Error(p, std::string("unexpected '") + c + "'");
      const char expected = brackets_.back();
      brackets_.pop_back();
      if (expected != c) {
        return Error(p, std::string("unexpected '") + c + "', expected '" + expected + "'");
      }
    }
    return Status::Ok();
  }

  std::string src_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<Token> out_;
  std::string brackets_;
  size_t line_pos_ = 0;
  int line_ = 1;
};

}  // namespace

Result<std::vector<Token>> Lex(std::string_view source) {
  return Lexer(NormalizeSource(source)).Run();
}

}  // namespace pagoda::jinja
