#include "scheduler/grammar/regex_compiler.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "scheduler/grammar/constraint_compilers.h"

namespace pagoda::grammar {
namespace regex {
namespace {

using gbnf::CpRange;

// A piece of GBNF: either literal code points (merged with neighbouring literals) or text.
struct Piece {
  std::u32string literal;
  std::string text;
  bool is_literal = false;
  bool atomic = false;  // one GBNF symbol: takes a quantifier as it is

  bool empty() const { return is_literal ? literal.empty() : text.empty(); }
  std::string Text() const { return is_literal ? gbnf::GbnfLiteral(literal) : text; }
};

Piece Literal(std::u32string cps) {
  Piece p;
  p.literal = std::move(cps);
  p.is_literal = true;
  p.atomic = p.literal.size() == 1;
  return p;
}

Piece Symbol(std::string text) {
  Piece p;
  p.text = std::move(text);
  p.atomic = true;
  return p;
}

// `\u00XY` escapes for control characters: one alternative per high digit X.
std::vector<std::string> ControlEscapes(const std::vector<uint32_t>& controls) {
  std::vector<std::string> out;
  for (uint32_t high = 0; high < 2; ++high) {
    std::vector<CpRange> low;
    for (uint32_t cp : controls) {
      if ((cp >> 4) != high) continue;
      const uint32_t digit = cp & 0xF;
      const uint32_t c = digit < 10 ? '0' + digit : 'a' + digit - 10;
      low.push_back({c, c});
    }
    if (low.empty()) continue;
    out.push_back("\"\\\\u00" + std::to_string(high) + "\" " +
                  gbnf::GbnfClass(gbnf::NormalizeRanges(std::move(low))));
  }
  return out;
}

class Emitter {
 public:
  Emitter(Target target, gbnf::RuleSet& rules, std::string_view what)
      : target_(target), rules_(rules), what_(what) {}

  // Exactly the strings of `node`. Memoized: a subtree is written once however often the
  // empty-string elimination below refers to it.
  Piece Emit(const Node& node) {
    if (auto it = cache_.find(&node); it != cache_.end()) return it->second;
    Piece p = EmitUncached(node);
    rules_.Charge(p.is_literal ? p.literal.size() : p.text.size());
    cache_.emplace(&node, p);
    return p;
  }

 private:
  Piece EmitUncached(const Node& node) {
    switch (node.kind) {
      case Node::Kind::kEmpty:
        return Literal(U"");
      case Node::Kind::kClass:
        return EmitClass(node.ranges);
      case Node::Kind::kConcat:
        return EmitConcat(node);
      case Node::Kind::kAlt:
        return EmitAlt(node);
      case Node::Kind::kRepeat:
        return EmitRepeat(node);
    }
    return Literal(U"");
  }

  bool Nullable(const Node& node) {
    if (auto it = nullable_.find(&node); it != nullable_.end()) return it->second;
    bool n = false;
    switch (node.kind) {
      case Node::Kind::kEmpty:
        n = true;
        break;
      case Node::Kind::kClass:
        break;
      case Node::Kind::kConcat:
        n = std::all_of(node.children.begin(), node.children.end(),
                        [this](const Node& c) { return Nullable(c); });
        break;
      case Node::Kind::kAlt:
        n = std::any_of(node.children.begin(), node.children.end(),
                        [this](const Node& c) { return Nullable(c); });
        break;
      case Node::Kind::kRepeat:
        n = node.min == 0 || Nullable(node.children[0]);
        break;
    }
    nullable_.emplace(&node, n);
    return n;
  }

  // The strings of `node` but the empty one (nullopt: none). A repeated item must not match
  // the empty string (the GBNF parser rightly calls that left recursion), and X{m,n} with X
  // nullable is exactly (X without "") repeated 0..n times.
  std::optional<Piece> EmitNonEmpty(const Node& node) {
    if (!Nullable(node)) return Emit(node);
    if (auto it = non_empty_.find(&node); it != non_empty_.end()) return it->second;
    std::optional<Piece> p;
    if (node.kind == Node::Kind::kAlt) {
      std::vector<Piece> alts;
      for (const Node& c : node.children) {
        if (std::optional<Piece> x = EmitNonEmpty(c)) alts.push_back(std::move(*x));
      }
      if (!alts.empty()) p = Alternatives(alts);
    } else if (node.kind == Node::Kind::kRepeat && node.max != 0) {
      if (std::optional<Piece> x = EmitNonEmpty(node.children[0])) {
        p = Repeated(*x, 1, node.max);
      }
    } else if (node.kind == Node::Kind::kConcat) {
      p = NonEmptyConcat(node);
    }
    non_empty_.emplace(&node, p);
    return p;
  }

  // All children nullable: the first non-empty child, then the others as they are (the rest
  // after each position is a shared rule, so the text stays linear).
  std::optional<Piece> NonEmptyConcat(const Node& node) {
    std::vector<Piece> alts;
    std::string rest;  // rule matching children i+1.. in order
    for (size_t i = node.children.size(); i-- > 0;) {
      const Node& c = node.children[i];
      if (std::optional<Piece> x = EmitNonEmpty(c)) {
        alts.insert(alts.begin(), Symbol(x->Text() + (rest.empty() ? "" : " " + rest)));
        alts.front().atomic = false;
      }
      const Piece t = Emit(c);
      if (!t.empty()) rest = rules_.Add("regex-rest", t.Text() + (rest.empty() ? "" : " " + rest));
    }
    if (alts.empty()) return std::nullopt;
    return Alternatives(alts);
  }

