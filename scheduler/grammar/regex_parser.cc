#include "scheduler/grammar/regex_parser.h"

#include <algorithm>
#include <string>

namespace pagoda::grammar::regex {
namespace {

using gbnf::CpRange;

constexpr int64_t kSaturate = int64_t{1} << 40;

Node ClassNode(std::vector<CpRange> ranges) {
  Node n;
  n.kind = Node::Kind::kClass;
  n.ranges = gbnf::NormalizeRanges(std::move(ranges));
  return n;
}

// The code points a shorthand class may stand for: Python (Unicode by default) and JavaScript
// disagree beyond ASCII, so each has a narrow set (in both flavours' class) and a wide one
// (holding both flavours' class). A class that is written is narrow, and one that is negated
// is taken wide first, so every string produced matches under either flavour.
std::vector<CpRange> Shorthand(char32_t lower, bool wide) {
  std::vector<CpRange> r;
  if (lower == 'd') r = {{'0', '9'}};
  if (lower == 'w') r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  if (lower == 's') r = {{'\t', '\r'}, {' ', ' '}};
  if (!wide) return r;
  if (lower == 's') {  // str.isspace() and ECMAScript WhiteSpace / LineTerminator together
    r.insert(r.end(), {{0x1C, 0x1F},
                       {0x85, 0x85},
                       {0xA0, 0xA0},
                       {0x1680, 0x1680},
                       {0x2000, 0x200A},
                       {0x2028, 0x2029},
                       {0x202F, 0x202F},
                       {0x205F, 0x205F},
                       {0x3000, 0x3000},
                       {0xFEFF, 0xFEFF}});
  } else {
    r.push_back({0x80, gbnf::kMaxCodepoint});  // Unicode digits and letters
  }
  return gbnf::NormalizeRanges(std::move(r));
}

// \d \w \s and their negations (narrow or wide, see Shorthand); false if `c` is none of them.
bool ClassEscape(char32_t c, bool wide, std::vector<CpRange>& out) {
  const bool negated = c == 'D' || c == 'W' || c == 'S';
  const char32_t lower = negated ? c - 'A' + 'a' : c;
  if (lower != 'd' && lower != 'w' && lower != 's') return false;
  // A negation is narrow when its class is wide, and wide when it is narrow.
  std::vector<CpRange> r = Shorthand(lower, negated ? !wide : wide);
  if (negated) r = gbnf::ComplementRanges(r);
  out.insert(out.end(), r.begin(), r.end());
  return true;
}

int HexDigit(char32_t c) {
  if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

class Parser {
 public:
  Parser(std::u32string cps, const CompileLimits& limits) : cps_(std::move(cps)), limits_(limits) {}

  Result<Node> ParseAll() {
    PAGODA_ASSIGN_OR_RETURN(Node node, ParseAlt(0));
    if (!AtEnd()) return Error("unbalanced ')'", pos_);
    return node;
  }

 private:
  bool AtEnd() const { return pos_ >= cps_.size(); }
  char32_t Peek(size_t ahead = 0) const {
    return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : U'\0';
  }
  bool Has(size_t ahead) const { return pos_ + ahead < cps_.size(); }
  Status Error(const std::string& what, size_t at) const {
    return InvalidArgument("regex: " + what + " at offset " + std::to_string(at));
  }
  Status Unsupported(const std::string& what, size_t at) const {
    return Error(what + " is not supported", at);
  }

  Result<Node> ParseAlt(int depth) {
    Node alt;
    alt.kind = Node::Kind::kAlt;
    while (true) {
      PAGODA_ASSIGN_OR_RETURN(Node branch, ParseBranch(depth));
      alt.children.push_back(std::move(branch));
      if (alt.children.size() > limits_.max_alternatives) {
        return Error("more than " + std::to_string(limits_.max_alternatives) +
                         " alternatives (max_alternatives)",
                     pos_);
      }
      if (Peek() != '|' || AtEnd()) break;
      ++pos_;
    }
    if (alt.children.size() == 1) return std::move(alt.children[0]);
    return alt;
  }

  // An anchor (^ \A at a top-level branch start, $ \Z \z at its end) is skipped: true.
  Result<bool> SkipAnchor(int depth, bool at_start) {
    const char32_t c = Peek();
    const bool escaped = c == '\\' && (Peek(1) == 'A' || Peek(1) == 'Z' || Peek(1) == 'z');
    if (c != '^' && c != '$' && !escaped) return false;
    const bool is_start = c == '^' || (escaped && Peek(1) == 'A');
    const size_t len = escaped ? 2 : 1;
    const bool at_end = pos_ + len >= cps_.size() || cps_[pos_ + len] == '|';
    if (depth == 0 && ((is_start && at_start) || (!is_start && at_end))) {
      pos_ += len;
      return true;
    }
    const std::string name = escaped ? std::string("\\") + static_cast<char>(Peek(1))
                                     : std::string(1, static_cast<char>(c));
    return Unsupported(std::string("anchor '") + name + "' inside the regex (only at its ends)",
                       pos_);
  }

  Result<Node> ParseBranch(int depth) {
    Node seq;
    seq.kind = Node::Kind::kConcat;
    bool at_start = true;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      PAGODA_ASSIGN_OR_RETURN(bool anchor, SkipAnchor(depth, at_start));
      at_start = false;
      if (anchor) continue;
      const size_t atom_at = pos_;
      if (Peek() == '*' || Peek() == '+' || Peek() == '?' || IsBraceQuantifier()) {
        return Error("nothing to repeat", atom_at);
      }
      PAGODA_ASSIGN_OR_RETURN(Node atom, ParseAtom(depth));
      PAGODA_RETURN_IF_ERROR(ParseQuantifier(atom));
      seq.children.push_back(std::move(atom));
    }
    if (seq.children.empty()) return Node{};
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    return seq;
  }

  Result<Node> ParseAtom(int depth) {
    const char32_t c = Peek();
    if (c == '(') return ParseGroup(depth);
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      // Not a line terminator in Python (\n) or JavaScript (\n \r U+2028 U+2029).
      return ClassNode(gbnf::ComplementRanges(
          std::vector<CpRange>{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '\\') {
      std::vector<CpRange> ranges;
      PAGODA_RETURN_IF_ERROR(ParseEscape(/*in_class=*/false, ranges));
      return ClassNode(std::move(ranges));
    }
    ++pos_;
    return ClassNode({{static_cast<uint32_t>(c), static_cast<uint32_t>(c)}});
  }

  Result<Node> ParseGroup(int depth) {
    const size_t start = pos_++;
    if (depth + 1 > limits_.max_depth) {
      return Error("groups nest deeper than the limit of " + std::to_string(limits_.max_depth) +
                       " (max_depth)",
                   start);
    }
    if (Peek() == '?' && Has(0)) PAGODA_RETURN_IF_ERROR(ParseGroupPrefix(start));
    if (comment_) {  // (?#...) was read whole
      comment_ = false;
      return Node{};
    }
    PAGODA_ASSIGN_OR_RETURN(Node inner, ParseAlt(depth + 1));
    if (Peek() != ')' || AtEnd()) return Error("missing ')' for the group", start);
    ++pos_;
    return inner;
  }

  // After "(?": accepts ":", "<name>", "P<name>" and "#comment)"; anything else is an error.
  Status ParseGroupPrefix(size_t start) {
    ++pos_;
    const char32_t c = Peek();
    if (c == ':') {
      ++pos_;
      return Status::Ok();
    }
    if (c == '#') {
      while (!AtEnd() && Peek() != ')') ++pos_;
      if (AtEnd()) return Error("missing ')' for the comment", start);
      ++pos_;
      comment_ = true;
      return Status::Ok();
    }
    if (c == '=' || c == '!') return Unsupported("lookahead '(?" + Ascii(c) + "'", start);
    if (c == '<' && (Peek(1) == '=' || Peek(1) == '!')) {
      return Unsupported("lookbehind '(?<" + Ascii(Peek(1)) + "'", start);
    }
    if (c == 'P' && Peek(1) == '=') return Unsupported("backreference '(?P='", start);
    if (c == '<' || (c == 'P' && Peek(1) == '<')) return SkipGroupName(start);
    if (c == '>') return Unsupported("atomic group '(?>'", start);
    return Unsupported("group '(?" + Ascii(c) + "' (inline flags, conditionals...)", start);
  }

  Status SkipGroupName(size_t start) {
    if (Peek() == 'P') ++pos_;
    ++pos_;
    const size_t name_start = pos_;
    while (!AtEnd() && Peek() != '>') {
      const char32_t c = Peek();
      const bool digit = c >= '0' && c <= '9';
      const bool word = c == '_' || (digit && pos_ > name_start) || (c >= 'a' && c <= 'z') ||
                        (c >= 'A' && c <= 'Z') || c >= 0x80;
      if (!word) return Error("bad group name", pos_);
      ++pos_;
    }
    if (AtEnd() || pos_ == name_start) return Error("bad group name", start);
    ++pos_;
    return Status::Ok();
  }

  static std::string Ascii(char32_t c) {
    if (c >= 0x20 && c < 0x7F) return std::string(1, static_cast<char>(c));
    return "?";
  }

  Result<Node> ParseClass() {
    const size_t start = pos_++;
    const bool negated = Peek() == '^' && Has(0);
    if (negated) ++pos_;
    negated_class_ = negated;
    std::vector<CpRange> ranges;
    for (bool first = true;; first = false) {
      if (AtEnd()) return Error("unterminated character class", start);
      if (Peek() == ']' && !first) break;
      PAGODA_RETURN_IF_ERROR(ParseClassItem(ranges));
    }
    ++pos_;
    ranges = gbnf::NormalizeRanges(std::move(ranges));
    if (negated) ranges = gbnf::ComplementRanges(ranges);
    if (ranges.empty()) return Error("character class matches no character", start);
    return ClassNode(std::move(ranges));
  }

  // One character, escape or range of a class.
  Status ParseClassItem(std::vector<CpRange>& ranges) {
    const size_t at = pos_;
    std::vector<CpRange> lo;
    PAGODA_RETURN_IF_ERROR(ParseClassChar(lo));
    const bool range = Peek() == '-' && Has(1) && Peek(1) != ']';
    if (!range) {
      ranges.insert(ranges.end(), lo.begin(), lo.end());
      return Status::Ok();
    }
    ++pos_;
    std::vector<CpRange> hi;
    PAGODA_RETURN_IF_ERROR(ParseClassChar(hi));
    const bool single =
        lo.size() == 1 && lo[0].lo == lo[0].hi && hi.size() == 1 && hi[0].lo == hi[0].hi;
    if (!single) return Error("bad character range", at);
    if (lo[0].lo > hi[0].lo) return Error("character range out of order", at);
    ranges.push_back({lo[0].lo, hi[0].lo});
    return Status::Ok();
  }

  Status ParseClassChar(std::vector<CpRange>& out) {
    if (Peek() == '\\') return ParseEscape(/*in_class=*/true, out);
    const auto cp = static_cast<uint32_t>(Peek());
    ++pos_;
    out.push_back({cp, cp});
    return Status::Ok();
  }

  // An escape at pos_ ('\\'): appends its code point or class to `out`.
  Status ParseEscape(bool in_class, std::vector<CpRange>& out) {
    const size_t at = pos_;
    if (!Has(1)) return Error("a trailing '\\'", at);
    const char32_t c = Peek(1);
    pos_ += 2;
    if (ClassEscape(c, in_class && negated_class_, out)) return Status::Ok();
    uint32_t cp = 0;
    PAGODA_RETURN_IF_ERROR(EscapedChar(c, in_class, at, cp));
    out.push_back({cp, cp});
    return Status::Ok();
  }

  Status EscapedChar(char32_t c, bool in_class, size_t at, uint32_t& cp) {
    switch (c) {
      case 'n':
        cp = '\n';
        return Status::Ok();
      case 't':
        cp = '\t';
        return Status::Ok();
      case 'r':
        cp = '\r';
        return Status::Ok();
      case 'f':
        cp = '\f';
        return Status::Ok();
      case 'v':
        cp = '\v';
        return Status::Ok();
      case 'a':
        cp = 0x07;
        return Status::Ok();
      case 'x':
        return HexEscape(2, at, cp);
      case 'u':
        return HexEscape(4, at, cp);
      case 'U':
        return HexEscape(8, at, cp);
      case '0':
        return OctalEscape(cp);
      default:
        break;
    }
    if (c == 'b' && in_class) {
      cp = 0x08;
      return Status::Ok();
    }
    return OtherEscape(c, at, cp);
  }

  Status OtherEscape(char32_t c, size_t at, uint32_t& cp) {
    if (c >= '1' && c <= '9') return Unsupported("backreference '\\" + Ascii(c) + "'", at);
    if (c == 'k') return Unsupported("backreference '\\k'", at);
    if (c == 'b' || c == 'B') return Unsupported("word boundary '\\" + Ascii(c) + "'", at);
    if (c == 'A' || c == 'Z' || c == 'z' || c == 'G') {
      return Unsupported("anchor '\\" + Ascii(c) + "' inside the regex (only at its ends)", at);
    }
    if (c == 'p' || c == 'P') return Unsupported("Unicode property '\\" + Ascii(c) + "'", at);
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alnum) return Error("unknown escape '\\" + Ascii(c) + "'", at);
    cp = static_cast<uint32_t>(c);  // escaped punctuation, space or non-ASCII: itself
    return Status::Ok();
  }

  Status HexEscape(int digits, size_t at, uint32_t& cp) {
    uint64_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const int h = HexDigit(Peek());
      if (h < 0 || AtEnd()) {
        return Error("expected " + std::to_string(digits) + " hex digits in the escape", at);
      }
      v = v * 16 + static_cast<uint64_t>(h);
      ++pos_;
    }
    if (v > gbnf::kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) {
      return Error("escape names no valid code point", at);
    }
    cp = static_cast<uint32_t>(v);
    return Status::Ok();
  }

  Status OctalEscape(uint32_t& cp) {  // \0 and up to two more octal digits
    cp = 0;
    for (int i = 0; i < 2 && Peek() >= '0' && Peek() <= '7' && !AtEnd(); ++i) {
      cp = cp * 8 + static_cast<uint32_t>(Peek() - '0');
      ++pos_;
    }
    return Status::Ok();
  }

  // Reads digits at pos_ (saturating); false if there are none.
  bool ReadCount(int64_t& v) {
    const size_t start = pos_;
    v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = std::min<int64_t>(v * 10 + (Peek() - '0'), kSaturate);
      ++pos_;
    }
    return pos_ > start;
  }

