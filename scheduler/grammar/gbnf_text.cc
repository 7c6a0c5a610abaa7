#include "scheduler/grammar/gbnf_text.h"

#include <algorithm>

namespace pagoda::grammar::gbnf {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

// Printable ASCII written as itself inside a literal / class; everything else is escaped.
bool RawInLiteral(uint32_t cp) { return cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\'; }
bool RawInClass(uint32_t cp) {
  return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
         cp == ' ' || cp == '_' || cp == '.' || cp == ',' || cp == ':' || cp == '@';
}

void AppendHex(uint32_t v, int digits, std::string& out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int i = digits - 1; i >= 0; --i) out += kHex[(v >> (4 * i)) & 0xF];
}

void AppendEscaped(uint32_t cp, bool raw, std::string& out) {
  if (raw) {
    out += static_cast<char>(cp);
  } else if (cp < 0x100) {
    out += "\\x";
    AppendHex(cp, 2, out);
  } else if (cp < 0x10000) {
    out += "\\u";
    AppendHex(cp, 4, out);
  } else {
    out += "\\U";
    AppendHex(cp, 8, out);
  }
}

int Utf8Length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 6) return 2;
  if ((c >> 4) == 14) return 3;
  if ((c >> 3) == 30) return 4;
  return 0;
}

}  // namespace

Result<std::u32string> Utf8ToCodepoints(std::string_view text) {
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const int len = Utf8Length(c);
    if (len == 0 || i + static_cast<size_t>(len) > text.size()) {
      return InvalidArgument("invalid UTF-8 at byte " + std::to_string(i));
    }
    uint32_t v = len == 1 ? c : c & (0x7Fu >> len);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
      if ((b & 0xC0) != 0x80) return InvalidArgument("invalid UTF-8 at byte " + std::to_string(i));
      v = (v << 6) | (b & 0x3Fu);
    }
    if (v < kMin[len] || v > kMaxCodepoint || (v >= kSurrogateLo && v <= kSurrogateHi)) {
      return InvalidArgument("invalid UTF-8 at byte " + std::to_string(i));
    }
    out += static_cast<char32_t>(v);
    i += static_cast<size_t>(len);
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string GbnfLiteral(std::u32string_view cps) {
  std::string out = "\"";
  for (char32_t c : cps) {
    const auto cp = static_cast<uint32_t>(c);
    if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp >= 0x80) {
      AppendUtf8(cp, out);  // printable or not, the parser reads UTF-8 back as itself
    } else {
      AppendEscaped(cp, RawInLiteral(cp), out);
    }
  }
  return out + "\"";
}

std::string GbnfClass(std::span<const CpRange> ranges) {
  std::string out = "[";
  for (const CpRange& r : ranges) {
    AppendEscaped(r.lo, RawInClass(r.lo), out);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out += '-';
    AppendEscaped(r.hi, RawInClass(r.hi), out);
  }
  return out + "]";
}

std::vector<CpRange> NormalizeRanges(std::vector<CpRange> ranges) {
  std::vector<CpRange> split;
  for (CpRange r : ranges) {
    r.hi = std::min(r.hi, kMaxCodepoint);
    if (r.lo > r.hi) continue;
    if (r.lo < kSurrogateLo && r.hi > kSurrogateHi) {
      split.push_back({r.lo, kSurrogateLo - 1});
      split.push_back({kSurrogateHi + 1, r.hi});
    } else if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      split.push_back(r);
    } else if (r.lo < kSurrogateLo) {
      split.push_back({r.lo, kSurrogateLo - 1});
    } else if (r.hi > kSurrogateHi) {
      split.push_back({kSurrogateHi + 1, r.hi});
    }
  }
  std::sort(split.begin(), split.end(),
            [](const CpRange& a, const CpRange& b) { return a.lo < b.lo; });
  std::vector<CpRange> out;
  for (const CpRange& r : split) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<CpRange> ComplementRanges(std::span<const CpRange> normalized) {
  std::vector<CpRange> out;
  uint32_t next = 0;
  for (const CpRange& r : normalized) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return NormalizeRanges(std::move(out));
}

void SplitJsonSpecials(std::span<const CpRange> ranges, std::vector<CpRange>& plain,
                       std::vector<uint32_t>& specials) {
  for (const CpRange& r : ranges) {
    for (uint32_t cp = r.lo; cp <= std::min<uint32_t>(r.hi, 0x5C); ++cp) {
      if (cp < 0x20 || cp == '"' || cp == '\\') specials.push_back(cp);
    }
  }
  std::vector<CpRange> raw(ranges.begin(), ranges.end());
  const std::vector<CpRange> excluded = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  const std::vector<CpRange> allowed = ComplementRanges(excluded);
  for (const CpRange& r : raw) {
    for (const CpRange& a : allowed) {
      const uint32_t lo = std::max(r.lo, a.lo);
      const uint32_t hi = std::min(r.hi, a.hi);
      if (lo <= hi) plain.push_back({lo, hi});
    }
  }
  plain = NormalizeRanges(std::move(plain));
}

std::u32string JsonEscapeOf(uint32_t cp) {
  switch (cp) {
    case '"':
      return U"\\\"";
    case '\\':
      return U"\\\\";
    case '\n':
      return U"\\n";
    case '\t':
      return U"\\t";
    case '\r':
      return U"\\r";
    case '\b':
      return U"\\b";
    case '\f':
      return U"\\f";
    default:
      break;
  }
  static constexpr char32_t kHex[] = U"0123456789abcdef";
  return std::u32string(U"\\u00") + kHex[(cp >> 4) & 0xF] + kHex[cp & 0xF];
}

}  // namespace pagoda::grammar::gbnf
