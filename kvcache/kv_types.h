// Small shared vocabulary of the KV cache: the element dtype (its size and name), slots, the
// skip sentinel and block copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace pagoda {

// Element type of the KV pool. kFp8E4m3 is OCP float8_e4m3fn (finite, max 448; conversions and
// the scale convention: common/numerics.h).
enum class KvDtype { kF32, kBf16, kF16, kFp8E4m3 };

// Bytes of one element of `dtype` (4, 2, 2, 1).
constexpr size_t KvDtypeSize(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return 4;
    case KvDtype::kBf16:
    case KvDtype::kF16:
      return 2;
    case KvDtype::kFp8E4m3:
      return 1;
  }
  return 0;
}

// "f32", "bf16", "f16", "fp8_e4m3" (kvcache/kv_cache_config.h ParseKvDtype reads them back).
constexpr const char* KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kBf16:
      return "bf16";
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kFp8E4m3:
      return "fp8_e4m3";
  }
  return "unknown";
}

// Slot value meaning "no slot, skip this write" (docs/seed-kernels.md 0.3). Any slot < 0 or
// >= num_blocks * block_size is skipped by the kernels.
inline constexpr int32_t kPadSlot = -1;

// A copy-on-write the backend must perform on the pool (all layers, K and V) before the step.
struct BlockCopy {
  int32_t src_block = -1;
  int32_t dst_block = -1;
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

// slot = block_table[position / block_size] * block_size + position % block_size.
inline int32_t SlotForPosition(std::span<const int32_t> block_table, int32_t block_size,
                               int32_t position) {
  return block_table[position / block_size] * block_size + position % block_size;
}

}  // namespace pagoda
