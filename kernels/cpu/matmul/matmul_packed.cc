// PackRows: the packed-row layout of the blocks-of-32 formats (matmul_kernels.h "Packed rows"),
// written once at load. Plain byte moves; the kernels that read it are in matmul_quant_x86.inc.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstring>

#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/matmul/matmul_kernels.h"

namespace pagoda::cpu::mm {
namespace {

// Where a block's fields are (model/quants.h): the scale at 0, then the min, the 5th bits and
// the 16 nibble bytes; -1: the format has no such field.
struct Block32Fields {
  int64_t bytes = 0;
  int m = -1, qh = -1, qs = -1;
};

Block32Fields FieldsOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kIQ4_NL:
      return {18, -1, -1, 2};
    case GgmlType::kQ4_1:
      return {20, 2, -1, 4};
    case GgmlType::kQ5_0:
      return {22, -1, 2, 6};
    case GgmlType::kQ5_1:
      return {24, 2, 4, 8};
    default:
      return {};
  }
}

internal::PackedGroupLayout GroupOf(const Block32Fields& f) {
  return internal::PackedGroup(f.bytes, f.m >= 0);
}

// Block L of a group (`layout`) from its GGML block at blk into the group at g.
void PackBlock(const Block32Fields& f, const internal::PackedGroupLayout& layout,
               const uint8_t* blk, int L, uint8_t* g) {
  std::memcpy(g + 2 * L, blk, 2);
  if (f.m >= 0) std::memcpy(g + layout.m + 2 * L, blk + f.m, 2);
  if (f.qh >= 0) {
    uint32_t qh;
    std::memcpy(&qh, blk + f.qh, 4);
    for (int v = 0; v < 8; ++v) {
      uint64_t word;
      std::memcpy(&word, g + layout.qh + 8 * v, 8);
      word |= static_cast<uint64_t>((qh >> (4 * v)) & 0xf) << (4 * L);
      std::memcpy(g + layout.qh + 8 * v, &word, 8);
    }
  }
  for (int u = 0; u < 4; ++u) std::memcpy(g + layout.qs + 64 * u + 4 * L, blk + f.qs + 4 * u, 4);
}

}  // namespace

bool CanPackRows(GgmlType type) { return FieldsOf(type).bytes > 0; }

int64_t PackedRowBytes(GgmlType type, int64_t cols) {
  return (cols + 511) / 512 * GroupOf(FieldsOf(type)).bytes;
}

void PackRows(const WeightView& w, uint8_t* dst) {
  const Block32Fields f = FieldsOf(w.type);
  const internal::PackedGroupLayout layout = GroupOf(f);
  const int64_t nb = w.cols / 32, packed_row = PackedRowBytes(w.type, w.cols);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, w.rows), [&](const auto& range) {
    for (int64_t r = range.begin(); r < range.end(); ++r) {
      uint8_t* out = dst + r * packed_row;
      std::memset(out, 0, static_cast<size_t>(packed_row));
      for (int64_t b = 0; b < nb; ++b) {
        PackBlock(f, layout, w.row(r) + b * f.bytes, static_cast<int>(b % 16),
                  out + b / 16 * layout.bytes);
      }
    }
  });
}

}  // namespace pagoda::cpu::mm
