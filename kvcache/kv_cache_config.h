// KV cache configuration: the user's options, block geometry, element dtype and pool sizing.
//
// Offers KvCacheOptions (the `kv_cache:` config section: defaults and ranges declared here once,
// ValidateKvCacheOptions), KvCacheConfig (the resolved pool geometry a backend allocates, with
// its validation; errors name the offending field), ParseKvDtype (the dtype itself is in
// kv_types.h), and the sizing rule (ResolveKvCacheConfig): the number of blocks is either given
// (num_blocks) or derived from a memory budget (memory_bytes / KvBytesPerBlock()), capped at
// what every sequence slot needs.
// Pool layout per layer: [2][num_blocks][n_kv_heads][block_size][head_dim], K = [0], V = [1].
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "common/field_check.h"
#include "common/status.h"
#include "kvcache/kv_types.h"

namespace pagoda {

// Parses KvDtypeName's names (kv_types.h; case-insensitive); "fp8" is accepted for "fp8_e4m3".
Result<KvDtype> ParseKvDtype(std::string_view name);
// "auto" (nullopt) or a name ParseKvDtype takes: the value of KvCacheOptions::dtype.
Result<std::optional<KvDtype>> ParseKvDtypeOption(std::string_view name);

inline constexpr std::pair<std::string_view, KvDtype> kKvDtypeNames[] = {
    {"f32", KvDtype::kF32},
    {"bf16", KvDtype::kBf16},
    {"f16", KvDtype::kF16},
    {"fp8_e4m3", KvDtype::kFp8E4m3}};

inline constexpr int32_t kDefaultKvBlockSize = 16;
inline constexpr IntRange kKvBlockSizeRange{1, 256, /*power_of_two=*/true};
inline constexpr IntRange kKvMemoryBytesRange{1, kInt64Max};
// The block manager keeps per-block state: 2^24 blocks (2^28 tokens at block size 16) is far
// beyond any pool, and a larger count is refused where it is written (file:line).
inline constexpr IntRange kKvNumBlocksRange{0, 1 << 24};

// The `kv_cache:` config section (kv_cache.enable_prefix_caching belongs to the engine:
// EngineConfig, scheduler/engine.h).
struct KvCacheOptions {
  int32_t block_size = kDefaultKvBlockSize;  // tokens per block
  std::optional<KvDtype> dtype;              // nullopt = auto: f32 for an F32 model, else f16
  int64_t memory_bytes = 1ll << 30;          // pool budget when num_blocks is 0
  int64_t num_blocks = 0;                    // > 0: exactly this many blocks
  bool operator==(const KvCacheOptions&) const = default;
};
// The ranges above; errors name the `kv_cache.` key.
Status ValidateKvCacheOptions(const KvCacheOptions& options);

struct KvCacheConfig {
  int32_t block_size = kDefaultKvBlockSize;  // tokens per block; kKvBlockSizeRange
  int64_t num_blocks = 0;                    // set exactly one of num_blocks / memory_bytes
  int64_t memory_bytes = 0;                  // pool budget for all layers, K and V
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

// What a pool is sized for: the model's KV geometry and the engine's limits.
struct KvCacheShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  KvDtype auto_dtype = KvDtype::kF16;  // the dtype `auto` means for this model
  int64_t max_model_len = 0;           // tokens one sequence may reach
  int32_t max_num_seqs = 0;            // sequences that may hold blocks at once
};

// The pool config for `options`: num_blocks if set, else enough blocks for every sequence slot
// to reach max_model_len, within memory_bytes. Errors name the `kv_cache.` key.
Result<KvCacheConfig> ResolveKvCacheConfig(const KvCacheOptions& options,
                                           const KvCacheShape& shape);

}  // namespace pagoda
