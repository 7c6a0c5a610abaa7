// Test-only access to KvCacheManager's internals: the block pool (ref counts, cached blocks),
// the queued copy-on-write copies, and dropping the prefix cache.
#pragma once

#include <span>

#include "kvcache/kv_cache_manager.h"

namespace pagoda {

struct KvCacheManagerTestPeer {
  static const BlockPool& block_pool(const KvCacheManager& m) { return m.pool_; }
  static std::span<const BlockCopy> pending_block_copies(const KvCacheManager& m) {
    return m.pending_copies_;
  }
  // Drops all cached content of unreferenced blocks (they become free). Returns the count.
  static int32_t ResetPrefixCache(KvCacheManager& m) { return m.pool_.DropEvictable(); }
};

}  // namespace pagoda
