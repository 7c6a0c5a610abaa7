// Structured output, part 1: a compiled grammar and its byte-level matcher.
//
// Every constraint (JSON schema, json_object, regex, choice, GBNF) is compiled to llama.cpp's
// GBNF text (scheduler/grammar/constraint_compilers.h) and parsed here into an immutable
// `Grammar`; one matcher engine serves them all.
//
// The grammar works on BYTES: a character class over code points ([a-z], [^"\\], `.`) is
// compiled into alternatives of UTF-8 byte-set sequences, so a token whose bytes end in the
// middle of a character advances the matcher like any other and nothing needs a partial-UTF-8
// state. A `GrammarMatcher` is the state of one output (the set of pushdown stacks still alive,
// sorted and deduplicated, so equal states compare and hash equal); it is a value: copy it to
// try a continuation (speculative proposals) and keep the copy or drop it. Grammars are shared
// (`std::shared_ptr<const Grammar>`) by every sequence that uses them and by the compile cache;
// a Grammar is thread-safe to read, a matcher is thread-compatible (one thread at a time).
//
// Limits: parsing checks the text's size, nesting, repetition counts and the expanded size;
// the matcher bounds the live stacks (ambiguous grammars), the rule expansions of one byte and
// the state's size — an advance that would exceed one fails like a rejected byte, never grows
// without bound. Errors are INVALID_ARGUMENT naming the line:column and what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pagoda::grammar {

struct GrammarLimits {
  size_t max_text_bytes = 1 << 20;      // GBNF source size
  size_t max_elements = 1 << 20;        // grammar elements after expanding {m,n} and char classes
  int32_t max_nesting = 128;            // parenthesis depth while parsing
  int32_t max_repetition = 10000;       // largest m or n in x{m,n}
  int32_t max_stacks = 4096;            // live pushdown stacks in one matcher state
  int64_t max_advance_steps = 1 << 18;  // rule expansions while advancing by one byte
  size_t max_state_entries = 1 << 22;   // positions over all stacks of one state (memory bound)
};

class Grammar;  // opaque: rules of byte-set / rule-reference sequences (grammar_internal.h)
namespace internal {
struct MatcherAccess;
}

// Parses GBNF (llama.cpp's grammars/README.md syntax: `name ::= alternatives`, names of
// [a-zA-Z0-9_-], "literals" with \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH escapes (code
// points), [classes] with ranges and ^, `.` (any character), ( ) groups, * + ? {m} {m,} {m,n},
// # comments; a newline ends a rule except inside ( ) or after | and ::=). The start rule is
// `root`. INVALID_ARGUMENT ("line L col C: ...") for a syntax error, an undefined or twice
// defined rule, left recursion (a rule that can reach itself before matching a character, which
// includes `x*` of an x that can be empty), a limit exceeded, or a start state beyond
// max_stacks.
Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                 const GrammarLimits& limits = {});

// The state of one output: starts before any byte of `grammar` (non-null). A moved-from
// matcher may only be assigned to or destroyed.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);
  GrammarMatcher(const GrammarMatcher&);
  GrammarMatcher& operator=(const GrammarMatcher&);
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;
  ~GrammarMatcher();

  // Advances by `bytes` if the output stays a viable prefix and returns true; otherwise returns
  // false and leaves the state unchanged.
  bool Accept(std::string_view bytes);
  // Would Accept(bytes) succeed? (No state change.)
  bool CanAccept(std::string_view bytes) const;
  // The output so far is a complete sentence of the grammar (EOS may follow).
  bool IsAccepting() const;
  // Accepting and no byte can follow: generation is over.
  bool IsTerminated() const;
  // Parse stacks alive (1 for an unambiguous position; at most GrammarLimits::max_stacks).
  size_t num_stacks() const;

  const std::shared_ptr<const Grammar>& grammar() const;
  // A hash of the state (equal states hash equal): the token-mask cache key.
  uint64_t StateHash() const;
  bool SameState(const GrammarMatcher& other) const;

 private:
  friend struct internal::MatcherAccess;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pagoda::grammar
