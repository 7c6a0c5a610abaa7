// Internal to the constraint compilers: a regex (Python / JavaScript flavour, as vLLM's
// guided_regex and JSON schema `pattern` use it) parsed into a small tree.
//
// Supported: literals (UTF-8), escapes (\. \\ \n \t \r \f \v \0 \a \d \w \s \D \W \S \xHH
// \uHHHH \UHHHHHHHH, escaped punctuation), `.` (no line terminator), classes with ranges /
// negation / escapes, groups ( ) (?: ) (?<name> ) (?P<name> ), comments (?# ), alternation,
// * + ? {m} {m,} {,n} {m,n} with an optional lazy `?`, and ^ / \A at the start and $ / \Z / \z
// at the end of a top-level alternative (the match is always a full match). Anything else —
// backreferences, lookaround, anchors or word boundaries elsewhere, inline flags, possessive
// quantifiers — is INVALID_ARGUMENT naming the construct and its offset (in code points).
// Where Python and JavaScript disagree (\d \w \s beyond ASCII, `.`), the tree keeps to what
// both accept: \d is [0-9], \W is ASCII only, \S excludes either flavour's blanks.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scheduler/grammar/constraint_compilers.h"
#include "scheduler/grammar/gbnf_text.h"

namespace pagoda::grammar::regex {

struct Node {
  enum class Kind : uint8_t { kEmpty, kClass, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kEmpty;
  std::vector<gbnf::CpRange> ranges;  // kClass: normalized, non-empty
  std::vector<Node> children;         // kConcat, kAlt; kRepeat: exactly one
  int64_t min = 0;                    // kRepeat
  int64_t max = 0;                    // kRepeat; -1 = unbounded
};

// Nesting is bounded by limits.max_depth, each `|` list by max_alternatives, each count by
// max_repetition.
Result<Node> Parse(std::string_view regex, const CompileLimits& limits);

// The shortest and longest match in code points (max -1: unbounded; saturates at 2^40).
struct LengthRange {
  int64_t min = 0;
  int64_t max = 0;
};
LengthRange Lengths(const Node& node);

}  // namespace pagoda::grammar::regex
