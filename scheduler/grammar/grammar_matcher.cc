// GrammarMatcher (grammar.h): a canonical stack set advanced byte by byte.
#include <cassert>
#include <utility>

#include "scheduler/grammar/grammar_internal.h"

namespace pagoda::grammar {

using internal::StackSet;

struct GrammarMatcher::State {
  std::shared_ptr<const Grammar> grammar;
  StackSet stacks;
  // Reused buffers of Accept; not part of the state (not copied).
  StackSet next, tmp;
  internal::StepScratch scratch;

  State(std::shared_ptr<const Grammar> g, StackSet s)
      : grammar(std::move(g)), stacks(std::move(s)) {}
};

namespace {

// `from` advanced by every byte into *out (*tmp is a second buffer); false if a byte is
// rejected or a limit is hit.
bool AdvanceAll(const Grammar& g, const StackSet& from, std::string_view bytes,
                internal::StepScratch& scratch, StackSet* out, StackSet* tmp) {
  const StackSet* cur = &from;
  for (size_t i = 0; i < bytes.size(); ++i) {
    StackSet* dst = (bytes.size() - 1 - i) % 2 == 0 ? out : tmp;
    if (!internal::Advance(g, *cur, static_cast<uint8_t>(bytes[i]), scratch, dst) || dst->empty()) {
      return false;
    }
    cur = dst;
  }
  return true;
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) {
  assert(grammar != nullptr);
  StackSet start = grammar->start;
  state_ = std::make_unique<State>(std::move(grammar), std::move(start));
}

GrammarMatcher::GrammarMatcher(const GrammarMatcher& other)
    : state_(std::make_unique<State>(other.state_->grammar, other.state_->stacks)) {}

GrammarMatcher& GrammarMatcher::operator=(const GrammarMatcher& other) {
  if (this != &other) {
    state_->grammar = other.state_->grammar;
    state_->stacks = other.state_->stacks;
  }
  return *this;
}

GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;
GrammarMatcher::~GrammarMatcher() = default;

bool GrammarMatcher::Accept(std::string_view bytes) {
  if (bytes.empty()) return true;
  State& s = *state_;
  if (!AdvanceAll(*s.grammar, s.stacks, bytes, s.scratch, &s.next, &s.tmp)) return false;
  std::swap(s.stacks, s.next);
  return true;
}

bool GrammarMatcher::CanAccept(std::string_view bytes) const {
  if (bytes.empty()) return true;
  internal::StepScratch scratch;
  StackSet out, tmp;
  return AdvanceAll(*state_->grammar, state_->stacks, bytes, scratch, &out, &tmp);
}

bool GrammarMatcher::IsAccepting() const { return state_->stacks.accepting(); }

bool GrammarMatcher::IsTerminated() const {
  const StackSet& set = state_->stacks;
  if (!set.accepting()) return false;
  const Grammar& g = *state_->grammar;
  for (size_t i = 1; i < set.size(); ++i) {  // a top that matches no byte (`[]`) takes none
    const internal::ByteSet& top = g.byte_sets[g.elems[set.stack(i).back()].id];
    if (top != internal::ByteSet{}) return false;
  }
  return true;
}

size_t GrammarMatcher::num_stacks() const { return state_->stacks.size(); }

const std::shared_ptr<const Grammar>& GrammarMatcher::grammar() const { return state_->grammar; }

uint64_t GrammarMatcher::StateHash() const { return internal::HashStackSet(state_->stacks); }

bool GrammarMatcher::SameState(const GrammarMatcher& other) const {
  return state_->grammar == other.state_->grammar && state_->stacks == other.state_->stacks;
}

namespace internal {
const StackSet& MatcherAccess::Stacks(const GrammarMatcher& matcher) {
  return matcher.state_->stacks;
}
}  // namespace internal

}  // namespace pagoda::grammar