  static Piece Alternatives(const std::vector<Piece>& alts) {
    if (alts.size() == 1) return alts[0];
    std::string text = "(";
    for (size_t i = 0; i < alts.size(); ++i) {
      text += (i == 0 ? " " : " | ") + (alts[i].empty() ? std::string("\"\"") : alts[i].Text());
    }
    return Symbol(text + " )");
  }

  Piece Repeated(const Piece& x, int64_t min, int64_t max) {
    const std::string atom = x.atomic ? x.Text() : "( " + x.Text() + " )";
    Piece out;
    out.text = rules_.Repeat(atom, min, max, what_);
    out.atomic = min == 1 && max == 1 && x.atomic;
    return out;
  }

  Piece EmitClass(const std::vector<CpRange>& ranges) {
    if (target_ == Target::kRaw) return RawClass(ranges);
    std::vector<CpRange> plain;
    std::vector<uint32_t> specials;
    gbnf::SplitJsonSpecials(ranges, plain, specials);
    if (specials.empty()) return RawClass(plain);
    if (plain.empty() && specials.size() == 1) return Literal(gbnf::JsonEscapeOf(specials[0]));
    std::vector<std::string> alts;
    if (!plain.empty()) alts.push_back(gbnf::GbnfClass(plain));
    std::vector<uint32_t> controls;
    std::vector<CpRange> letters;  // of the short escapes \b \f \n \r \t
    for (uint32_t cp : specials) {
      const std::u32string escape = gbnf::JsonEscapeOf(cp);
      if (cp >= 0x20) {
        alts.push_back(gbnf::GbnfLiteral(escape));
        continue;
      }
      controls.push_back(cp);
      if (escape.size() == 2) letters.push_back({escape[1], escape[1]});
    }
    if (!letters.empty()) {
      alts.push_back(gbnf::GbnfLiteral(U"\\") + " " +
                     gbnf::GbnfClass(gbnf::NormalizeRanges(std::move(letters))));
    }
    for (std::string& e : ControlEscapes(controls)) alts.push_back(std::move(e));
    std::string body;
    for (const std::string& a : alts) body += (body.empty() ? "" : " | ") + a;
    return Symbol(rules_.Add("json-pattern-char", std::move(body)));
  }

  static Piece RawClass(const std::vector<CpRange>& ranges) {
    if (ranges.size() == 1 && ranges[0].lo == ranges[0].hi) {
      return Literal(std::u32string(1, static_cast<char32_t>(ranges[0].lo)));
    }
    return Symbol(gbnf::GbnfClass(ranges));
  }

  Piece EmitConcat(const Node& node) {
    std::vector<Piece> parts;
    for (const Node& child : node.children) {
      Piece p = Emit(child);
      if (p.empty()) continue;
      if (p.is_literal && !parts.empty() && parts.back().is_literal) {
        parts.back().literal += p.literal;
        parts.back().atomic = false;
      } else {
        parts.push_back(std::move(p));
      }
    }
    if (parts.empty()) return Literal(U"");
    if (parts.size() == 1) return std::move(parts[0]);
    Piece out;
    for (const Piece& p : parts) out.text += (out.text.empty() ? "" : " ") + p.Text();
    return out;
  }

  Piece EmitAlt(const Node& node) {
    std::vector<Piece> alts;
    for (const Node& child : node.children) alts.push_back(Emit(child));
    return Alternatives(alts);  // parenthesised (a kAlt has two children or more)
  }

  Piece EmitRepeat(const Node& node) {
    if (node.max == 0) return Literal(U"");
    if (!Nullable(node.children[0])) return Repeated(Emit(node.children[0]), node.min, node.max);
    const std::optional<Piece> x = EmitNonEmpty(node.children[0]);
    if (!x) return Literal(U"");
    return Repeated(*x, 0, node.max);
  }

  const Target target_;
  gbnf::RuleSet& rules_;
  const std::string what_;
  std::unordered_map<const Node*, Piece> cache_;
  std::unordered_map<const Node*, std::optional<Piece>> non_empty_;
  std::unordered_map<const Node*, bool> nullable_;
};

}  // namespace

std::string Emit(const Node& node, Target target, gbnf::RuleSet& rules, std::string_view what) {
  Emitter emitter(target, rules, what);
  const Piece p = emitter.Emit(node);
  return p.empty() ? "" : p.Text();
}

}  // namespace regex

Result<std::string> RegexToGbnf(std::string_view regex, const CompileLimits& limits) {
  PAGODA_ASSIGN_OR_RETURN(const regex::Node node, regex::Parse(regex, limits));
  gbnf::RuleSet rules(limits);
  const std::string body = regex::Emit(node, regex::Target::kRaw, rules, "regex");
  return rules.Render(body);
}

}  // namespace pagoda::grammar
