// The step function of the pushdown matcher (grammar_internal.h): advance a canonical stack
// set by one byte, expanding rule references until every top is a byte set.
//
// While expanding, a stack is a chain of nodes (position, node below) whose bottom part may be a
// prefix of an input stack, so a rule reference costs one node, not a copy of the stack; only
// the finished stacks are written out flat, then sorted and deduplicated.
#include <algorithm>

#include "scheduler/grammar/grammar_internal.h"

namespace pagoda::grammar::internal {
namespace {

constexpr int32_t kEmptyStack = -1;

class Expander {
 public:
  Expander(const Grammar& grammar, const StackSet* base, StepScratch& scratch)
      : g_(grammar), base_(base), s_(scratch) {
    s_.nodes.clear();
    s_.work.clear();
    s_.raw.clear();
  }

  // The stack base->stack(i) without its top (an input stack's continuation).
  int32_t BaseBelow(uint32_t begin, uint32_t len) {
    if (len == 0) return kEmptyStack;
    return NewNode(base_->data[begin + len - 1], -1, begin, len - 1);
  }

  // `below` with position `pos` pushed on top.
  int32_t Push(uint32_t pos, int32_t below) {
    if (below == kEmptyStack) return NewNode(pos, -1, 0, 0);
    return NewNode(pos, below, 0, 0);
  }

  void Add(int32_t node) { s_.work.push_back(node); }

  // Expands everything added; false when a limit is exceeded.
  bool Run() {
    int64_t steps = 0;
    while (!s_.work.empty()) {
      const int32_t n = s_.work.back();
      s_.work.pop_back();
      if (++steps > g_.limits.max_advance_steps) return false;
      if (n == kEmptyStack) {
        if (!Emit(n)) return false;
        continue;
      }
      const StepScratch::Node node = s_.nodes[static_cast<size_t>(n)];
      const Elem& e = g_.elems[node.pos];
      if (e.kind == ElemKind::kBytes) {
        if (!Emit(n)) return false;
        continue;
      }
      int32_t below = Pop(node);
      if (g_.elems[node.pos + 1].kind != ElemKind::kEnd) below = Push(node.pos + 1, below);
      for (uint32_t a = g_.alt_begin[e.id]; a < g_.alt_begin[e.id + 1]; ++a) {
        const uint32_t start = g_.alt_starts[a];
        Add(g_.elems[start].kind == ElemKind::kEnd ? below : Push(start, below));
      }
    }
    return true;
  }

 private:
  int32_t NewNode(uint32_t pos, int32_t parent, uint32_t base_begin, uint32_t base_len) {
    s_.nodes.push_back({pos, parent, base_begin, base_len});
    return static_cast<int32_t>(s_.nodes.size() - 1);
  }

  int32_t Pop(const StepScratch::Node& node) {
    if (node.parent >= 0) return node.parent;
    return BaseBelow(node.base_begin, node.base_len);
  }

  // Writes the stack ending at node `n` flat into s_.raw.
  bool Emit(int32_t n) {
    s_.chain.clear();
    uint32_t base_begin = 0, base_len = 0;
    while (n >= 0) {
      const StepScratch::Node& node = s_.nodes[static_cast<size_t>(n)];
      s_.chain.push_back(node.pos);
      if (node.parent < 0) {
        base_begin = node.base_begin;
        base_len = node.base_len;
      }
      n = node.parent;
    }
    StackSet& raw = s_.raw;
    if (raw.data.size() + base_len + s_.chain.size() > g_.limits.max_state_entries) return false;
    if (base_len > 0) {
      raw.data.insert(raw.data.end(), base_->data.begin() + base_begin,
                      base_->data.begin() + base_begin + base_len);
    }
    raw.data.insert(raw.data.end(), s_.chain.rbegin(), s_.chain.rend());
    raw.begin.push_back(static_cast<uint32_t>(raw.data.size()));
    return true;
  }

  const Grammar& g_;
  const StackSet* base_;
  StepScratch& s_;
};

// s_.raw sorted and deduplicated into `out`; false if more stacks than the limit remain.
bool Canonicalize(const Grammar& g, StepScratch& s, StackSet* out) {
  const StackSet& raw = s.raw;
  s.order.resize(raw.size());
  for (uint32_t i = 0; i < s.order.size(); ++i) s.order[i] = i;
  auto less = [&raw](uint32_t a, uint32_t b) {
    const auto x = raw.stack(a), y = raw.stack(b);
    return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
  };
  std::sort(s.order.begin(), s.order.end(), less);
  out->clear();
  std::span<const uint32_t> prev;
  for (size_t k = 0; k < s.order.size(); ++k) {
    const auto cur = raw.stack(s.order[k]);
    if (k > 0 && std::equal(cur.begin(), cur.end(), prev.begin(), prev.end())) continue;
    prev = cur;
    out->data.insert(out->data.end(), cur.begin(), cur.end());
    out->begin.push_back(static_cast<uint32_t>(out->data.size()));
  }
  if (out->size() > static_cast<size_t>(g.limits.max_stacks)) {
    out->clear();
    return false;
  }
  return true;
}

}  // namespace

uint64_t HashStackSet(const StackSet& set) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ set.data.size();
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
  };
  for (uint32_t v : set.data) mix(v);
  for (uint32_t v : set.begin) mix(v);
  return h ^ (h >> 31);
}

bool Advance(const Grammar& grammar, const StackSet& in, uint8_t byte, StepScratch& scratch,
             StackSet* out) {
  Expander ex(grammar, &in, scratch);
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t begin = in.begin[i], len = in.begin[i + 1] - begin;
    if (len == 0) continue;  // the accepted stack takes no more bytes
    const uint32_t top = in.data[begin + len - 1];
    if (!Contains(grammar.byte_sets[grammar.elems[top].id], byte)) continue;
    const int32_t below = ex.BaseBelow(begin, len - 1);
    const bool more = grammar.elems[top + 1].kind != ElemKind::kEnd;
    ex.Add(more ? ex.Push(top + 1, below) : below);
  }
  if (!ex.Run()) {
    out->clear();
    return false;
  }
  return Canonicalize(grammar, scratch, out);
}

bool StartSet(const Grammar& grammar, StepScratch& scratch, StackSet* out) {
  StackSet none;
  Expander ex(grammar, &none, scratch);
  for (uint32_t a = grammar.alt_begin[grammar.root]; a < grammar.alt_begin[grammar.root + 1]; ++a) {
    const uint32_t start = grammar.alt_starts[a];
    ex.Add(grammar.elems[start].kind == ElemKind::kEnd ? kEmptyStack : ex.Push(start, kEmptyStack));
  }
  if (!ex.Run()) {
    out->clear();
    return false;
  }
  return Canonicalize(grammar, scratch, out);
}

}  // namespace pagoda::grammar::internal
