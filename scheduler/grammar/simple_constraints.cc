// JsonObjectGbnf and ChoiceGbnf: the two constraints that need no parsing of their own.
#include <set>

#include "scheduler/grammar/constraint_compilers.h"
#include "scheduler/grammar/gbnf_text.h"
#include "scheduler/grammar/rule_set.h"

namespace pagoda::grammar {

std::string JsonObjectGbnf() {
  gbnf::RuleSet rules(CompileLimits{});
  const std::string object = rules.Use(gbnf::Primitive::kObject);
  Result<std::string> text = rules.Render(object);
  return text.ok() ? *text : std::string();  // fixed rules far below every limit
}

Result<std::string> ChoiceGbnf(std::span<const std::string> choices, const CompileLimits& limits) {
  if (choices.empty()) return InvalidArgument("choice: at least one choice is needed");
  if (choices.size() > limits.max_alternatives) {
    return InvalidArgument("choice: " + std::to_string(choices.size()) +
                           " choices exceed the limit of " +
                           std::to_string(limits.max_alternatives) + " (max_alternatives)");
  }
  std::set<std::string_view> seen;
  std::string body;
  size_t index = 0;
  for (const std::string& choice : choices) {
    ++index;
    if (!seen.insert(choice).second) continue;  // a duplicate adds only ambiguity
    Result<std::u32string> cps = gbnf::Utf8ToCodepoints(choice);
    if (!cps.ok()) return cps.status().WithPrefix("choice " + std::to_string(index));
    if (!body.empty()) body += " | ";
    body += gbnf::GbnfLiteral(*cps);
    if (body.size() > limits.max_output_bytes) break;  // Render reports it
  }
  gbnf::RuleSet rules(limits);
  return rules.Render(body);
}

}  // namespace pagoda::grammar
