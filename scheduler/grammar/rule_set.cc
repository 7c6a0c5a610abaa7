#include "scheduler/grammar/rule_set.h"

#include <algorithm>

#include "scheduler/grammar/gbnf_text.h"

namespace pagoda::grammar::gbnf {
namespace {

constexpr size_t kMaxNameLength = 40;

const char* PrimitiveName(Primitive p) {
  switch (p) {
    case Primitive::kSpace:
      return "space";
    case Primitive::kJsonChar:
      return "json-char";
    case Primitive::kPlainChar:
      return "json-plain-char";
    case Primitive::kString:
      return "string";
    case Primitive::kNumber:
      return "number";
    case Primitive::kInteger:
      return "integer";
    case Primitive::kBoolean:
      return "boolean";
    case Primitive::kNull:
      return "null";
    case Primitive::kValue:
      return "value";
    case Primitive::kObject:
      return "object";
    case Primitive::kArray:
      return "array";
  }
  return "primitive";
}

// Names used by the primitives' helper rules, never handed out for anything else.
constexpr const char* kHelperNames[] = {"root", "json-hex4", "json-int"};

std::string Sanitize(std::string_view hint) {
  std::string out;
  for (char c : hint) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (keep) {
      out += c;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
    if (out.size() >= kMaxNameLength) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "r" : out;
}

}  // namespace

RuleSet::RuleSet(const CompileLimits& limits) : limits_(limits) {
  for (int p = 0; p <= static_cast<int>(Primitive::kArray); ++p) {
    taken_.insert(PrimitiveName(static_cast<Primitive>(p)));
  }
  for (const char* n : kHelperNames) taken_.insert(n);
}

void RuleSet::Fail(Status s) {
  if (status_.ok()) status_ = std::move(s);
}

void RuleSet::Charge(size_t bytes) {
  bytes_ += bytes;
  if (bytes_ > limits_.max_output_bytes) {
    Fail(InvalidArgument("the compiled grammar exceeds the limit of " +
                         std::to_string(limits_.max_output_bytes) + " bytes (max_output_bytes)"));
  }
}

std::string RuleSet::UniqueName(std::string_view hint) {
  const std::string base = Sanitize(hint);
  std::string name = base;
  int& next = next_suffix_[base];  // names base-2, base-3, ... in turn, never rescanned
  if (next < 2) next = 2;
  while (taken_.contains(name)) name = base + "-" + std::to_string(next++);
  taken_.insert(name);
  return name;
}

std::string RuleSet::Add(std::string_view hint, std::string body) {
  if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
  std::string name = UniqueName(hint);
  Charge(name.size() + body.size() + 6);
  by_body_.emplace(body, name);
  index_[name] = rules_.size();
  rules_.emplace_back(name, std::move(body));
  return name;
}

std::string RuleSet::Reserve(std::string_view hint) {
  std::string name = UniqueName(hint);
  index_[name] = rules_.size();
  rules_.emplace_back(name, "");
  return name;
}

void RuleSet::Define(const std::string& name, std::string body) {
  Charge(name.size() + body.size() + 6);
  auto it = index_.find(name);
  if (it == index_.end()) {
    Fail(Internal("rule '" + name + "' defined without being reserved"));
    return;
  }
  by_body_.emplace(body, name);
  rules_[it->second].second = std::move(body);
}

void RuleSet::Rollback(size_t mark) {
  for (size_t i = mark; i < rules_.size(); ++i) {
    const std::string& name = rules_[i].first;
    const std::string& body = rules_[i].second;
    index_.erase(name);
    if (auto it = by_body_.find(body); it != by_body_.end() && it->second == name) {
      by_body_.erase(it);
    }
    std::erase_if(primitives_, [&](const auto& entry) { return entry.second == name; });
  }
  rules_.resize(std::min(mark, rules_.size()));
}

std::string RuleSet::Repeat(std::string_view atom, int64_t min, int64_t max,
                            std::string_view what) {
  const int64_t limit = limits_.max_repetition;
  if (min > limit || max > limit) {
    Fail(InvalidArgument(std::string(what) + ": repetition count " +
                         std::to_string(std::max(min, max)) + " exceeds the limit of " +
                         std::to_string(limit) + " (max_repetition)"));
    return std::string(atom);
  }
  repetitions_ += max < 0 ? min + 1 : max;
  if (repetitions_ > limits_.max_total_repetition) {
    Fail(InvalidArgument(std::string(what) + ": the grammar's repetition counts add up to more " +
                         "than the limit of " + std::to_string(limits_.max_total_repetition) +
                         " (max_total_repetition)"));
  }
  const std::string a(atom);
  if (max == 0) return "";
  if (min == 0 && max == 1) return a + "?";
  if (min == 0 && max < 0) return a + "*";
  if (min == 1 && max < 0) return a + "+";
  if (min == 1 && max == 1) return a;
  if (max < 0) return a + "{" + std::to_string(min) + ",}";
  if (min == max) return a + "{" + std::to_string(min) + "}";
  return a + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

Result<std::string> RuleSet::Render(std::string_view root_body) {
  std::string out = "root ::= " + std::string(root_body.empty() ? "\"\"" : root_body) + "\n";
  for (const auto& [name, body] : rules_) {
    out += name + " ::= " + (body.empty() ? std::string("\"\"") : body) + "\n";
  }
  Charge(root_body.size() + 10);
  if (!status_.ok()) return status_;
  return out;
}

std::string RuleSet::Use(Primitive p) {
  if (auto it = primitives_.find(p); it != primitives_.end()) return it->second;
  const std::string name = PrimitiveName(p);
  primitives_[p] = name;
  index_[name] = rules_.size();
  rules_.emplace_back(name, "");
  Define(name, PrimitiveBody(p));
  return name;
}

// The primitives follow llama.cpp's json-schema-to-grammar: whitespace is at most one blank or
// a newline and 20 indentation characters per gap; numbers have at most 16 digits per part.
std::string RuleSet::PrimitiveBody(Primitive p) {
  const std::string sp = p == Primitive::kSpace ? "" : Use(Primitive::kSpace);
  switch (p) {
    case Primitive::kSpace:
      return "( \" \" | \"\\n\" " + Repeat("[ \\t]", 0, 20, "whitespace") + " )?";
    case Primitive::kPlainChar:
      return GbnfClass(ComplementRanges(NormalizeRanges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}})));
    case Primitive::kJsonChar:
      return JsonCharBody();
    case Primitive::kString:
      return "\"\\\"\" " + Use(Primitive::kJsonChar) + "* \"\\\"\" " + sp;
    case Primitive::kNumber:
      return "\"-\"? " + JsonIntRule() + " ( \".\" " + Repeat("[0-9]", 1, 16, "number") +
             " )? ( [eE] [+\\-]? " + Repeat("[0-9]", 1, 3, "number") + " )? " + sp;
    case Primitive::kInteger:
      return "\"-\"? " + JsonIntRule() + " " + sp;
    case Primitive::kBoolean:
      return "( \"true\" | \"false\" ) " + sp;
    case Primitive::kNull:
      return "\"null\" " + sp;
    case Primitive::kValue:
      return Use(Primitive::kObject) + " | " + Use(Primitive::kArray) + " | " +
             Use(Primitive::kString) + " | " + Use(Primitive::kNumber) + " | " +
             Use(Primitive::kBoolean) + " | " + Use(Primitive::kNull);
    case Primitive::kObject:
      return ObjectBody(sp);
    case Primitive::kArray:
      return "\"[\" " + sp + " ( " + Use(Primitive::kValue) + " ( \",\" " + sp + " " +
             Use(Primitive::kValue) + " )* )? \"]\" " + sp;
  }
  return "\"\"";
}

