// PackRows: the packed-row layout of the blocks-of-32 formats and of the K-quants
// (matmul_kernels.h "Packed rows"), written once at load. Plain byte moves and
// the unpacking of the K-quants' scales; the kernels that read it are in matmul_quant_x86.inc.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstring>

#include "kernels/cpu/matmul/matmul.h"
#include "kernels/cpu/matmul/matmul_kernels.h"
#include "model/quants.h"

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
      for (int k = 0; k < 4; ++k) {
        g[layout.qh + 4 * L + k] |= static_cast<uint8_t>(((qh >> (4 * v + k)) & 1) << v);
      }
    }
  }
  for (int u = 0; u < 4; ++u) std::memcpy(g + layout.qs + 64 * u + 4 * L, blk + f.qs + 4 * u, 4);
}

// The K-quants with sub-blocks of 32: their super-block bytes, whether they have mins and 5th
// bits; bytes 0: not such a type.
struct SuperFields {
  int64_t bytes = 0;
  bool has_min = false, fifth = false;
};

SuperFields SuperFieldsOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_K:
      return {quants::kBlockBytesQ4_K, true, false};
    case GgmlType::kQ5_K:
      return {quants::kBlockBytesQ5_K, true, true};
    case GgmlType::kIQ4_XS:
      return {quants::kBlockBytesIQ4_XS, false, false};
    default:
      return {};
  }
}

// One super-block's fields as the packed group holds them: the raw fp16 super-scales, each
// sub-block's scale and min byte, and its 32 codes in element order.
struct SuperBlock {
  uint8_t d[2], dmin[2];
  uint8_t sc[8], m[8];
  uint8_t q[8][32];
};

// Q4_K / Q5_K (model/quants.h): sub-block j is the low (j even) or high nibbles of 32-byte chunk
// j / 2 of the qs; Q5_K's 5th bit of element l of sub-block j is bit j of qh[l].
void DecodeQ45K(const uint8_t* b, bool fifth, SuperBlock* s) {
  std::memcpy(s->d, b, 2);
  std::memcpy(s->dmin, b + 2, 2);
  const uint8_t* qs = b + (fifth ? 48 : 16);
  for (int j = 0; j < 8; ++j) {
    quants::GetScaleMinK4(j, b + 4, &s->sc[j], &s->m[j]);
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = qs[32 * (j / 2) + l];
      s->q[j][l] = static_cast<uint8_t>(j % 2 == 0 ? byte & 15 : byte >> 4);
      if (fifth) s->q[j][l] |= static_cast<uint8_t>(((b[16 + l] >> j) & 1) << 4);
    }
  }
}

// IQ4_XS: scale of sub-block j from scales_l / scales_h, stored as the int8 scale - 32.
void DecodeIQ4XS(const uint8_t* b, SuperBlock* s) {
  std::memcpy(s->d, b, 2);
  const unsigned scales_h = b[2] | unsigned{b[3]} << 8;
  for (int j = 0; j < 8; ++j) {
    const unsigned ls = ((b[4 + j / 2] >> (4 * (j % 2))) & 15) | ((scales_h >> (2 * j)) & 3) << 4;
    s->sc[j] = static_cast<uint8_t>(static_cast<int>(ls) - 32);
    const uint8_t* qs = b + 8 + 16 * j;
    for (int l = 0; l < 16; ++l) {
      s->q[j][l] = qs[l] & 15;
      s->q[j][l + 16] = qs[l] >> 4;
    }
  }
}

// Super-block i (0, 1) of a packed group at g (zeroed before).
void PackSuper(const SuperFields& f, const internal::PackedGroupLayout& layout, const SuperBlock& s,
               int i, uint8_t* g) {
  std::memcpy(g + 2 * i, s.d, 2);
  if (f.has_min) std::memcpy(g + 4 + 2 * i, s.dmin, 2);
  for (int j = 0; j < 8; ++j) {
    const int L = 8 * i + j;
    g[layout.sc + L] = s.sc[j];
    if (f.has_min) g[layout.m + L] = s.m[j];
    for (int u = 0; u < 4; ++u) {
      for (int k = 0; k < 4; ++k) {
        g[layout.qs + 64 * u + 4 * L + k] =
            static_cast<uint8_t>((s.q[j][4 * u + k] & 15) | (s.q[j][16 + 4 * u + k] & 15) << 4);
      }
    }
    if (!f.fifth) continue;
    for (int v = 0; v < 8; ++v) {
      for (int k = 0; k < 4; ++k) {
        g[layout.qh + 4 * L + k] |= static_cast<uint8_t>((s.q[j][4 * v + k] >> 4) << v);
      }
    }
  }
}

