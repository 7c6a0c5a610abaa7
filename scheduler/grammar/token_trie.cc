// TokenTrie (token_mask.h): the vocabulary's byte strings as a preorder trie.
#include <algorithm>
#include <map>

#include "scheduler/grammar/grammar_internal.h"
#include "scheduler/grammar/token_mask.h"

namespace pagoda::grammar {
namespace {

// Subtrees at least this large get the set of bytes below them (the walk's shortcut).
constexpr uint32_t kMinSubtreeForSet = 8;

std::vector<int32_t> TextTokensSorted(std::span<const std::string> token_bytes,
                                      const std::vector<bool>& is_end) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    if (!token_bytes[id].empty() && !is_end[id]) order.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes[static_cast<size_t>(a)] < token_bytes[static_cast<size_t>(b)];
  });
  return order;
}

}  // namespace

TokenTrie::TokenTrie(std::span<const std::string> token_bytes, std::span<const int32_t> end_ids)
    : vocab_size_(static_cast<int32_t>(token_bytes.size())) {
  std::vector<bool> is_end(token_bytes.size(), false);
  for (int32_t id : end_ids) {
    if (id < 0 || id >= vocab_size_ || is_end[static_cast<size_t>(id)]) continue;
    is_end[static_cast<size_t>(id)] = true;
    end_ids_.push_back(id);
  }
  nodes_.push_back({0, 0, 0, 0, kNoSet});
  std::vector<uint32_t> parent{0};
  std::vector<uint32_t> path{0};  // path[d] = the node at depth d of the current token
  std::string_view prev;
  for (int32_t id : TextTokensSorted(token_bytes, is_end)) {
    const std::string_view bytes = token_bytes[static_cast<size_t>(id)];
    const size_t lcp = static_cast<size_t>(
        std::mismatch(prev.begin(), prev.end(), bytes.begin(), bytes.end()).first - prev.begin());
    while (path.size() - 1 > lcp) {
      nodes_[path.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < bytes.size(); ++d) {
      parent.push_back(path.back());
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back({0, static_cast<uint32_t>(tokens_.size()), static_cast<uint32_t>(d + 1),
                        static_cast<uint8_t>(bytes[d]), kNoSet});
    }
    tokens_.push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<uint32_t>(bytes.size()));
    prev = bytes;
  }
  for (uint32_t n : path) nodes_[n].subtree_end = static_cast<uint32_t>(nodes_.size());
  SetBelowSets(parent);
  nodes_.push_back({0, static_cast<uint32_t>(tokens_.size()), 0, 0, kNoSet});  // sentinel
}

void TokenTrie::SetBelowSets(const std::vector<uint32_t>& parent) {
  std::vector<internal::ByteSet> below(nodes_.size(), internal::ByteSet{});
  for (size_t j = nodes_.size() - 1; j > 0; --j) {
    internal::ByteSet& up = below[parent[j]];
    for (size_t w = 0; w < 4; ++w) up[w] |= below[j][w];
    internal::Insert(up, static_cast<uint8_t>(nodes_[j].byte));
  }
  std::map<internal::ByteSet, uint32_t> index;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].subtree_end - i < kMinSubtreeForSet) continue;
    auto [it, fresh] = index.try_emplace(below[i], static_cast<uint32_t>(below_sets_.size()));
    if (fresh) below_sets_.push_back(below[i]);
    nodes_[i].below_set = it->second;
  }
}

}  // namespace pagoda::grammar
