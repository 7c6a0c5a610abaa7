// MaskAutomaton (mask_automaton.h).
#include "scheduler/grammar/mask_automaton.h"

#include <algorithm>
#include <bit>

namespace pagoda::grammar::internal {
namespace {

bool Intersects(const ByteSet& a, const ByteSet& b) {
  return ((a[0] & b[0]) | (a[1] & b[1]) | (a[2] & b[2]) | (a[3] & b[3])) != 0;
}

bool SubsetOf(const ByteSet& a, const ByteSet& b) {
  return ((a[0] & ~b[0]) | (a[1] & ~b[1]) | (a[2] & ~b[2]) | (a[3] & ~b[3])) == 0;
}

void Unite(ByteSet& into, const ByteSet& from) {
  for (size_t w = 0; w < 4; ++w) into[w] |= from[w];
}

size_t FirstByte(const ByteSet& set) {
  for (size_t w = 0; w < 4; ++w) {
    if (set[w] != 0) return w * 64 + static_cast<size_t>(std::countr_zero(set[w]));
  }
  return 0;
}

template <typename F>
void ForEachByte(const ByteSet& set, F&& f) {
  for (size_t w = 0; w < 4; ++w) {
    for (uint64_t bits = set[w]; bits != 0; bits &= bits - 1) {
      f(static_cast<uint8_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits))));
    }
  }
}

}  // namespace

int32_t MaskAutomaton::Reset(std::shared_ptr<const Grammar> grammar, const StackSet& start,
                             uint32_t max_depth) {
  const bool keep = grammar == grammar_ && num_states_ < kDenseStates / 2 &&
                    pool_entries_ < max_pool_entries_ / 2;
  if (!keep) {
    grammar_ = std::move(grammar);
    num_states_ = 0;
    pool_entries_ = 0;
    index_.clear();
    same_hash_.clear();
    sparse_.clear();
    classes_.clear();
  }
  if (dense_.empty()) {
    dense_.assign(kDenseStates * 256, kUnknown);
    class_of_.assign(kDenseStates * 256, 0);
    class_first_.assign(kDenseStates, 0);
    class_count_.assign(kDenseStates, 0);
    loop_bytes_.assign(kDenseStates, ByteSet{});
    exit_bytes_.assign(kDenseStates, ByteSet{});
  }
  if (path_.size() < max_depth + 1) path_.resize(max_depth + 1);
  if (start.empty()) return kDead;
  tmp_ = start;
  return Intern(0);
}

int32_t MaskAutomaton::Intern(uint32_t depth) {
  const uint64_t h = HashStackSet(tmp_);
  auto [it, fresh] = index_.try_emplace(h, -1);
  for (int32_t id = it->second; id >= 0; id = same_hash_[static_cast<size_t>(id)]) {
    if (states_[static_cast<size_t>(id)] == tmp_) return id;
  }
  const size_t size = tmp_.data.size() + tmp_.begin.size();
  if (pool_entries_ + size > max_pool_entries_ && num_states_ > 0) {
    if (fresh) index_.erase(it);
    std::swap(path_[depth], tmp_);
    return -static_cast<int32_t>(depth) - 2;
  }
  const size_t id = num_states_++;
  if (id == states_.size()) states_.emplace_back();
  std::swap(states_[id], tmp_);
  pool_entries_ += size;
  same_hash_.push_back(it->second);
  it->second = static_cast<int32_t>(id);
  if (id < kDenseStates) {
    std::fill_n(dense_.begin() + static_cast<ptrdiff_t>(id * 256), 256, kUnknown);
    class_count_[id] = 0;
    loop_bytes_[id] = ByteSet{};
    exit_bytes_[id] = ByteSet{};
  }
  return static_cast<int32_t>(id);
}

// `from` advanced by `byte` as a handle.
int32_t MaskAutomaton::Step(const StackSet& from, uint8_t byte, uint32_t depth) {
  const bool ok = Advance(*grammar_, from, byte, scratch_, &tmp_);
  return ok && !tmp_.empty() ? Intern(depth) : kDead;
}

