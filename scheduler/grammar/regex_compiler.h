// Internal to the constraint compilers: a parsed regex (regex_parser.h) written as GBNF.
//
// Two targets: kRaw matches the regex's strings themselves (RegexToGbnf); kJsonString matches
// them as the inside of a JSON string literal (JSON schema `pattern` and `format`): a `"`,
// `\` or control character the regex allows is written as its JSON escape, so the decoded
// string is what the regex matched. Groups and alternations become parenthesised GBNF groups
// (the GBNF parser turns each into one rule, so repetitions stay cheap); classes holding JSON
// specials become shared rules. Limit breaches are recorded in the RuleSet.
#pragma once

#include <string>
#include <string_view>

#include "scheduler/grammar/regex_parser.h"
#include "scheduler/grammar/rule_set.h"

namespace pagoda::grammar::regex {

enum class Target { kRaw, kJsonString };

// A GBNF sequence matching exactly the strings of `node` ("" when that is only the empty
// string). `what` names the source in errors ("pattern at /properties/a").
std::string Emit(const Node& node, Target target, gbnf::RuleSet& rules, std::string_view what);

}  // namespace pagoda::grammar::regex