  // {m} {m,} {,n} {m,n} at pos_ (Python); anything else makes '{' a literal.
  bool IsBraceQuantifier() {
    int64_t min = 0, max = 0;
    const size_t save = pos_;
    const bool ok = ParseBraces(min, max);
    pos_ = save;
    return ok;
  }

  // Reads a brace quantifier; on failure returns false with pos_ unchanged.
  bool ParseBraces(int64_t& min, int64_t& max) {
    const size_t save = pos_;
    if (!ReadBraces(min, max)) {
      pos_ = save;
      return false;
    }
    return true;
  }

  bool ReadBraces(int64_t& min, int64_t& max) {
    if (Peek() != '{' || AtEnd()) return false;
    ++pos_;
    const bool has_min = ReadCount(min);
    if (!has_min) min = 0;
    max = min;
    if (Peek() == ',' && !AtEnd()) {
      ++pos_;
      if (!ReadCount(max)) max = -1;
    } else if (!has_min) {
      return false;
    }
    if (Peek() != '}' || AtEnd()) return false;
    ++pos_;
    return true;
  }

  Status ParseQuantifier(Node& atom) {
    const size_t at = pos_;
    int64_t min = 0, max = 0;
    const char32_t c = Peek();
    if (AtEnd()) return Status::Ok();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
    } else if (!ParseBraces(min, max)) {
      return Status::Ok();
    }
    PAGODA_RETURN_IF_ERROR(CheckCounts(min, max, at));
    if (Peek() == '?' && !AtEnd()) ++pos_;  // lazy: the same language
    if (!AtEnd() && Peek() == '+') return Unsupported("possessive quantifier", pos_);
    if (!AtEnd() && (Peek() == '*' || Peek() == '?' || IsBraceQuantifier())) {
      return Error("multiple repeat", pos_);
    }
    Node rep;
    rep.kind = Node::Kind::kRepeat;
    rep.min = min;
    rep.max = max;
    rep.children.push_back(std::move(atom));
    atom = std::move(rep);
    return Status::Ok();
  }