// The K-quants with sub-blocks of 16: their super-block bytes, whether they have mins (Q2_K),
// low nibbles (Q6_K) and third bits (Q3_K); bytes 0: not such a type.
struct HalfFields {
  int64_t bytes = 0;
  bool has_min = false, nibbles = false, third = false;
};

HalfFields HalfFieldsOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K:
      return {quants::kBlockBytesQ2_K, true, false, false};
    case GgmlType::kQ3_K:
      return {quants::kBlockBytesQ3_K, false, false, true};
    case GgmlType::kQ6_K:
      return {quants::kBlockBytesQ6_K, false, true, false};
    default:
      return {};
  }
}

internal::PackedGroupLayout GroupOf(const HalfFields& f) {
  return internal::PackedGroupK16(f.has_min, f.nibbles, f.third);
}

// Their super-block's fp16 fields, each sub-block's scale byte (Q2_K: sc | m << 4 as in the file;
// Q3_K: its int8 scale - 32; Q6_K: its int8 scale) and the 256 codes in element order (Q2_K 0..3,
// Q3_K 0..7, Q6_K 0..63).
struct HalfSuperBlock {
  uint8_t d[2], dmin[2];
  uint8_t sc[16];
  uint8_t q[256];
};

// Element e = 128 h + 32 jj + l of Q2_K / Q3_K: its low 2 bits are (qs[32 h + l] >> 2 jj) & 3.
uint8_t TwoBits(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
}

void DecodeHalfSuper(GgmlType type, const uint8_t* b, HalfSuperBlock* s) {
  if (type == GgmlType::kQ2_K) {
    std::memcpy(s->sc, b, 16);
    std::memcpy(s->d, b + 80, 2);
    std::memcpy(s->dmin, b + 82, 2);
    for (int e = 0; e < 256; ++e) s->q[e] = TwoBits(b + 16, e);
  } else if (type == GgmlType::kQ3_K) {
    for (int i = 0; i < 16; ++i) s->sc[i] = static_cast<uint8_t>(quants::GetScaleQ3K(b + 96, i));
    std::memcpy(s->d, b + 108, 2);
    for (int e = 0; e < 256; ++e) {
      const int high = (b[e % 32] >> (4 * (e / 128) + e % 128 / 32)) & 1;
      s->q[e] = static_cast<uint8_t>(TwoBits(b + 32, e) | high << 2);
    }
  } else {  // Q6_K
    std::memcpy(s->sc, b + 192, 16);
    std::memcpy(s->d, b + 208, 2);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b + 64 * h;
      const uint8_t* qh = b + 128 + 32 * h;
      uint8_t* q = s->q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        q[l] = static_cast<uint8_t>((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4);
        q[l + 32] = static_cast<uint8_t>((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4);
        q[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
        q[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
      }
    }
  }
}

// Q3_K's code c (0..7) of element 4v + k of block L into the three planes at p (zeroed before;
// matmul_kernels.h PackedGroupK16).
void PackThreeBits(int v, int c, uint8_t* p) {
  static constexpr struct {
    int8_t plane, shift, high_shift;  // high_shift: where v = 6, 7 put the third bit in plane 2
  } kPlace[8] = {{0, 0, -1}, {0, 3, -1}, {1, 0, -1}, {1, 3, -1},
                 {2, 0, -1}, {2, 3, -1}, {0, 6, 6},  {1, 6, 7}};
  const auto& at = kPlace[v];
  if (at.high_shift < 0) {
    p[64 * at.plane] |= static_cast<uint8_t>(c << at.shift);
  } else {
    p[64 * at.plane] |= static_cast<uint8_t>((c & 3) << at.shift);
    p[128] |= static_cast<uint8_t>((c >> 2) << at.high_shift);
  }
}

// Super-block i (0, 1) of a packed group of sub-blocks of 16 at g (zeroed before): element
// 32 L + 4 v + k of the group (block L = 8 i + j, j = 0..7) is code c; its sub-block 2 L + v / 4.
void PackHalfSuper(const internal::PackedGroupLayout& layout, const HalfFields& f,
                   const HalfSuperBlock& s, int i, uint8_t* g) {
  std::memcpy(g + 2 * i, s.d, 2);
  if (f.has_min) std::memcpy(g + 4 + 2 * i, s.dmin, 2);
  for (int j = 0; j < 8; ++j) {
    const int L = 8 * i + j;
    for (int h = 0; h < 2; ++h) {
      g[layout.sc + (f.nibbles ? 16 * h + L : 2 * L + h)] = s.sc[2 * j + h];
    }
    for (int v = 0; v < 8; ++v) {
      for (int k = 0; k < 4; ++k) {
        const int c = s.q[32 * j + 4 * v + k];
        if (f.third) {
          PackThreeBits(v, c, g + layout.two + 4 * L + k);
          continue;
        }
        // Q6_K: the low nibble in qs, the 2 bits above it in the 2-bit plane; Q2_K: the code.
        const int two = f.nibbles ? c >> 4 : c & 3;
        g[layout.two + 64 * (v / 4) + 4 * L + k] |= static_cast<uint8_t>(two << (2 * (v % 4)));
        if (f.nibbles) {
          g[layout.qs + 64 * (v % 4) + 4 * L + k] |=
              static_cast<uint8_t>((c & 15) << (4 * (v / 4)));
        }
      }
    }
  }
}

// Calls pack_row(row, out) for every row of w in parallel, out: its packed row at dst, zeroed.
template <typename PackRow>
void ForEachPackedRow(const WeightView& w, uint8_t* dst, PackRow&& pack_row) {
  const int64_t packed_row = PackedRowBytes(w.type, w.cols);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, w.rows), [&](const auto& range) {
    for (int64_t r = range.begin(); r < range.end(); ++r) {
      uint8_t* out = dst + r * packed_row;
      std::memset(out, 0, static_cast<size_t>(packed_row));
      pack_row(w.row(r), out);
    }
  });
}

