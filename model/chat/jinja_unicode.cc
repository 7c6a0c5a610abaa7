#include "model/chat/jinja_unicode.h"

namespace pagoda::jinja {
namespace {

constexpr char32_t kEscapedByteBase = 0xDC00;  // invalid byte b decodes to 0xDC00 + b

bool InRange(char32_t c, char32_t lo, char32_t hi) { return c >= lo && c <= hi; }

// Pairs laid out as (upper, lower) alternating; `upper_even` says which parity is upper.
bool InPairBlock(char32_t c, char32_t lo, char32_t hi, bool upper_even, bool* is_upper) {
  if (!InRange(c, lo, hi)) return false;
  *is_upper = ((c % 2 == 0) == upper_even);
  return true;
}

// The blocks where upper and lower case alternate in pairs (Latin Extended-A, Cyrillic, Latin
// Extended Additional); *up tells whether c is the upper one of its pair.
bool InCasePairBlocks(char32_t c, bool* up) {
  return InPairBlock(c, 0x100, 0x12F, true, up) || InPairBlock(c, 0x132, 0x137, true, up) ||
         InPairBlock(c, 0x139, 0x148, false, up) || InPairBlock(c, 0x14A, 0x177, true, up) ||
         InPairBlock(c, 0x179, 0x17E, false, up) || InPairBlock(c, 0x460, 0x481, true, up) ||
         InPairBlock(c, 0x48A, 0x4BF, true, up) || InPairBlock(c, 0x4C1, 0x4CE, false, up) ||
         InPairBlock(c, 0x4D0, 0x52F, true, up) || InPairBlock(c, 0x1E00, 0x1E95, true, up) ||
         InPairBlock(c, 0x1EA0, 0x1EFF, true, up);
}

// Simple (one-to-one) lower-case mapping; returns c when it has none.
char32_t LowerOf(char32_t c) {
  if (InRange(c, 'A', 'Z')) return c + 32;
  if (c < 0xC0) return c;
  if (InRange(c, 0xC0, 0xDE) && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  bool up = false;
  if (InCasePairBlocks(c, &up)) {
    return up ? c + 1 : c;
  }
  if (c == 0x130) return 'i';
  if (InRange(c, 0x391, 0x3AB) && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (InRange(c, 0x388, 0x38A)) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (InRange(c, 0x38E, 0x38F)) return c + 63;
  if (InRange(c, 0x410, 0x42F)) return c + 32;
  if (InRange(c, 0x400, 0x40F)) return c + 80;
  if (c == 0x4C0) return 0x4CF;
  if (InRange(c, 0x531, 0x556)) return c + 48;
  if (InRange(c, 0xFF21, 0xFF3A)) return c + 32;
  return c;
}

// Simple upper-case mapping; returns c when it has none.
char32_t UpperOf(char32_t c) {
  if (InRange(c, 'a', 'z')) return c - 32;
  if (c < 0xB5) return c;
  if (c == 0xB5) return 0x39C;
  if (InRange(c, 0xE0, 0xFE) && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  bool up = false;
  if (InCasePairBlocks(c, &up)) {
    return up ? c : c - 1;
  }
  if (c == 0x3C2) return 0x3A3;
  if (InRange(c, 0x3B1, 0x3CB)) return c - 32;
  if (c == 0x3AC) return 0x386;
  if (InRange(c, 0x3AD, 0x3AF)) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (InRange(c, 0x3CD, 0x3CE)) return c - 63;
  if (InRange(c, 0x430, 0x44F)) return c - 32;
  if (InRange(c, 0x450, 0x45F)) return c - 80;
  if (c == 0x4CF) return 0x4C0;
  if (InRange(c, 0x561, 0x586)) return c - 48;
  if (InRange(c, 0xFF41, 0xFF5A)) return c - 32;
  return c;
}

bool IsCased(char32_t c) { return IsPyUpper(c) || IsPyLower(c); }

void AppendUpper(std::string* out, char32_t c) {
  if (c == 0xDF) {
    *out += "SS";
  } else {
    AppendUtf8(out, UpperOf(c));
  }
}

// Title case: as upper case except 'ß', whose title case is "Ss".
void AppendTitle(std::string* out, char32_t c) {
  if (c == 0xDF) {
    *out += "Ss";
  } else {
    AppendUtf8(out, UpperOf(c));
  }
}

void AppendLower(std::string* out, char32_t c) {
  if (c == 0x130) {
    *out += "i\xCC\x87";  // 'İ'.lower() is 'i' + U+0307
  } else {
    AppendUtf8(out, LowerOf(c));
  }
}

}  // namespace

char32_t DecodeUtf8(std::string_view s, size_t* i) {
  const auto b0 = static_cast<unsigned char>(s[*i]);
  if (b0 < 0x80) {
    ++*i;
    return b0;
  }
  int len = 0;
  char32_t cp = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  }
  bool ok = len > 0 && *i + len <= s.size();
  for (int k = 1; ok && k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[*i + k]);
    ok = (b & 0xC0) == 0x80;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (!ok || cp < min || cp > 0x10FFFF || InRange(cp, 0xD800, 0xDFFF)) {
    ++*i;
    return kEscapedByteBase + b0;
  }
  *i += len;
  return cp;
}

void AppendUtf8(std::string* out, char32_t c) {
  if (InRange(c, kEscapedByteBase + 0x80, kEscapedByteBase + 0xFF)) {
    out->push_back(static_cast<char>(c - kEscapedByteBase));
    return;
  }
  if (InRange(c, 0xD800, 0xDFFF) || c > 0x10FFFF) c = 0xFFFD;
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) DecodeUtf8(s, &i);
  return n;
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    offsets.push_back(i);
    DecodeUtf8(s, &i);
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t CodePointToByte(std::string_view s, size_t k, size_t from) {
  size_t i = from;
  for (size_t n = 0; n < k && i < s.size(); ++n) DecodeUtf8(s, &i);
  return i;
}

bool IsPySpace(char32_t c) {
  return InRange(c, 0x09, 0x0D) || InRange(c, 0x1C, 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || InRange(c, 0x2000, 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool IsPyPrintable(char32_t c) {
  if (c == ' ') return true;
  return !(c < 0x20 || InRange(c, 0x7F, 0xA0) || c == 0xAD || c == 0x61C || c == 0x1680 ||
           c == 0x180E || InRange(c, 0x2000, 0x200F) || InRange(c, 0x2028, 0x202F) ||
           InRange(c, 0x205F, 0x2064) || InRange(c, 0x2066, 0x206F) || c == 0x3000 ||
           InRange(c, 0xD800, 0xF8FF) || c == 0xFEFF || InRange(c, 0xFFF9, 0xFFFB) || c == 0xFFFE ||
           c == 0xFFFF || c == 0xE0001 || InRange(c, 0xE0020, 0xE007F) || c >= 0xF0000);
}

// Mathematical alphanumeric Latin letters (U+1D400..U+1D6A3): cased without a mapping, in
// runs of 26 capitals then 26 small letters.
bool IsMathLatin(char32_t c, bool upper) {
  return InRange(c, 0x1D400, 0x1D6A3) && (((c - 0x1D400) % 52) < 26) == upper;
}

bool IsPyUpper(char32_t c) { return LowerOf(c) != c || c == 0x130 || IsMathLatin(c, true); }
bool IsPyLower(char32_t c) {
  return UpperOf(c) != c || c == 0xDF || c == 0x138 || c == 0x149 || c == 0xAA || c == 0xBA ||
         IsMathLatin(c, false);
}

bool IsPyAlpha(char32_t c) {
  if (c < 0x80) return InRange(c | 0x20, 'a', 'z');
  if (IsCased(c)) return true;
  return InRange(c, 0xC0, 0x24F) ? (c != 0xD7 && c != 0xF7)
                                 : (InRange(c, 0x5D0, 0x5EA) || InRange(c, 0x620, 0x64A) ||
                                    InRange(c, 0x1100, 0x11FF) || InRange(c, 0x3041, 0x3096) ||
                                    InRange(c, 0x30A1, 0x30FA) || InRange(c, 0x3400, 0x4DBF) ||
                                    InRange(c, 0x4E00, 0x9FFF) || InRange(c, 0xAC00, 0xD7A3) ||
                                    InRange(c, 0x1D400, 0x1D7CB) || InRange(c, 0x20000, 0x2FFFF));
}

bool IsPyDigit(char32_t c) {
  return InRange(c, '0', '9') || InRange(c, 0x660, 0x669) || InRange(c, 0x6F0, 0x6F9) ||
         InRange(c, 0x966, 0x96F) || InRange(c, 0xFF10, 0xFF19);
}

std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) AppendUpper(&out, DecodeUtf8(s, &i));
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) AppendLower(&out, DecodeUtf8(s, &i));
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = DecodeUtf8(s, &i);
    if (prev_cased) {
      AppendLower(&out, c);
    } else {
      AppendTitle(&out, c);
    }
    prev_cased = IsCased(c);
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const bool first = i == 0;
    const char32_t c = DecodeUtf8(s, &i);
    if (first) {
      AppendTitle(&out, c);
    } else {
      AppendLower(&out, c);
    }
  }
  return out;
}

std::string PySwapCase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char32_t c = DecodeUtf8(s, &i);
    if (IsPyUpper(c)) {
      AppendLower(&out, c);
    } else {
      AppendUpper(&out, c);
    }
  }
  return out;
}

}  // namespace pagoda::jinja
