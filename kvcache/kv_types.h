// Small shared vocabulary of the KV cache: slots, the skip sentinel and block copies.
#pragma once

#include <cstdint>
#include <span>

namespace pagoda {

// Slot value meaning "no slot, skip this write" (seed-kernels.md 0.3). Any slot < 0 or
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