// Splits the bytes into classes by the distinct stack tops that accept them (partition
// refinement: every top splits each class into the bytes it takes and the others); the bytes
// no top takes lead nowhere.
void MaskAutomaton::Classify(size_t state) {
  const auto first = static_cast<uint32_t>(classes_.size());
  constexpr uint64_t kAll = ~uint64_t{0};
  classes_.push_back({ByteSet{kAll, kAll, kAll, kAll}, kUnknown, 0});
  ByteSet any{};
  const StackSet& set = states_[state];
  for (size_t i = 0; i < set.size(); ++i) {
    const auto stack = set.stack(i);
    if (stack.empty()) continue;
    const ByteSet& top = grammar_->byte_sets[grammar_->elems[stack.back()].id];
    Unite(any, top);
    const size_t count = classes_.size();
    for (size_t c = first; c < count; ++c) {
      ByteSet in{}, out{};
      for (size_t w = 0; w < 4; ++w) {
        in[w] = classes_[c].bytes[w] & top[w];
        out[w] = classes_[c].bytes[w] & ~top[w];
      }
      if (in == ByteSet{} || out == ByteSet{}) continue;
      classes_[c].bytes = in;
      classes_.push_back({out, kUnknown, 0});
    }
    if (classes_.size() - first > 255) {  // too varied: transitions are made byte by byte
      classes_.resize(first);
      class_count_[state] = kPerByte;
      return;
    }
  }
  for (size_t c = first; c < classes_.size(); ++c) {
    ByteClass& bc = classes_[c];
    bc.rep = static_cast<uint8_t>(FirstByte(bc.bytes));
    if (!Intersects(bc.bytes, any)) {  // no stack takes these
      bc.to = kDead;
      Unite(exit_bytes_[state], bc.bytes);
    }
    ForEachByte(bc.bytes, [&](uint8_t b) {
      class_of_[state * 256 + b] = static_cast<uint8_t>(c - first);
      if (bc.to == kDead) dense_[state * 256 + b] = kDead;
    });
  }
  class_first_[state] = first;
  class_count_[state] = static_cast<uint16_t>(classes_.size() - first);
}

// The handle of class `cls` of `state` (one Advance the first time; memoized with its bytes'
// row entries unless the result is transient).
int32_t MaskAutomaton::Resolve(size_t state, size_t cls, uint32_t depth) {
  const size_t c = class_first_[state] + cls;
  if (classes_[c].to != kUnknown) return classes_[c].to;
  const int32_t to = Step(states_[state], classes_[c].rep, depth);
  if (to < kDead) return to;  // transient
  ByteClass& bc = classes_[c];
  bc.to = to;
  Unite(to == static_cast<int32_t>(state) ? loop_bytes_[state] : exit_bytes_[state], bc.bytes);
  ForEachByte(bc.bytes, [&](uint8_t b) { dense_[state * 256 + b] = to; });
  return to;
}

int32_t MaskAutomaton::NextSlow(int32_t from, uint8_t byte, uint32_t depth) {
  if (from == kDead) return kDead;
  if (from <= -2) {  // transient: no memo
    StackSet& out = path_[depth];
    const bool ok = Advance(*grammar_, path_[static_cast<size_t>(-from - 2)], byte, scratch_, &out);
    return ok && !out.empty() ? -static_cast<int32_t>(depth) - 2 : kDead;
  }
  const auto f = static_cast<size_t>(from);
  if (f < kDenseStates) {
    if (class_count_[f] == 0) Classify(f);
    if (class_count_[f] != kPerByte) {
      const int32_t known = dense_[f * 256 + byte];  // Classify may have set it (kDead)
      return known != kUnknown ? known : Resolve(f, class_of_[f * 256 + byte], depth);
    }
  }
  int32_t* slot = f < kDenseStates
                      ? &dense_[f * 256 + byte]
                      : &sparse_.try_emplace((uint64_t{f} << 8) | byte, kUnknown).first->second;
  if (*slot != kUnknown) return *slot;
  const int32_t to = Step(states_[f], byte, depth);
  if (to >= kDead) *slot = to;
  return to;
}

bool MaskAutomaton::Loops(int32_t h, const ByteSet& bytes, uint32_t depth) {
  if (h < 0 || static_cast<size_t>(h) >= kDenseStates) return false;
  const auto s = static_cast<size_t>(h);
  if (class_count_[s] == 0) Classify(s);
  if (class_count_[s] == kPerByte) return false;
  if (Intersects(bytes, exit_bytes_[s])) return false;
  if (SubsetOf(bytes, loop_bytes_[s])) return true;
  for (size_t c = 0; c < class_count_[s]; ++c) {  // resolve the classes not known yet
    if (!Intersects(bytes, classes_[class_first_[s] + c].bytes)) continue;
    if (Resolve(s, c, depth) != h) return false;
  }
  return true;
}

}  // namespace pagoda::grammar::internal
