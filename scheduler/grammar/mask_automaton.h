// Internal to pagoda_grammar: the automaton the token-mask walk steps through, built lazily
// over the stack sets it meets during one walk (token_mask.cc).
//
// A handle names a state within one walk: >= 0 an interned stack set, kDead, or, once the interned
// sets hold max_pool_entries positions, a transient one at trie depth d (encoded -(d + 2), kept in
// a per-depth buffer and never memoized). The first kDenseStates states get a 256-entry transition
// row; bytes that the same stack tops accept form one class and share one Advance (about ten
// classes inside a JSON string). Loops() tells whether a set of bytes leads from a state back to
// itself, which lets the walk take a whole trie subtree at once.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "scheduler/grammar/grammar_internal.h"

namespace pagoda::grammar::internal {

class MaskAutomaton {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = INT32_MIN;
  static constexpr size_t kDenseStates = 1024;

  explicit MaskAutomaton(size_t max_pool_entries) : max_pool_entries_(max_pool_entries) {}

  // Prepares a walk from `start`; returns its handle (kDead if it has no stacks). The states
  // and transitions met so far are kept while the grammar stays the same (up to half of
  // kDenseStates), so later walks mostly find their transitions made.
  int32_t Reset(std::shared_ptr<const Grammar> grammar, const StackSet& start, uint32_t max_depth);

  // The handle after `byte` from `from`, for a trie node at `depth`.
  int32_t Next(int32_t from, uint8_t byte, uint32_t depth) {
    if (static_cast<uint32_t>(from) < kDenseStates) {
      const int32_t to = dense_[static_cast<size_t>(from) * 256 + byte];
      if (to != kUnknown) return to;
    }
    return NextSlow(from, byte, depth);
  }

  // Every byte of `bytes` leads from `h` back to `h`.
  bool Loops(int32_t h, const ByteSet& bytes, uint32_t depth);

  size_t num_states() const { return num_states_; }

 private:
  static constexpr uint16_t kPerByte = 0xFFFF;  // class_count_: too many distinct tops
  struct ByteClass {
    ByteSet bytes;
    int32_t to;   // kUnknown until resolved
    uint8_t rep;  // one of its bytes
  };

  int32_t NextSlow(int32_t from, uint8_t byte, uint32_t depth);
  int32_t Intern(uint32_t depth);  // tmp_ as a handle
  void Classify(size_t state);
  int32_t Resolve(size_t state, size_t cls, uint32_t depth);
  int32_t Step(const StackSet& from, uint8_t byte, uint32_t depth);

  size_t max_pool_entries_;  // positions over all interned states (memory bound)
  std::shared_ptr<const Grammar> grammar_;
  std::vector<StackSet> states_;
  size_t num_states_ = 0;
  size_t pool_entries_ = 0;
  std::unordered_map<uint64_t, int32_t> index_;   // hash -> newest state with it
  std::vector<int32_t> same_hash_;                // state -> older state with its hash, or -1
  std::unordered_map<uint64_t, int32_t> sparse_;  // (state << 8 | byte) -> handle
  // Per dense state:
  std::vector<int32_t> dense_;         // 256 transitions
  std::vector<uint8_t> class_of_;      // 256 byte classes
  std::vector<uint32_t> class_first_;  // its classes in classes_
  std::vector<uint16_t> class_count_;  // 0 = not classified yet
  std::vector<ByteSet> loop_bytes_;    // bytes known to lead back to the state
  std::vector<ByteSet> exit_bytes_;    // bytes known to lead elsewhere
  std::vector<ByteClass> classes_;
  std::vector<StackSet> path_;  // transient states by depth
  StackSet tmp_;
  StepScratch scratch_;
};

}  // namespace pagoda::grammar::internal