std::string RuleSet::JsonCharBody() {
  if (!index_.contains("json-hex4")) {
    // Four hex digits that are not a surrogate (D800-DFFF), so every \u escape decodes alone.
    index_["json-hex4"] = rules_.size();
    rules_.emplace_back("json-hex4", "");
    Define("json-hex4", "[0-9a-cA-CeEfF] " + Repeat("[0-9a-fA-F]", 3, 3, "json-char") +
                            " | [dD] [0-7] " + Repeat("[0-9a-fA-F]", 2, 2, "json-char"));
  }
  return Use(Primitive::kPlainChar) + " | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" json-hex4 )";
}

std::string RuleSet::JsonIntRule() {
  if (!index_.contains("json-int")) {
    index_["json-int"] = rules_.size();
    rules_.emplace_back("json-int", "");
    Define("json-int", "\"0\" | [1-9] " + Repeat("[0-9]", 0, 15, "integer"));
  }
  return "json-int";
}

std::string RuleSet::ObjectBody(const std::string& sp) {
  const std::string kv = Use(Primitive::kString) + " \":\" " + sp + " " + Use(Primitive::kValue);
  return "\"{\" " + sp + " ( " + kv + " ( \",\" " + sp + " " + kv + " )* )? \"}\" " + sp;
}

}  // namespace pagoda::grammar::gbnf
