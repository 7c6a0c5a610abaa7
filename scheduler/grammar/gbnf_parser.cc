// GBNF text to rules (grammar_rules.h), in llama.cpp's syntax: a newline ends a rule except
// inside parentheses or after `|` / `::=`; `#` starts a comment; literals and classes name
// code points, which become UTF-8 byte sets here.
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/grammar/grammar_rules.h"
#include "scheduler/grammar/utf8_ranges.h"

namespace pagoda::grammar {
namespace {

using internal::ByteSet;
using internal::CodepointRange;
using internal::RuleDef;
using internal::RuleSet;
using internal::Sym;
using Seq = std::vector<Sym>;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {}

  Status Parse() {
    if (text_.size() > limits_.max_text_bytes) {
      return InvalidArgument("grammar text of " + std::to_string(text_.size()) +
                             " bytes exceeds the limit of " +
                             std::to_string(limits_.max_text_bytes));
    }
    while (true) {
      SkipSpace(/*newlines=*/true);
      if (AtEnd()) return Status::Ok();
      PAGODA_RETURN_IF_ERROR(ParseRule());
    }
  }

  RuleSet TakeRules() { return std::move(set_); }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  Status Error(size_t at, const std::string& what) const {
    return InvalidArgument(internal::LineCol(text_, at) + ": " + what);
  }
  std::string Found() const {
    if (AtEnd()) return "the end of the grammar";
    if (Peek() == '\n' || Peek() == '\r') return "a newline";
    return "'" + std::string(1, Peek()) + "'";
  }

