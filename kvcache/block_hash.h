// Content keys for prefix caching: a 128-bit hash of a full block, chained from its parent.
//
// HashBlockTokens(parent_hash, tokens) mixes the parent block's hash with the block's token ids,
// so equal hashes mean "same token ids for the whole prefix up to and including this block"
// (up to a 2^-128 collision chance). The prefix cache additionally stores and verifies token
// ids and parent identity, so a collision can cost a cache miss but never wrong content.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace pagoda {

struct BlockHash {
  uint64_t hi = 0;
  uint64_t lo = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

// Parent hash of the first block of every sequence.
inline constexpr BlockHash kRootBlockHash{0x9e3779b97f4a7c15ull, 0xd1b54a32d192ed03ull};

BlockHash HashBlockTokens(const BlockHash& parent_hash, std::span<const int32_t> token_ids);

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo ^ (h.hi >> 7)); }
};

}  // namespace pagoda
