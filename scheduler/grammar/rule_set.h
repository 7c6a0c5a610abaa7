// Internal to the constraint compilers: the rules of one GBNF grammar under construction.
//
// RuleSet hands out unique rule names derived from hints (property names, $defs names), shares
// rules with identical bodies, adds the JSON primitives (bounded whitespace, strings, numbers,
// any value, ...) on first use, and counts the output bytes and repetition counts against
// CompileLimits: the first breach is kept as the error (status()), so the compilers can keep
// going and check once per step. Render() writes `root ::= ...` then every rule in order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/status.h"
#include "scheduler/grammar/constraint_compilers.h"

namespace pagoda::grammar::gbnf {

// The JSON primitives, named in the output as RuleSet::Use returns.
enum class Primitive {
  kSpace,      // bounded whitespace between JSON tokens
  kJsonChar,   // one JSON string character (escapes included, no lone surrogates)
  kPlainChar,  // a JSON string character without escapes (keys of additional properties)
  kString,     // a JSON string + space
  kNumber,     // a JSON number (bounded digit counts) + space
  kInteger,    // a JSON integer + space
  kBoolean,
  kNull,
  kValue,  // any JSON value + space
  kObject,
  kArray,
};

class RuleSet {
 public:
  explicit RuleSet(const CompileLimits& limits);

  // Adds `name ::= body` under a fresh name derived from `hint` (an existing rule with the
  // same body is reused) and returns the name.
  std::string Add(std::string_view hint, std::string body);
  // A fresh name for a rule whose body is defined later (recursive rules).
  std::string Reserve(std::string_view hint);
  void Define(const std::string& name, std::string body);
  // Undoing a failed attempt: Mark() before it, Rollback(mark) forgets every rule added since.
  size_t Mark() const { return rules_.size(); }
  void Rollback(size_t mark);
  bool Has(const std::string& name) const { return index_.contains(name); }
  // Adds the primitive (and those it uses) once; returns its rule name.
  std::string Use(Primitive p);
  // `atom` repeated min..max times (max < 0: unbounded) in GBNF; `atom` must be one symbol
  // (a rule name, a class or a one-character literal). Counts against the repetition limits;
  // `what` names the construct in the error ("maxLength at /a").
  std::string Repeat(std::string_view atom, int64_t min, int64_t max, std::string_view what);

  // Counts text built outside rules (inline expressions) against max_output_bytes.
  void Charge(size_t bytes);
  // The first limit breach (or OK). Every method keeps working after one, producing junk.
  const Status& status() const { return status_; }
  void Fail(Status s);
  // The grammar text: `root ::= root_body` and every rule, in order of creation.
  Result<std::string> Render(std::string_view root_body);

 private:
  std::string UniqueName(std::string_view hint);
  std::string PrimitiveBody(Primitive p);
  std::string JsonCharBody();
  std::string JsonIntRule();
  std::string ObjectBody(const std::string& sp);

  const CompileLimits limits_;
  std::vector<std::pair<std::string, std::string>> rules_;  // name, body ("" = reserved)
  std::unordered_map<std::string, size_t> index_;           // name -> rules_ position
  std::unordered_map<std::string, std::string> by_body_;    // body -> name
  std::unordered_set<std::string> taken_;
  std::unordered_map<std::string, int> next_suffix_;  // per name base
  std::map<Primitive, std::string> primitives_;
  size_t bytes_ = 0;
  int64_t repetitions_ = 0;
  Status status_;
};

}  // namespace pagoda::grammar::gbnf
