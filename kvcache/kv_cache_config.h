// KV cache configuration: block geometry, element dtype and pool sizing.
//
// Offers KvCacheConfig (plain data), its validation (errors name the offending field),
// ParseKvDtype (the dtype itself is in kv_types.h), and the pool sizing rule: the number of
// blocks is either given (num_blocks) or derived from a memory budget (memory_bytes /
// KvBytesPerBlock()).
// Pool layout per layer: [2][num_blocks][n_kv_heads][block_size][head_dim], K = [0], V = [1].
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "kvcache/kv_types.h"

namespace pagoda {

// Parses KvDtypeName's names (kv_types.h; case-insensitive); "fp8" is accepted for "fp8_e4m3".
Result<KvDtype> ParseKvDtype(std::string_view name);

struct KvCacheConfig {
  int32_t block_size = 16;   // tokens per block; a power of two in [1, 256]
  int64_t num_blocks = 0;    // set exactly one of num_blocks / memory_bytes
  int64_t memory_bytes = 0;  // pool budget for all layers, K and V
  KvDtype dtype = KvDtype::kBf16;
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  bool enable_prefix_caching = true;
};

// OK if every field is usable; otherwise InvalidArgument naming the field and what was expected.
Status ValidateKvCacheConfig(const KvCacheConfig& config);
// Bytes of one block across all layers, K and V. Precondition: geometry fields are positive.
int64_t KvBytesPerBlock(const KvCacheConfig& config);
// Bytes of one block of one layer for K or V alone: n_kv_heads * block_size * head_dim * elem.
int64_t KvBytesPerBlockPerLayer(const KvCacheConfig& config);
// Validates `config` and returns the number of blocks: num_blocks, or memory_bytes divided by
// KvBytesPerBlock() (InvalidArgument if that leaves no block).
Result<int32_t> ResolveNumBlocks(const KvCacheConfig& config);

}  // namespace pagoda