  Status CheckCounts(int64_t min, int64_t max, size_t at) const {
    if (max >= 0 && max < min) return Error("repetition maximum below its minimum", at);
    const int64_t biggest = std::max(min, max);
    if (biggest > limits_.max_repetition) {
      return Error("repetition count " + std::to_string(biggest) + " exceeds the limit of " +
                       std::to_string(limits_.max_repetition) + " (max_repetition)",
                   at);
    }
    return Status::Ok();
  }

  const std::u32string cps_;
  const CompileLimits& limits_;
  size_t pos_ = 0;
  bool comment_ = false;
  bool negated_class_ = false;  // the class being read is negated ([^...])
};

int64_t SatAdd(int64_t a, int64_t b) { return std::min(a + b, kSaturate); }
int64_t SatMul(int64_t a, int64_t b) {
  return b == 0 ? 0 : (a > kSaturate / b ? kSaturate : a * b);
}

}  // namespace

Result<Node> Parse(std::string_view regex, const CompileLimits& limits) {
  if (regex.size() > limits.max_output_bytes) {
    return InvalidArgument("regex: " + std::to_string(regex.size()) +
                           " bytes exceed the limit of " + std::to_string(limits.max_output_bytes) +
                           " (max_output_bytes)");
  }
  Result<std::u32string> cps = gbnf::Utf8ToCodepoints(regex);
  if (!cps.ok()) return cps.status().WithPrefix("regex");
  Parser parser(std::move(*cps), limits);
  return parser.ParseAll();
}

