// Internal to pagoda_grammar: the rules as the GBNF parser produces them, before they are
// checked and flattened into a Grammar (grammar_builder.cc).
//
// Groups, repetitions and character classes have already become generated rules (named
// "<owner>~<n>", which no GBNF name can clash with); a symbol is a byte set or a rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scheduler/grammar/grammar_internal.h"

namespace pagoda::grammar::internal {

struct Sym {
  bool is_rule = false;
  uint32_t id = 0;  // byte-set index or rule index
};

struct RuleDef {
  std::string name;
  std::vector<std::vector<Sym>> alts;
  bool defined = false;
  size_t where = 0;           // text offset: the definition, else the first reference
  std::string generated_for;  // "" for a named rule, else what made it ("a repetition", ...)
};

struct RuleSet {
  std::vector<RuleDef> rules;
  std::vector<ByteSet> byte_sets;
  size_t num_elements = 0;  // symbols + one end per alternative, so far
};

// "line L col C" of a byte offset (1-based; columns count bytes).
std::string LineCol(std::string_view text, size_t offset);

// Checks the parsed rules (root present, every rule defined, no left recursion) and flattens
// them into a Grammar with its start state.
Result<std::shared_ptr<const Grammar>> BuildGrammar(std::string_view text, RuleSet rules,
                                                    const GrammarLimits& limits);

}  // namespace pagoda::grammar::internal