  void SkipSpace(bool newlines) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && Peek() != '\n' && Peek() != '\r') ++pos_;
      } else {
        return;
      }
    }
  }

  std::string_view ParseName() {
    const size_t start = pos_;
    while (!AtEnd() && IsNameChar(Peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  Status ParseRule() {
    const size_t start = pos_;
    const std::string_view name = ParseName();
    if (name.empty()) return Error(pos_, "expected a rule name, found " + Found());
    SkipSpace(false);
    if (text_.substr(pos_, 3) != "::=") return Error(pos_, "expected '::=', found " + Found());
    pos_ += 3;
    SkipSpace(true);
    const uint32_t rule = RuleIndex(name, start);
    if (set_.rules[rule].defined) {
      return Error(start, "rule '" + std::string(name) + "' is defined twice");
    }
    set_.rules[rule].defined = true;
    set_.rules[rule].where = start;
    std::vector<Seq> alts;
    PAGODA_RETURN_IF_ERROR(ParseAlternatives(rule, /*nested=*/false, &alts));
    PAGODA_RETURN_IF_ERROR(SetAlts(rule, std::move(alts)));
    if (!AtEnd() && Peek() != '\n' && Peek() != '\r') {
      return Error(pos_, "expected an item, '|' or the end of the rule, found " + Found());
    }
    return Status::Ok();
  }

  Status ParseAlternatives(uint32_t owner, bool nested, std::vector<Seq>* alts) {
    alts->emplace_back();
    PAGODA_RETURN_IF_ERROR(ParseSequence(owner, nested, &alts->back()));
    while (Peek() == '|') {
      ++pos_;
      SkipSpace(true);
      alts->emplace_back();
      PAGODA_RETURN_IF_ERROR(ParseSequence(owner, nested, &alts->back()));
    }
    return Status::Ok();
  }

  Status ParseSequence(uint32_t owner, bool nested, Seq* seq) {
    size_t last_start = seq->size();
    while (!AtEnd()) {
      const char c = Peek();
      const size_t before = seq->size();
      if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last_start == seq->size()) {
          return Error(pos_, "expected an item before '" + std::string(1, c) + "'");
        }
        PAGODA_RETURN_IF_ERROR(ParseRepetition(owner, last_start, seq));
      } else if (c == '"' || c == '[' || c == '.' || c == '(' || IsNameChar(c)) {
        PAGODA_RETURN_IF_ERROR(ParseItem(owner, seq));
        last_start = before;
      } else {
        break;
      }
      SkipSpace(nested);
    }
    return Status::Ok();
  }

  Status ParseItem(uint32_t owner, Seq* seq) {
    const char c = Peek();
    if (c == '"') return ParseLiteral(seq);
    if (c == '[') return ParseClass(owner, seq);
    if (c == '.') {
      ++pos_;
      return AddClass(owner, pos_ - 1, {{0, internal::kMaxCodepoint}}, false, seq);
    }
    if (c == '(') return ParseGroup(owner, seq);
    const size_t start = pos_;
    const std::string_view name = ParseName();
    seq->push_back({true, RuleIndex(name, start)});
    return CountElements(start, 1);
  }

  Status ParseGroup(uint32_t owner, Seq* seq) {
    const size_t start = pos_;
    if (++depth_ > limits_.max_nesting) {
      return Error(start,
                   "groups nest deeper than the limit of " + std::to_string(limits_.max_nesting));
    }
    ++pos_;
    SkipSpace(true);
    std::vector<Seq> alts;
    PAGODA_RETURN_IF_ERROR(ParseAlternatives(owner, /*nested=*/true, &alts));
    if (Peek() != ')') return Error(pos_, "expected ')' or an item, found " + Found());
    ++pos_;
    --depth_;
    const uint32_t rule = NewRule(owner, start, "a group");
    PAGODA_RETURN_IF_ERROR(SetAlts(rule, std::move(alts)));
    seq->push_back({true, rule});
    return CountElements(start, 1);
  }

  // One code point of a literal or class (an escape or a UTF-8 character) into *cp.
  Status ParseChar(uint32_t* cp) {
    const size_t start = pos_;
    const auto c = static_cast<unsigned char>(Peek());
    if (c == '\\') return ParseEscape(cp);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0) return Error(start, "invalid UTF-8");
    uint32_t v = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(Peek(static_cast<size_t>(i)));
      if ((b & 0xC0) != 0x80) return Error(start, "invalid UTF-8");
      v = (v << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < kMin[len] || v > internal::kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) {
      return Error(start, "invalid UTF-8");
    }
    pos_ += static_cast<size_t>(len);
    *cp = v;
    return Status::Ok();
  }

  Status ParseEscape(uint32_t* cp) {
    const size_t start = pos_;
    const char e = Peek(1);
    static const std::map<char, uint32_t> kSimple = {{'n', '\n'},  {'r', '\r'}, {'t', '\t'},
                                                     {'\\', '\\'}, {'"', '"'},  {'[', '['},
                                                     {']', ']'},   {'-', '-'}};
    if (auto it = kSimple.find(e); it != kSimple.end()) {
      pos_ += 2;
      *cp = it->second;
      return Status::Ok();
    }
    const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits == 0) {
      return Error(start, AtEnd() || pos_ + 1 >= text_.size()
                              ? "expected an escape after '\\'"
                              : "unknown escape '\\" + std::string(1, e) + "'");
    }
    uint64_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      const int h = HexValue(Peek(2 + i));
      if (h < 0) {
        return Error(start, "expected " + std::to_string(digits) + " hex digits after '\\" +
                                std::string(1, e) + "'");
      }
      v = v * 16 + static_cast<uint64_t>(h);
    }
    if (v > internal::kMaxCodepoint) return Error(start, "code point above U+10FFFF");
    pos_ += 2 + digits;
    *cp = static_cast<uint32_t>(v);
    return Status::Ok();
  }

  Status ParseLiteral(Seq* seq) {
    const size_t start = pos_++;
    std::string bytes;
    while (Peek() != '"') {
      if (AtEnd()) return Error(start, "unterminated string literal");
      uint32_t cp = 0;
      const size_t at = pos_;
      PAGODA_RETURN_IF_ERROR(ParseChar(&cp));
      if (cp >= 0xD800 && cp <= 0xDFFF) return Error(at, "surrogate code point in a literal");
      internal::AppendUtf8(cp, &bytes);
    }
    ++pos_;
    for (char b : bytes) {
      ByteSet set{};
      internal::Insert(set, static_cast<uint8_t>(b));
      seq->push_back({false, ByteSetIndex(set)});
    }
    return CountElements(start, bytes.size());
  }

  Status ParseClass(uint32_t owner, Seq* seq) {
    const size_t start = pos_++;
    const bool negated = Peek() == '^';
    if (negated) ++pos_;
    std::vector<CodepointRange> ranges;
    while (Peek() != ']') {
      if (AtEnd()) return Error(start, "unterminated character class");
      uint32_t lo = 0, hi = 0;
      const size_t at = pos_;
      PAGODA_RETURN_IF_ERROR(ParseChar(&lo));
      hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        PAGODA_RETURN_IF_ERROR(ParseChar(&hi));
        if (hi < lo) return Error(at, "character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return AddClass(owner, start, std::move(ranges), negated, seq);
  }

  // A class as one byte set (single-byte classes) or a generated rule of byte-set sequences.
  Status AddClass(uint32_t owner, size_t start, std::vector<CodepointRange> ranges, bool negated,
                  Seq* seq) {
    ranges = internal::NormalizeRanges(std::move(ranges));
    if (negated) ranges = internal::ComplementRanges(ranges);
    const auto seqs = internal::Utf8Sequences(ranges);
    if (seqs.size() == 1 && seqs[0].size() == 1) {
      seq->push_back({false, ByteSetIndex(seqs[0][0])});
      return CountElements(start, 1);
    }
    std::vector<Seq> alts;
    size_t count = 1;
    for (const auto& s : seqs) {
      alts.emplace_back();
      for (const ByteSet& b : s) alts.back().push_back({false, ByteSetIndex(b)});
      count += s.size() + 1;
    }
    const uint32_t rule = NewRule(owner, start, "a character class");
    PAGODA_RETURN_IF_ERROR(SetAlts(rule, std::move(alts)));
    seq->push_back({true, rule});
    return CountElements(start, count);
  }

  Status ParseCount(int32_t* out) {
    const size_t start = pos_;
    int64_t v = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > limits_.max_repetition) {
        return Error(
            start, "repetition count above the limit of " + std::to_string(limits_.max_repetition));
      }
      ++pos_;
    }
    if (pos_ == start) return Error(pos_, "expected a number, found " + Found());
    *out = static_cast<int32_t>(v);
    return Status::Ok();
  }

  // {m}, {m,}, {m,n} after the '{'; max -1 = unbounded.
  Status ParseBraces(int32_t* min, int32_t* max) {
    const size_t start = pos_++;
    SkipSpace(true);
    PAGODA_RETURN_IF_ERROR(ParseCount(min));
    SkipSpace(true);
    *max = *min;
    if (Peek() == ',') {
      ++pos_;
      SkipSpace(true);
      *max = -1;
      if (Peek() != '}') PAGODA_RETURN_IF_ERROR(ParseCount(max));
      SkipSpace(true);
    }
    if (Peek() != '}') return Error(pos_, "expected '}', found " + Found());
    ++pos_;
    if (*max >= 0 && *max < *min) return Error(start, "repetition maximum below its minimum");
    return Status::Ok();
  }

  Status ParseRepetition(uint32_t owner, size_t last_start, Seq* seq) {
    const size_t start = pos_;
    int32_t min = 0, max = -1;
    const char c = Peek();
    if (c == '{') {
      PAGODA_RETURN_IF_ERROR(ParseBraces(&min, &max));
    } else {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
    }
    return ExpandRepetition(owner, start, last_start, min, max, seq);
  }

  // item{min,max} as min copies of the item, then `item*` (rule r ::= item r | "") or a chain
  // of max - min nested optionals (r_k ::= item r_k+1 | "").
  Status ExpandRepetition(uint32_t owner, size_t start, size_t last_start, int32_t min, int32_t max,
                          Seq* seq) {
    Seq item(seq->begin() + static_cast<std::ptrdiff_t>(last_start), seq->end());
    seq->resize(last_start);
    const size_t optional = max < 0 ? 1 : static_cast<size_t>(max - min);
    PAGODA_RETURN_IF_ERROR(CountElements(start, 2 + static_cast<size_t>(min) + 4 * optional));
    Sym x = item[0];
    if (item.size() > 1) {
      x = {true, NewRule(owner, start, "a repetition")};
      PAGODA_RETURN_IF_ERROR(SetAlts(x.id, {std::move(item)}));
    }
    seq->insert(seq->end(), static_cast<size_t>(min), x);
    if (max < 0) {
      const uint32_t r = NewRule(owner, start, "a repetition");
      PAGODA_RETURN_IF_ERROR(SetAlts(r, {{x, {true, r}}, {}}));
      seq->push_back({true, r});
    } else if (max > min) {
      std::optional<Sym> rest;
      for (int32_t k = min; k < max; ++k) {
        const uint32_t r = NewRule(owner, start, "a repetition");
        Seq first{x};
        if (rest) first.push_back(*rest);
        PAGODA_RETURN_IF_ERROR(SetAlts(r, {std::move(first), {}}));
        rest = Sym{true, r};
      }
      seq->push_back(*rest);
    }
    return Status::Ok();
  }

  uint32_t RuleIndex(std::string_view name, size_t where) {
    auto [it, fresh] =
        names_.try_emplace(std::string(name), static_cast<uint32_t>(set_.rules.size()));
    if (fresh) set_.rules.push_back(RuleDef{std::string(name), {}, false, where, ""});
    return it->second;
  }

  uint32_t NewRule(uint32_t owner, size_t where, const char* what) {
    const auto id = static_cast<uint32_t>(set_.rules.size());
    std::string name = set_.rules[owner].name + "~" + std::to_string(id);
    set_.rules.push_back(RuleDef{std::move(name), {}, true, where, what});
    return id;
  }

  Status SetAlts(uint32_t rule, std::vector<Seq> alts) {
    set_.rules[rule].alts = std::move(alts);
    return CountElements(set_.rules[rule].where, set_.rules[rule].alts.size());
  }

  uint32_t ByteSetIndex(const ByteSet& set) {
    auto [it, fresh] = set_index_.try_emplace(set, static_cast<uint32_t>(set_.byte_sets.size()));
    if (fresh) set_.byte_sets.push_back(set);
    return it->second;
  }

  Status CountElements(size_t at, size_t n) {
    set_.num_elements += n;
    if (set_.num_elements > limits_.max_elements) {
      return Error(at, "the grammar expands to more than " + std::to_string(limits_.max_elements) +
                           " elements");
    }
    return Status::Ok();
  }

  std::string_view text_;
  const GrammarLimits& limits_;
  size_t pos_ = 0;
  int32_t depth_ = 0;
  RuleSet set_;
  std::unordered_map<std::string, uint32_t> names_;
  std::map<ByteSet, uint32_t> set_index_;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                 const GrammarLimits& limits) {
  Parser parser(text, limits);
  PAGODA_RETURN_IF_ERROR(parser.Parse());
  return internal::BuildGrammar(text, parser.TakeRules(), limits);
}

}  // namespace pagoda::grammar
