#include "scheduler/grammar/constraint.h"

#include "scheduler/grammar/constraint_compilers.h"

namespace pagoda::grammar {
namespace {

Result<std::string> ToGbnf(const ConstraintSpec& spec) {
  switch (spec.kind) {
    case ConstraintKind::kJsonSchema:
      return JsonSchemaToGbnf(spec.text, JsonSchemaOptions{.strict = spec.strict});
    case ConstraintKind::kJsonObject:
      return JsonObjectGbnf();
    case ConstraintKind::kRegex:
      return RegexToGbnf(spec.text);
    case ConstraintKind::kGrammar:
      return spec.text;
    case ConstraintKind::kChoice:
      return ChoiceGbnf(spec.choices);
    case ConstraintKind::kNone:
      break;
  }
  return std::string();
}

// The cache key: the kind, the strict flag and the text, or the choices length-prefixed (so
// no two lists share a key).
std::string CacheKey(const ConstraintSpec& spec) {
  std::string key = ConstraintKindName(spec.kind);
  key += spec.strict ? ":strict:" : ":";
  if (spec.kind != ConstraintKind::kChoice) return key + spec.text;
  for (const std::string& c : spec.choices) key += std::to_string(c.size()) + ":" + c;
  return key;
}

}  // namespace

const char* ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kNone:
      return "none";
    case ConstraintKind::kJsonSchema:
      return "json_schema";
    case ConstraintKind::kJsonObject:
      return "json_object";
    case ConstraintKind::kRegex:
      return "regex";
    case ConstraintKind::kGrammar:
      return "grammar";
    case ConstraintKind::kChoice:
      return "choice";
  }
  return "unknown";
}

Result<std::shared_ptr<const Grammar>> CompileConstraint(const ConstraintSpec& spec) {
  if (spec.kind == ConstraintKind::kNone) return std::shared_ptr<const Grammar>();
  const std::string field = spec.field.empty() ? ConstraintKindName(spec.kind) : spec.field;
  Result<std::string> gbnf = ToGbnf(spec);
  if (!gbnf.ok()) return gbnf.status().WithPrefix(field);
  Result<std::shared_ptr<const Grammar>> grammar = ParseGbnf(*gbnf);
  if (!grammar.ok()) return grammar.status().WithPrefix(field);
  return grammar;
}

Result<std::shared_ptr<const Grammar>> GrammarCache::Compile(const ConstraintSpec& spec) {
  if (spec.kind == ConstraintKind::kNone) return std::shared_ptr<const Grammar>();
  const std::string key = CacheKey(spec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock: a slow schema does not hold up other requests' lookups.
  Result<std::shared_ptr<const Grammar>> grammar = CompileConstraint(spec);
  if (!grammar.ok() || capacity_ == 0) return grammar;
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.contains(key)) return grammar;  // another thread compiled it meanwhile
  lru_.emplace_front(key, *grammar);
  index_[key] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return grammar;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace pagoda::grammar
