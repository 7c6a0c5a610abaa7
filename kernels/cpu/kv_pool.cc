#include "kernels/cpu/kv_pool.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace pagoda {
namespace {

constexpr size_t kAlignment = 64;

}  // namespace

void KvPool::AlignedFree::operator()(std::byte* p) const { std::free(p); }

Result<KvPool> KvPool::Create(const KvCacheConfig& config) {
  PAGODA_ASSIGN_OR_RETURN(int32_t num_blocks, ResolveNumBlocks(config));
  KvCacheConfig resolved = config;
  resolved.num_blocks = num_blocks;
  resolved.memory_bytes = 0;
  int64_t layer_bytes = 0;
  if (__builtin_mul_overflow(KvBytesPerBlockPerLayer(resolved), int64_t{2} * num_blocks,
                             &layer_bytes)) {
    return ResourceExhausted("kv pool: layer size overflows");
  }
  const size_t rounded =
      (static_cast<size_t>(layer_bytes) + kAlignment - 1) / kAlignment * kAlignment;
  std::vector<Buffer> layers;
  layers.reserve(resolved.n_layers);
  for (int32_t layer = 0; layer < resolved.n_layers; ++layer) {
    auto* data = static_cast<std::byte*>(std::aligned_alloc(kAlignment, rounded));
    if (data == nullptr) {
      return ResourceExhausted("kv pool: cannot allocate " + std::to_string(rounded) +
                               " bytes for layer " + std::to_string(layer));
    }
    std::memset(data, 0, rounded);
    layers.emplace_back(data);
  }
  return KvPool(resolved, std::move(layers));
}

KvPool::KvPool(const KvCacheConfig& config, std::vector<Buffer> layers)
    : config_(config),
      layers_(std::move(layers)),
      k_scales_(config.n_layers, 1.0f),
      v_scales_(config.n_layers, 1.0f) {
  strides_.token = config.head_dim;
  strides_.head = strides_.token * config.block_size;
  strides_.block = strides_.head * config.n_kv_heads;
  strides_.kv = strides_.block * config.num_blocks;
}

std::byte* KvPool::BlockData(int32_t layer, KvPart part, int32_t block_id) {
  const int64_t element = static_cast<int64_t>(part) * strides_.kv + block_id * strides_.block;
  return layers_[layer].get() + element * static_cast<int64_t>(element_size());
}

const std::byte* KvPool::BlockData(int32_t layer, KvPart part, int32_t block_id) const {
  return const_cast<KvPool*>(this)->BlockData(layer, part, block_id);
}

Status KvPool::SetScales(int32_t layer, float k_scale, float v_scale) {
  if (layer < 0 || layer >= num_layers()) {
    return InvalidArgument("kv pool: layer " + std::to_string(layer) + " out of range [0, " +
                           std::to_string(num_layers()) + ")");
  }
  for (float scale : {k_scale, v_scale}) {
    if (!std::isfinite(scale) || scale <= 0.0f) {
      return InvalidArgument("kv pool: k_scale/v_scale must be finite and > 0, got " +
                             std::to_string(scale));
    }
  }
  k_scales_[layer] = k_scale;
  v_scales_[layer] = v_scale;
  return Status::Ok();
}

Status KvPool::CopyBlock(int32_t src_block, int32_t dst_block) {
  for (int32_t block_id : {src_block, dst_block}) {
    if (block_id < 0 || block_id >= num_blocks()) {
      return OutOfRange("kv pool: block " + std::to_string(block_id) + " out of range [0, " +
                        std::to_string(num_blocks()) + ")");
    }
  }
  if (src_block == dst_block) return Status::Ok();
  const size_t bytes = static_cast<size_t>(block_bytes());
  for (int32_t layer = 0; layer < num_layers(); ++layer) {
    for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
      std::memcpy(BlockData(layer, part, dst_block), BlockData(layer, part, src_block), bytes);
    }
  }
  return Status::Ok();
}

Status KvPool::CopyBlocks(std::span<const BlockCopy> copies) {
  for (const BlockCopy& copy : copies) {
    PAGODA_RETURN_IF_ERROR(CopyBlock(copy.src_block, copy.dst_block));
  }
  return Status::Ok();
}

}  // namespace pagoda
