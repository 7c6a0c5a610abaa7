#include "kvcache/block_hash.h"

namespace pagoda {
namespace {

// splitmix64 finalizer: a bijective 64-bit mixer with full avalanche.
uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// One independent 64-bit lane: absorbs the parent lanes, the length and every token.
uint64_t HashLane(const BlockHash& parent, std::span<const int32_t> tokens, uint64_t seed,
                  uint64_t multiplier) {
  uint64_t h = Mix64(seed ^ parent.hi);
  h = Mix64(h + parent.lo * multiplier);
  h = Mix64(h ^ (static_cast<uint64_t>(tokens.size()) * multiplier));
  for (int32_t token : tokens) {
    h = Mix64((h ^ static_cast<uint32_t>(token)) * multiplier + seed);
  }
  return h;
}

}  // namespace

BlockHash HashBlockTokens(const BlockHash& parent_hash, std::span<const int32_t> token_ids) {
  return BlockHash{HashLane(parent_hash, token_ids, 0x243f6a8885a308d3ull, 0x9e3779b97f4a7c15ull),
                   HashLane(parent_hash, token_ids, 0x13198a2e03707344ull, 0xc2b2ae3d27d4eb4full)};
}

}  // namespace pagoda
