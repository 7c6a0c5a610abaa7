// Structured output, the request side: what a client asked for (ConstraintSpec) and the
// compile cache that turns it into a shared Grammar.
//
// Every API maps its fields onto one ConstraintSpec (gRPC GenerateRequest.constraint, OpenAI
// response_format / guided_* / structured_outputs, `generate --json-schema ...`); the server
// compiles it once per request with GrammarCache::Compile on the caller's thread, so a bad
// constraint is INVALID_ARGUMENT naming the field before the request reaches the engine, and the
// same constraint text sent again costs a lookup. Compilation is bounded in size and therefore
// in time (the limits of constraint_compilers.h and grammar.h). GrammarCache is thread-safe;
// the grammars it returns are immutable and shared with the requests using them.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "scheduler/grammar/grammar.h"

namespace pagoda::grammar {

enum class ConstraintKind { kNone, kJsonSchema, kJsonObject, kRegex, kGrammar, kChoice };
const char* ConstraintKindName(ConstraintKind kind);  // "json_schema", "regex", ...

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kNone;
  std::string text;                  // the schema (JSON text), regex or GBNF
  std::vector<std::string> choices;  // kChoice
  bool strict = false;               // kJsonSchema: additionalProperties false by default
  std::string field;                 // the request field it came from, for error messages
};

// Compiles `spec` to GBNF and parses it (no cache). kNone gives nullptr. Errors are
// INVALID_ARGUMENT prefixed with spec.field.
Result<std::shared_ptr<const Grammar>> CompileConstraint(const ConstraintSpec& spec);

class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 64) : capacity_(capacity) {}
  // CompileConstraint, remembered by (kind, strict, text / choices): the most recently used
  // `capacity` grammars are kept. Errors are not cached.
  Result<std::shared_ptr<const Grammar>> Compile(const ConstraintSpec& spec);
  size_t size() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const Grammar>>;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace pagoda::grammar