void PackHalfRows(const WeightView& w, const HalfFields& f, uint8_t* dst) {
  const internal::PackedGroupLayout layout = GroupOf(f);
  const int64_t nsb = w.cols / quants::kQK_K;
  ForEachPackedRow(w, dst, [&](const uint8_t* row, uint8_t* out) {
    HalfSuperBlock s;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      DecodeHalfSuper(w.type, row + sb * f.bytes, &s);
      PackHalfSuper(layout, f, s, static_cast<int>(sb % 2), out + sb / 2 * layout.bytes);
    }
  });
}

void PackSuperRows(const WeightView& w, const SuperFields& f, uint8_t* dst) {
  const internal::PackedGroupLayout layout = internal::PackedGroupK(f.has_min, f.fifth);
  const int64_t nsb = w.cols / quants::kQK_K;
  ForEachPackedRow(w, dst, [&](const uint8_t* row, uint8_t* out) {
    SuperBlock s;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* b = row + sb * f.bytes;
      if (w.type == GgmlType::kIQ4_XS) {
        DecodeIQ4XS(b, &s);
      } else {
        DecodeQ45K(b, f.fifth, &s);
      }
      PackSuper(f, layout, s, static_cast<int>(sb % 2), out + sb / 2 * layout.bytes);
    }
  });
}

void PackBlock32Rows(const WeightView& w, uint8_t* dst) {
  const Block32Fields f = FieldsOf(w.type);
  const internal::PackedGroupLayout layout = GroupOf(f);
  const int64_t nb = w.cols / 32;
  ForEachPackedRow(w, dst, [&](const uint8_t* row, uint8_t* out) {
    for (int64_t b = 0; b < nb; ++b) {
      PackBlock(f, layout, row + b * f.bytes, static_cast<int>(b % 16),
                out + b / 16 * layout.bytes);
    }
  });
}

