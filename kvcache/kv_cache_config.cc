#include "kvcache/kv_cache_config.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

namespace pagoda {
namespace {

constexpr int64_t kMaxSlots = std::numeric_limits<int32_t>::max();  // slots are int32

Status CheckPositive(const char* field, int64_t value, int64_t max_value) {
  if (value <= 0 || value > max_value) {
    return InvalidArgument("kv cache config: " + std::string(field) + " must be in [1, " +
                           std::to_string(max_value) + "], got " + std::to_string(value));
  }
  return Status::Ok();
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  }
  return true;
}

}  // namespace

Result<KvDtype> ParseKvDtype(std::string_view name) {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kBf16, KvDtype::kF16, KvDtype::kFp8E4m3}) {
    if (EqualsIgnoreCase(name, KvDtypeName(d))) return d;
  }
  if (EqualsIgnoreCase(name, "fp8")) return KvDtype::kFp8E4m3;
  return InvalidArgument("kv cache config: dtype must be one of f32, bf16, f16, fp8_e4m3; got '" +
                         std::string(name) + "'");
}

Result<std::optional<KvDtype>> ParseKvDtypeOption(std::string_view name) {
  if (EqualsIgnoreCase(name, "auto")) return std::optional<KvDtype>();
  PAGODA_ASSIGN_OR_RETURN(KvDtype dtype, ParseKvDtype(name));
  return std::optional<KvDtype>(dtype);
}

int64_t KvBytesPerBlockPerLayer(const KvCacheConfig& config) {
  return static_cast<int64_t>(config.n_kv_heads) * config.block_size * config.head_dim *
         static_cast<int64_t>(KvDtypeSize(config.dtype));
}

int64_t KvBytesPerBlock(const KvCacheConfig& config) {
  return 2 * static_cast<int64_t>(config.n_layers) * KvBytesPerBlockPerLayer(config);
}

Status ValidateKvCacheConfig(const KvCacheConfig& config) {
  PAGODA_RETURN_IF_ERROR(
      CheckRange("kv cache config: block_size", config.block_size, kKvBlockSizeRange));
  if (KvDtypeSize(config.dtype) == 0) {
    return InvalidArgument("kv cache config: dtype has unknown value " +
                           std::to_string(static_cast<int>(config.dtype)));
  }
  PAGODA_RETURN_IF_ERROR(CheckPositive("n_layers", config.n_layers, 4096));
  PAGODA_RETURN_IF_ERROR(CheckPositive("n_kv_heads", config.n_kv_heads, 4096));
  PAGODA_RETURN_IF_ERROR(CheckPositive("head_dim", config.head_dim, 16384));
  const bool has_blocks = config.num_blocks != 0;
  const bool has_memory = config.memory_bytes != 0;
  if (has_blocks == has_memory) {
    return InvalidArgument(
        "kv cache config: set exactly one of num_blocks or memory_bytes (got num_blocks=" +
        std::to_string(config.num_blocks) +
        ", memory_bytes=" + std::to_string(config.memory_bytes) + ")");
  }
  if (has_blocks) {
    PAGODA_RETURN_IF_ERROR(
        CheckPositive("num_blocks", config.num_blocks, kMaxSlots / config.block_size));
  } else if (config.memory_bytes < 0) {
    return InvalidArgument("kv cache config: memory_bytes must be positive, got " +
                           std::to_string(config.memory_bytes));
  }
  return Status::Ok();
}

Result<int32_t> ResolveNumBlocks(const KvCacheConfig& config) {
  PAGODA_RETURN_IF_ERROR(ValidateKvCacheConfig(config));
  if (config.num_blocks != 0) return static_cast<int32_t>(config.num_blocks);
  const int64_t per_block = KvBytesPerBlock(config);
  int64_t num_blocks = config.memory_bytes / per_block;
  if (num_blocks < 1) {
    return InvalidArgument("kv cache config: memory_bytes " + std::to_string(config.memory_bytes) +
                           " is smaller than one block (" + std::to_string(per_block) +
                           " bytes for all layers, K and V)");
  }
  const int64_t max_blocks = kMaxSlots / config.block_size;
  if (num_blocks > max_blocks) num_blocks = max_blocks;  // slots must fit in int32
  return static_cast<int32_t>(num_blocks);
}

Status ValidateKvCacheOptions(const KvCacheOptions& o) {
  PAGODA_RETURN_IF_ERROR(CheckRange("kv_cache.block_size", o.block_size, kKvBlockSizeRange));
  PAGODA_RETURN_IF_ERROR(CheckRange("kv_cache.memory_bytes", o.memory_bytes, kKvMemoryBytesRange));
  return CheckRange("kv_cache.num_blocks", o.num_blocks, kKvNumBlocksRange);
}

Result<KvCacheConfig> ResolveKvCacheConfig(const KvCacheOptions& o, const KvCacheShape& shape) {
  PAGODA_RETURN_IF_ERROR(ValidateKvCacheOptions(o));
  KvCacheConfig kv;
  kv.block_size = o.block_size;
  kv.n_layers = shape.n_layers;
  kv.n_kv_heads = shape.n_kv_heads;
  kv.head_dim = shape.head_dim;
  kv.dtype = o.dtype.value_or(shape.auto_dtype);
  if (o.num_blocks > 0) {
    kv.num_blocks = o.num_blocks;
  } else {
    // Enough for every sequence slot to reach the full context, within the memory budget.
    const int64_t blocks_per_seq = (shape.max_model_len + o.block_size - 1) / o.block_size;
    const int64_t need = blocks_per_seq * shape.max_num_seqs + 1;
    const int64_t fit = o.memory_bytes / KvBytesPerBlock(kv);
    if (fit < 1) {
      return InvalidArgument("kv_cache.memory_bytes: " + std::to_string(o.memory_bytes) +
                             " bytes hold no KV block of this model (one block takes " +
                             std::to_string(KvBytesPerBlock(kv)) +
                             " bytes for all layers, K and V)");
    }
    kv.num_blocks = std::min(need, fit);
  }
  return kv;
}

}  // namespace pagoda
