// KvPool: owns the KV data buffers, one 64-byte aligned buffer per layer laid out as
//   [2][num_blocks][n_kv_heads][block_size][head_dim]   (K = [0], V = [1], docs/seed-kernels.md 0.1)
// so one block of one layer's K (or V) is a contiguous byte range. Offers raw and typed block
// pointers, element strides, per-layer fp8 scales (k_scale / v_scale, default 1.0, multiplier
// on the way into fp8; see common/numerics.h) and whole-block copies for copy-on-write.
// Element types: kF32 -> float, kBf16/kF16 -> uint16_t bits, kFp8E4m3 -> uint8_t bits.
// Not thread-safe for mutation; kernels may read/write disjoint slots concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "common/status.h"
#include "kvcache/kv_cache_config.h"
#include "kvcache/kv_types.h"

namespace pagoda {

// Strides in elements within one layer's buffer.
struct KvPoolStrides {
  int64_t kv;     // K -> V: num_blocks * block
  int64_t block;  // n_kv_heads * block_size * head_dim
  int64_t head;   // block_size * head_dim
  int64_t token;  // head_dim
};

enum class KvPart { kKey = 0, kValue = 1 };

class KvPool {
 public:
  // Validates `config`, sizes it (ResolveNumBlocks) and allocates zeroed buffers.
  // ResourceExhausted if the memory cannot be allocated.
  static Result<KvPool> Create(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }  // num_blocks resolved
  int32_t num_blocks() const { return static_cast<int32_t>(config_.num_blocks); }
  int32_t num_layers() const { return config_.n_layers; }
  KvDtype dtype() const { return config_.dtype; }
  size_t element_size() const { return KvDtypeSize(config_.dtype); }
  const KvPoolStrides& strides() const { return strides_; }
  // Bytes of one block of one layer's K (or V).
  int64_t block_bytes() const { return strides_.block * static_cast<int64_t>(element_size()); }
  int64_t layer_bytes() const { return 2 * strides_.kv * static_cast<int64_t>(element_size()); }

  // Start of a layer's [2][num_blocks][n_kv_heads][block_size][head_dim] buffer.
  std::byte* layer_data(int32_t layer) { return layers_[layer].get(); }
  const std::byte* layer_data(int32_t layer) const { return layers_[layer].get(); }
  // Start of block `block_id` of K or V in `layer` ([n_kv_heads][block_size][head_dim]).
  std::byte* BlockData(int32_t layer, KvPart part, int32_t block_id);
  const std::byte* BlockData(int32_t layer, KvPart part, int32_t block_id) const;
  // Typed view of the same; T must have the dtype's element size (else std::logic_error).
  template <typename T>
  T* Block(int32_t layer, KvPart part, int32_t block_id) {
    CheckElementType(sizeof(T));
    return reinterpret_cast<T*>(BlockData(layer, part, block_id));
  }
  template <typename T>
  const T* Block(int32_t layer, KvPart part, int32_t block_id) const {
    CheckElementType(sizeof(T));
    return reinterpret_cast<const T*>(BlockData(layer, part, block_id));
  }

  float k_scale(int32_t layer) const { return k_scales_[layer]; }
  float v_scale(int32_t layer) const { return v_scales_[layer]; }
  // InvalidArgument unless the layer exists and both scales are finite and > 0.
  Status SetScales(int32_t layer, float k_scale, float v_scale);

  // Copies block src to dst in every layer, K and V. OutOfRange for a bad block id.
  Status CopyBlock(int32_t src_block, int32_t dst_block);
  Status CopyBlocks(std::span<const BlockCopy> copies);

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };
  using Buffer = std::unique_ptr<std::byte[], AlignedFree>;

  KvPool(const KvCacheConfig& config, std::vector<Buffer> layers);
  void CheckElementType(size_t size) const {
    if (size != element_size()) throw std::logic_error("KvPool::Block: element type mismatch");
  }

  KvCacheConfig config_;
  KvPoolStrides strides_;
  std::vector<Buffer> layers_;
  std::vector<float> k_scales_;
  std::vector<float> v_scales_;
};

}  // namespace pagoda