// Q8_0 in groups of 16 rows (matmul_kernels.h kQ8GroupBlockBytes); rows past w.rows in the last
// group are zero (scale 0: they add exactly nothing).
void PackQ8Rows(const WeightView& w, uint8_t* dst) {
  constexpr int64_t kBlock = 34;
  const int64_t nb = w.cols / 32, groups = (w.rows + 15) / 16;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, groups), [&](const auto& range) {
    for (int64_t g = range.begin(); g < range.end(); ++g) {
      uint8_t* out = dst + g * nb * internal::kQ8GroupBlockBytes;
      std::memset(out, 0, static_cast<size_t>(nb * internal::kQ8GroupBlockBytes));
      for (int64_t r = 0; r < 16 && 16 * g + r < w.rows; ++r) {
        const uint8_t* row = w.row(16 * g + r);
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* blk = row + b * kBlock;
          uint8_t* o = out + b * internal::kQ8GroupBlockBytes;
          for (int i = 0; i < 32; ++i) o[64 * (i / 4) + 4 * r + i % 4] = blk[2 + i] ^ 0x80;
          std::memcpy(o + 512 + 2 * r, blk, 2);
        }
      }
    }
  });
}

// Float rows in groups of 16 rows, `step` columns of the 16 rows side by side (BF16: 2, a pair
// of columns per 32-bit lane; F16, F32: 1), as their kernels read them (matmul_kernels.h
// X86Bf16PackedKernel, X86F16PackedKernel, X86F32PackedKernel): element c of the group's row r
// at element 16 step (c / step) + step r + c % step, elements of `size` bytes. A missing last
// column and the rows past w.rows are zero.
void PackFloatGroups(const WeightView& w, int64_t step, int64_t size, uint8_t* dst) {
  const int64_t group = 16 * step * ((w.cols + step - 1) / step);  // elements
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, (w.rows + 15) / 16), [&](const auto& range) {
    for (int64_t g = range.begin(); g < range.end(); ++g) {
      uint8_t* out = dst + g * group * size;
      std::memset(out, 0, static_cast<size_t>(size * group));
      for (int64_t r = 0; r < 16 && 16 * g + r < w.rows; ++r) {
        const uint8_t* row = w.row(16 * g + r);
        for (int64_t c = 0; c < w.cols; ++c) {
          std::memcpy(out + size * (16 * step * (c / step) + step * r + c % step), row + size * c,
                      static_cast<size_t>(size));
        }
      }
    }
  });
}

}  // namespace

bool CanPackRows(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kBF16 || type == GgmlType::kF16 ||
         type == GgmlType::kF32 || FieldsOf(type).bytes > 0 || SuperFieldsOf(type).bytes > 0 ||
         HalfFieldsOf(type).bytes > 0;
}

bool ReadsPackedRows(GgmlType type, SimdLevel level) {
  return CanPackRows(type) && internal::X86PackedKernel(level, type).fn != nullptr;
}

int64_t PackedBytes(GgmlType type, int64_t rows, int64_t cols) {
  const bool groups = type == GgmlType::kQ8_0 || type == GgmlType::kBF16 ||
                      type == GgmlType::kF16 || type == GgmlType::kF32;
  const int64_t padded = groups ? (rows + 15) / 16 * 16 : rows;
  return padded * PackedRowBytes(type, cols);
}

int64_t PackedRowBytes(GgmlType type, int64_t cols) {
  if (type == GgmlType::kQ8_0) return cols / 32 * internal::kQ8GroupBlockBytes / 16;
  if (type == GgmlType::kBF16) return (cols + 1) / 2 * 4;
  if (type == GgmlType::kF16) return cols * 2;
  if (type == GgmlType::kF32) return cols * 4;
  int64_t group_bytes = GroupOf(FieldsOf(type)).bytes;
  if (const HalfFields f = HalfFieldsOf(type); f.bytes > 0) group_bytes = GroupOf(f).bytes;
  if (const SuperFields f = SuperFieldsOf(type); f.bytes > 0) {
    group_bytes = internal::PackedGroupK(f.has_min, f.fifth).bytes;
  }
  return (cols + 511) / 512 * group_bytes;
}

void PackRows(const WeightView& w, uint8_t* dst) {
  if (w.type == GgmlType::kQ8_0) return PackQ8Rows(w, dst);
  if (w.type == GgmlType::kBF16) return PackFloatGroups(w, 2, 2, dst);
  if (w.type == GgmlType::kF16) return PackFloatGroups(w, 1, 2, dst);
  if (w.type == GgmlType::kF32) return PackFloatGroups(w, 1, 4, dst);
  if (const HalfFields f = HalfFieldsOf(w.type); f.bytes > 0) return PackHalfRows(w, f, dst);
  if (const SuperFields f = SuperFieldsOf(w.type); f.bytes > 0) return PackSuperRows(w, f, dst);
  PackBlock32Rows(w, dst);
}

}  // namespace pagoda::cpu::mm