LengthRange Lengths(const Node& node) {
  switch (node.kind) {
    case Node::Kind::kEmpty:
      return {0, 0};
    case Node::Kind::kClass:
      return {1, 1};
    case Node::Kind::kConcat: {
      LengthRange sum{0, 0};
      for (const Node& c : node.children) {
        const LengthRange r = Lengths(c);
        sum.min = SatAdd(sum.min, r.min);
        sum.max = (sum.max < 0 || r.max < 0) ? -1 : SatAdd(sum.max, r.max);
      }
      return sum;
    }
    case Node::Kind::kAlt: {
      LengthRange out{kSaturate, 0};
      for (const Node& c : node.children) {
        const LengthRange r = Lengths(c);
        out.min = std::min(out.min, r.min);
        out.max = (out.max < 0 || r.max < 0) ? -1 : std::max(out.max, r.max);
      }
      return out;
    }
    case Node::Kind::kRepeat: {
      const LengthRange r = Lengths(node.children[0]);
      const int64_t min = SatMul(r.min, node.min);
      if (node.max == 0 || r.max == 0) return {min, 0};
      if (node.max < 0 || r.max < 0) return {min, -1};
      return {min, SatMul(r.max, node.max)};
    }
  }
  return {0, 0};
}

}  // namespace pagoda::grammar::regex
