// Internal to pagoda_grammar: the compiled grammar's layout and the one step function that the
// matcher and the token-mask walk share.
//
// A Grammar is a flat array of elements. Rule r's alternatives start at
// alt_starts[alt_begin[r] .. alt_begin[r + 1]); each alternative is a run of kBytes / kRule
// elements closed by a kEnd. A position is an index into `elems`.
//
// A pushdown stack is a sequence of positions, bottom first: the top is the next byte set to
// match, the entries below are where to continue once the rule above them is done (never a
// kEnd). An empty stack means the input so far is a sentence. A StackSet holds several stacks
// (the alternatives still alive) in canonical form: sorted, without duplicates, so two equal
// states have equal StackSets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "scheduler/grammar/grammar.h"

namespace pagoda::grammar {
namespace internal {

using ByteSet = std::array<uint64_t, 4>;  // bit b set = byte b matches

inline bool Contains(const ByteSet& set, uint8_t b) { return (set[b >> 6] >> (b & 63)) & 1u; }
inline void Insert(ByteSet& set, uint8_t b) { set[b >> 6] |= uint64_t{1} << (b & 63); }

enum class ElemKind : uint8_t { kEnd, kBytes, kRule };

struct Elem {
  ElemKind kind = ElemKind::kEnd;
  uint32_t id = 0;  // kBytes: index into Grammar::byte_sets; kRule: the rule index
};

struct StackSet {
  std::vector<uint32_t> data;      // the stacks' positions, one stack after the other
  std::vector<uint32_t> begin{0};  // stack i = data[begin[i], begin[i + 1])

  size_t size() const { return begin.size() - 1; }
  bool empty() const { return size() == 0; }
  std::span<const uint32_t> stack(size_t i) const {
    return std::span<const uint32_t>(data).subspan(begin[i], begin[i + 1] - begin[i]);
  }
  // The empty stack sorts first, so it is there iff stack 0 is empty.
  bool accepting() const { return !empty() && begin[1] == 0; }
  void clear() {
    data.clear();
    begin.assign(1, 0);
  }
  bool operator==(const StackSet& other) const = default;
};

uint64_t HashStackSet(const StackSet& set);

// Reused buffers of Advance / StartSet (no allocation once warmed up).
struct StepScratch {
  struct Node {
    uint32_t pos;
    int32_t parent;  // a node index, or -1: below is base data[base_begin, +base_len)
    uint32_t base_begin;
    uint32_t base_len;
  };
  std::vector<Node> nodes;
  std::vector<int32_t> work;  // node indices still to expand (-1 = the empty stack)
  StackSet raw;               // expanded stacks before sorting and deduplication
  std::vector<uint32_t> order;
  std::vector<uint32_t> chain;
};

}  // namespace internal

class Grammar {
 public:
  std::vector<internal::Elem> elems;
  std::vector<internal::ByteSet> byte_sets;
  std::vector<uint32_t> alt_begin;   // size rules + 1
  std::vector<uint32_t> alt_starts;  // first position of each alternative
  std::vector<std::string> rule_names;
  uint32_t root = 0;
  GrammarLimits limits;
  internal::StackSet start;  // the state before any byte
};

namespace internal {

// The stacks of `in` that accept `byte`, advanced and expanded until every top is a byte set
// (or the stack is empty), in canonical form. Returns false (and an empty `out`) when a limit
// of grammar.limits is exceeded; an empty `out` with true means the byte is rejected.
bool Advance(const Grammar& grammar, const StackSet& in, uint8_t byte, StepScratch& scratch,
             StackSet* out);

// The token-mask walk reads a matcher's stacks directly.
struct MatcherAccess {
  static const StackSet& Stacks(const GrammarMatcher& matcher);
};

// The expanded stacks of rule grammar.root from nothing: the start state.
bool StartSet(const Grammar& grammar, StepScratch& scratch, StackSet* out);

}  // namespace internal
}  // namespace pagoda::grammar
