// Internal to the constraint compilers: the JSON schema compiler's state and its parts, split
// over json_schema_compiler.cc (entry, anyOf / oneOf, enum / const, types), json_schema_refs.cc
// ($ref, allOf), json_schema_objects.cc, json_schema_arrays.cc, json_schema_scalars.cc and
// json_schema_keywords.cc (which keywords are honoured, ignored or refused).
//
// A schema is compiled as a conjunction (`Conj`): the schema itself plus everything its allOf
// and $ref bring in, all of which must hold. Each keyword reads all parts (types intersect,
// `required` unites, bounds take the tightest, property schemas conjoin), so allOf needs no
// merged copy of the JSON and a shared $ref is read, not duplicated. anyOf / oneOf distribute
// over the conjunction. A pure {"$ref": ...} becomes a named rule, compiled once, so recursive
// schemas give recursive rules; a $ref that comes back to itself before consuming any byte
// (left recursion) is an error. Unsatisfiable parts (no type left, a required property that is
// forbidden, ...) are FAILED_PRECONDITION inside, dropped by anyOf and INVALID_ARGUMENT at the
// top. Work is bounded: each visit costs a step out of a budget of 4 per byte of schema text
// (plus 100000), so combinations that multiply (anyOf of anyOfs...) stop early.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "scheduler/grammar/constraint_compilers.h"
#include "scheduler/grammar/rule_set.h"

namespace pagoda::grammar::schema {

using Json = nlohmann::ordered_json;

struct Part {
  const Json* schema = nullptr;  // a JSON object
  std::string pointer;           // its JSON pointer, for messages
  bool skip_any_of = false;      // its anyOf / oneOf has been distributed already
  bool skip_one_of = false;
};
using Conj = std::vector<Part>;

// Bits of the JSON types a value may have.
enum TypeBits : unsigned {
  kObjectBit = 1,
  kArrayBit = 2,
  kStringBit = 4,
  kNumberBit = 8,
  kIntegerBit = 16,
  kBooleanBit = 32,
  kNullBit = 64,
  kAllTypes = 127,
};

// An unsatisfiable schema: FAILED_PRECONDITION (anyOf drops such branches).
Status Unsatisfiable(const std::string& what);
// "'<keyword>' at <pointer>" for messages ("" pointer reads as the root, "/").
std::string At(const std::string& keyword, const std::string& pointer);
std::string Child(const std::string& pointer, std::string_view key);  // pointer + "/" + escaped

class Compiler {
 public:
  // `text_bytes`: the size of the schema's text, which sets the work budget.
  Compiler(const Json& root, size_t text_bytes, const JsonSchemaOptions& opts,
           const CompileLimits& limits);
  Result<std::string> Compile();

  // A GBNF expression (ending in `space`) for the values `schema` allows.
  Result<std::string> Visit(const Json& schema, const std::string& pointer, const std::string& hint,
                            int depth);
  // The same for a conjunction; an empty one allows any value.
  Result<std::string> VisitConj(Conj conj, const std::string& hint, int depth);
  // Adds `schema` and what its allOf / $ref bring in to `out`.
  Status Flatten(const Json& schema, const std::string& pointer, int depth, Conj& out);
  // Visit of one schema, or of the conjunction of several (pointer pairs).
  Result<std::string> VisitAll(const std::vector<std::pair<const Json*, std::string>>& schemas,
                               const std::string& hint, int depth);

  gbnf::RuleSet& rules() { return rules_; }
  std::string Space() { return rules_.Use(gbnf::Primitive::kSpace); }
  // `hint ::= a | b | ...` (a single alternative is returned as it is).
  std::string Alternatives(const std::string& hint, const std::vector<std::string>& alts);

  // Children of objects and arrays start after a byte has been consumed: a $ref met there is
  // no left recursion. The guard clears the chain of $refs entered without consuming input.
  class ConsumedGuard {
   public:
    explicit ConsumedGuard(Compiler& c) : c_(c), saved_(std::move(c.leading_refs_)) {
      c.leading_refs_.clear();
    }
    ~ConsumedGuard() { c_.leading_refs_ = std::move(saved_); }
    ConsumedGuard(const ConsumedGuard&) = delete;
    ConsumedGuard& operator=(const ConsumedGuard&) = delete;

   private:
    Compiler& c_;
    std::vector<std::string> saved_;
  };

  // Per type (json_schema_objects.cc, json_schema_arrays.cc, json_schema_scalars.cc).
  Result<std::string> VisitObject(const Conj& conj, const std::string& hint, int depth);
  Result<std::string> VisitArray(const Conj& conj, const std::string& hint, int depth);
  Result<std::string> VisitString(const Conj& conj);
  Result<std::string> VisitNumber(const Conj& conj, bool integer_only);

 private:
  Status Step(const std::string& pointer, int depth);
  void Rollback(size_t mark);  // rules and $ref rules of a failed attempt
  std::string ArrayBody(const std::string& hint, const std::vector<std::string>& elems,
                        const std::string& item, int64_t k, int64_t lo, int64_t hi,
                        const std::string& what);
  Result<std::string> VisitRef(const std::string& ref, const std::string& pointer, int depth);
  Result<std::pair<const Json*, std::string>> ResolveRef(const std::string& ref,
                                                         const std::string& pointer) const;
  Result<std::string> Distribute(const Conj& conj, size_t index, const std::string& hint,
                                 int depth);
  Result<std::string> VisitEnum(const Conj& conj, unsigned types, const std::string& hint);
  Result<unsigned> AllowedTypes(const Conj& conj) const;
  Result<std::string> VisitTyped(const Conj& conj, unsigned type, const std::string& hint,
                                 int depth);

  const Json& root_;
  const JsonSchemaOptions opts_;
  const CompileLimits limits_;
  gbnf::RuleSet rules_;
  std::map<std::string, std::string> ref_rules_;  // $ref text -> rule name
  std::vector<std::string> leading_refs_;         // $refs entered without consuming a byte
  const int64_t step_budget_;
  int64_t steps_ = 0;
};

// Keyword checks shared by the files.
// INVALID_ARGUMENT for a keyword the compiler cannot honour in `part`.
Status CheckKeywords(const Part& part);
// Does `schema` hold only annotations besides the keywords in `except`?
bool OnlyAnnotations(const Json& schema, std::initializer_list<std::string_view> except);
// The keyword families present in the conjunction (TypeBits), for a schema without `type`.
unsigned ImpliedTypes(const Conj& conj);
// A non-negative integer keyword value (minLength, maxItems, ...).
Result<int64_t> CountKeyword(const Json& value, const std::string& keyword,
                             const std::string& pointer);

}  // namespace pagoda::grammar::schema
