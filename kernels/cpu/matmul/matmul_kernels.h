// Internal interface between the MatMul driver (matmul.cc) and its per-level kernels
// (matmul_x86.cc). Not for use outside kernels/cpu/matmul*.
//
// Prepared activations of one call (n tokens), built once by the driver:
//   kF32:  x  fp32 [n][cols]                 (the caller's x)
//   kBf16: xb bf16 [n][ld]                   (ld = cols rounded up to 32, zero padded)
//   kQ8:   xq int8 [n][ld], blocks of 32     (ld = cols rounded up to 64: an even block count,
//          xd fp32 [n][ld / 32] block scales   zero padded, scale 0 in the padding)
//          x[t][c] ~= xd[t][c / 32] * xq[t][c]
//   kQ8Vec: kQ8 with ld a multiple of 128 and each block pair's 4-byte groups interleaved: pair
//          p (blocks 2p, 2p + 1) is 64 bytes [8 k][2 blocks][4]  codes 4k..4k+3 of block 2p,
//          then of block 2p + 1 (xd unchanged: natural order), and
//          xc int32 [n][ld / 32]              -16 * the sum of the block's codes: the start
//                                             value of each of its 8 int32 lanes that removes a
//                                             +128 weight bias (8 * 16 = 128)
//   kQ8VecGroups: kQ8Vec and, for n >= kQ8GroupedMinTokens, the same in token groups of 16
//          (tokens 16 g + l, l < 16; a partial last group's missing lanes unset and never read),
//          nbx = ld / 32:
//          xg int8 [group][nbx][8 k][16 l][4]    codes 4k..4k+3 of the token's block (natural
//                                                block order)
//          xgc int32 [group][nbx][16 l]           8 * xc: the block's whole start value
//          xgd fp32 [group][nbx][16 l]            its scale xd
//          so a kernel reads any of a group's tokens at fixed offsets from one pointer
//   kQ8K:  xq int8 [n][ld]                   (ld = cols, a multiple of 256: the K-quant rows)
//          xd fp32 [n][cols / 256]           one scale per 256 (d = amax / 127)
//          xs fp32 [n][cols / 16]            xs[t][g] = xd[t][g / 16] * sum of xq[t][16g..16g+16)
//          xsum int16 [n][cols / 16]         the plain sums: xsum[t][g] = sum of xq[t][16g..16g+16)
//          x[t][c] ~= xd[t][c / 256] * xq[t][c]
//   kQ8KQ4: kQ8K with xq in Q4_K's nibble order: each 128 columns stored as
//          [0, 32) [64, 96) [32, 64) [96, 128) (xd, xs, xsum unchanged: natural order), so one
//          64-byte load of Q4_K codes masked to its low or high nibbles lines up with 64
//          consecutive xq bytes
//   kQ8Lanes: Q8_0-quantized activations (as kQ8) packed with tokens in the vector lanes, in
//          groups of 16 tokens (a partial last group padded with zero tokens), nb = cols / 32:
//          xp uint8 [group][nb][8][16 tokens][4]   xq + 128 (xq ^ 0x80) of codes 4k..4k+3 of
//                                                  each token's block
//          xpd fp32 [group][nb][16 tokens]         the block scales
//   kQ8X16: Q8_0-quantized activations (as kQ8) for packed rows, ld = cols rounded up to 512
//          (zero padded, scale 0), each 512 (16 blocks) with its 4-byte groups interleaved:
//          xq int8 [n][ld / 512][8 v][16 blocks L][4]   codes 4v..4v+3 of block L
//          xd fp32 [n][ld / 32]                         block scales (natural order)
//          xs fp32 [n][ld / 32]                         xd times the sum of the block's codes
//          xsum int16 [n][ld / 16]                      the sums of each 16 codes (natural order:
//                                                       word 2L + h of a 512 is codes 16h..16h+15
//                                                       of block L)
//   kQ8Amx: kQ8 (codes in natural order, ld a multiple of 64) and
//          xc int32 [n][ld / 32]              -128 * the sum of the block's codes: the start
//                                             value that removes a +128 weight bias
//   kI16:  xi int16 [n][ld]                  (ld = cols rounded up to 32, zero padded)
//          xd fp32 [n][ld / 32]              block scales (d = amax / 8191, round to nearest
//          x[t][c] ~= xd[t][c / 32] * xi[t][c]   even: |xi| <= 8191)
//
// Packed rows (PackRows, for Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; the K-quants below): each row is cols
// rounded up to 512 (zero blocks: scale 0, codes 0) in groups of 16 blocks, 16 * (the type's block
// bytes) each:
//   d  fp16 [16]                 the block scales
//   m  fp16 [16]                 the mins (Q4_1, Q5_1 only)
//   qh uint8 [16 L][4 k]         5th bits (Q5_0, Q5_1 only): bit v of byte 4L + k is the 5th bit
//                                of element 4v + k of block L (so one vgf2p8affineqb, or a
//                                vptestmb, gives vector v's)
//   qs uint8 [4 u][16 L][4 k]    byte k of group u of block L's 16 nibble bytes (its low nibble:
//                                element 4u + k, high: 16 + 4u + k)
// so the low nibbles of 64 bytes qs[u] are elements 4u..4u+3 of every block, lined up with
// kQ8X16's vector v = u, and their high nibbles with v = u + 4. PackedGroup below gives the
// offsets, for PackRows and the kernels alike.
// The K-quants with sub-blocks of 32 (Q4_K, Q5_K, IQ4_XS) pack the same way, a group being two
// super-blocks (16 sub-blocks L; a row of an odd number of super-blocks ends with a zero one),
// with the super-block fields first and the sub-block scales unpacked to bytes (PackedGroupK):
//   d    fp16 [2]                the super-scales of super-blocks 0 and 1 (sub-blocks 0-7, 8-15)
//   dmin fp16 [2]                their min super-scales (Q4_K, Q5_K only)
//   sc   uint8 [16]              sub-block scales (IQ4_XS: int8, its scale - 32)
//   m    uint8 [16]              sub-block mins (Q4_K, Q5_K only)
//   qh, qs                       as above (qh: Q5_K only), the codes q (0..31; IQ4_XS: indices)
// so x = d sc q - dmin m (IQ4_XS: d sc kIQ4Levels[q]) with d sc and dmin m exact in fp32.
// The K-quants with sub-blocks of 16 (Q2_K, Q3_K, Q6_K) likewise (PackedGroupK16): block L of 32
// holds sub-blocks 2L (vectors v = 0..3) and 2L + 1 (v = 4..7), so
//   d    fp16 [2], dmin fp16 [2] (Q2_K only)
//   sc   uint8 [16 L][2 h]       scale byte of sub-block 2L + h (Q6_K: [2 h][16 L]; Q2_K:
//                                sc | m << 4 as in the file; Q3_K: int8 scale - 32; Q6_K: int8
//                                scale)
//   qs   uint8 [4 u][16 L][4 k]  (Q6_K only) the low nibbles of the codes, as above
//   two  uint8 [2 w][16 L][4 k]  bits 2i, 2i + 1: the 2 low bits of element 4 (4w + i) + k of
//                                block L (Q6_K: the 2 bits above its nibble; not Q3_K)
//   three uint8 [3 p][16 L][4 k] (Q3_K only, at the offset `two`) the 3-bit codes of element
//                                4v + k of block L: plane 0 holds v = 0 (bits 0-2), 1 (bits 3-5)
//                                and the low 2 bits of v = 6 (bits 6-7); plane 1 v = 2, 3 and
//                                v = 7's low 2 bits; plane 2 v = 4, 5 and the third bits of v = 6
//                                (bit 6) and 7 (bit 7): one vgf2p8affineqb (or a shift and a
//                                mask) a vector of codes, two and an or for v = 6, 7
// with codes q: Q2_K 0..3, x = d sc q - dmin m; Q3_K 0..7, x = d s (q - 4); Q6_K 0..63,
// x = d s (q - 32). Their kernels take the activation sums per 16 (kQ8X16's xsum).
// Q8_0 packs across rows instead (its kernel sums a block per lane, 16 rows to a zmm): rows in
// groups of 16 (the last padded with zero rows), group stride nb * kQ8GroupBlockBytes (nb =
// cols / 32); per group and block b:
//   qs uint8 [8 k][16 rows j][4 i]   code 4k + i of row 16g + j's block b, plus 128 (w ^ 0x80)
//   d  fp16 [16 rows]                the block scales
//
// I16 lane tiles (weights converted per call for the kI16 kernel): nr rows in groups of 16
// (the last padded with zero rows), group stride nb * kI16BlockBytes (nb = cols rounded up to 32,
// / 32); per group and 32-column block b:
//   codes int16 [16 pairs k][16 rows j][2]   w[16 g + j][32 b + 2 k + i] ~= scale[j] * code
//   scale fp32 [16 rows]                     (the same 13-bit block quantization as kI16)
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul/matmul.h"

namespace pagoda::cpu::mm::internal {

enum class ActFormat : int8_t {
  kF32,
  kBf16,
  kBf16Pairs,
  kQ8,
  kQ8Vec,
  kQ8VecGroups,
  kQ8Amx,
  kQ8K,
  kQ8KQ4,
  kQ8Lanes,
  kQ8X16,
  kI16
};

// Where kQ8Vec keeps codes 4k..4k+3 of block b in a token's row (block pairs interleaved by 4
// bytes).
constexpr int64_t Q8VecCodeOffset(int64_t b, int k) { return 64 * (b / 2) + 4 * (b % 2) + 8 * k; }

struct Activations {
  const float* x = nullptr;
  const uint16_t* xb = nullptr;
  const int8_t* xq = nullptr;
  const float* xd = nullptr;
  const float* xs = nullptr;      // kQ8K / kQ8KQ4 / kQ8X16 only
  const int32_t* xc = nullptr;    // kQ8Vec(Groups), kQ8Amx only
  const int8_t* xg = nullptr;     // kQ8VecGroups of kQ8GroupedMinTokens+ tokens only
  const int32_t* xgc = nullptr;   // kQ8VecGroups of kQ8GroupedMinTokens+ tokens only
  const float* xgd = nullptr;     // kQ8VecGroups of kQ8GroupedMinTokens+ tokens only
  const uint8_t* xp = nullptr;    // kQ8Lanes only
  const float* xpd = nullptr;     // kQ8Lanes only
  const int16_t* xi = nullptr;    // kI16 only
  const int16_t* xsum = nullptr;  // kQ8K / kQ8KQ4 / kQ8X16 only
  int64_t cols = 0;
  int64_t ld = 0;     // row stride of xb / xq / xi in elements (kBf16Pairs: pairs per token)
  int64_t group = 0;  // kBf16Pairs only: tokens per group
};

// A block of rows x tokens: y[t * ldy + r] = sum_c W[r][c] x[t0 + t][c] for r < nr, t < nt.
// Row r of the weights starts at w + r * w_stride bytes (cols elements in the kernel's type).
using BlockFn = void (*)(const uint8_t* w, int64_t w_stride, int64_t nr, const Activations& a,
                         int64_t t0, int64_t nt, float* y, int64_t ldy);

struct Kernel {
  BlockFn fn = nullptr;  // nullptr: no kernel for this type (dequantize to F32 first)
  ActFormat act = ActFormat::kF32;
  const char* name = "";
};

// The x86 kernel for `type` at `level` (a level the CPU supports, above kPortable); fn == nullptr
// when there is none. Defined in matmul_x86.cc; always empty off x86-64.
Kernel X86Kernel(SimdLevel level, GgmlType type);
// Converts one weight row of `cols` elements to bf16 (round to nearest even) at dst.
using ToBf16Fn = void (*)(const uint8_t* row, uint16_t* dst, int64_t cols);
// The AVX512-BF16 converter for F16 rows (F16Matmul::kBf16); nullptr for other types. Only
// called on CPUs with AVX512-BF16.
ToBf16Fn X86Bf16Converter(GgmlType type);

// The AVX512-VNNI Q8_0 kernel for kQ8Lanes activations (many tokens); requires the block's
// t0 to be a multiple of 16.
Kernel X86Q8LanesKernel();
// The AVX512-VNNI Q8_0 kernel for packed rows (the Q8_0 layout above; w_stride = PackedRowBytes,
// a group starting every 16 rows) x kQ8VecGroups activations, any number of tokens (from
// kQ8GroupedMinTokens on it reads the token groups): bit for bit the token-lane kernel's
// outputs. kQ8GroupBlockBytes: one block of a group (the file's
// 16 x 34 bytes, rearranged).
inline constexpr int64_t kQ8GroupBlockBytes = 8 * 64 + 32;
inline constexpr int64_t kQ8GroupedMinTokens = 9;
Kernel X86Q8PackedKernel();
// The AVX512-BF16 kernel for packed BF16 rows x kBf16Pairs activations, any number of tokens.
// Packed rows: groups of 16 rows (w_stride = PackedRowBytes = 4 * pairs, a group starting every
// 16 rows); in a group, pair k (columns 2k, 2k + 1; a missing last column or row is zero) of
// row r is at byte 64 k + 4 r, so one zmm holds pair k of 16 rows. kBf16Pairs: the tokens'
// bf16 pairs in groups of `group` = min(16, n) tokens (the last one zero padded): pair k of token
// t at uint32 index (t / group * ld + k) * group + t % group. Each (row, token) output is one fp32
// lane that adds the vdpbf16ps of its pairs in column order from zero, so a token gets the same
// bits in any batch.
Kernel X86Bf16PackedKernel();
// The AVX-512 kernel for packed F16 rows x kF32 activations, any number of tokens. Packed rows:
// groups of 16 rows (w_stride = PackedRowBytes = 2 * cols, a group starting every 16 rows);
// in a group, column c of row r is the fp16 at byte 32 c + 2 r (rows past the matrix zero), so
// one ymm holds column c of 16 rows. Each (row, token) output is one fp32 lane that adds the
// exact products of its columns in order from zero (FMA): a token gets the same bits in any
// batch.
Kernel X86F16PackedKernel();
// The same for packed F32 rows: column c of row r at byte 64 c + 4 r of its group (one zmm per
// column of 16 rows), each (row, token) one fp32 lane of in-order FMAs from zero.
Kernel X86F32PackedKernel();
// The AMX Q8_0 kernel: packed rows (as X86Q8PackedKernel's) x kQ8Amx activations, any number
// of tokens, bit for bit the token-lane and packed-row kernels' outputs. Only called at
// SimdLevel::kAmx. Defined in matmul_amx_x86.cc; empty off x86-64.
Kernel X86Q8AmxKernel();

// The AVX512-VNNI kernel for I16 lane tiles x kI16 activations (w_stride = the group stride),
// and the converter that writes those tiles from nr rows of F16 or F32 weights (`type`; row
// stride ws bytes) at dst (nb * kI16BlockBytes * ceil(nr / 16) bytes); nullptr for other types
// (the driver dequantizes them to F32 first). Defined in matmul_i16_x86.cc; empty / nullptr off
// x86-64.
constexpr int64_t kI16BlockBytes = 16 * 16 * 2 * 2 + 16 * 4;
using ToI16LanesFn = void (*)(const uint8_t* w, int64_t ws, int64_t nr, int64_t cols, uint8_t* dst);
Kernel X86I16Kernel();
ToI16LanesFn X86I16Converter(GgmlType type);
// The same tiles from a PackRows copy (w at the copy's row r0, a group start; ws =
// PackedRowBytes): F16 (its packed groups); nullptr for other types.
ToI16LanesFn X86I16PackedConverter(GgmlType type);
// Quantizes one token of fp32 activations (cols values) to kI16 (xi: ld codes, zero padded;
// xd: ld / 32 scales).
using QuantizeI16Fn = void (*)(const float* x, int64_t cols, int64_t ld, int16_t* xi, float* xd);
QuantizeI16Fn X86I16Quantizer();

// Quantizes one token of fp32 activations (cols values) to kQ8 blocks of 32: xq ld codes (zero
// padded), xd ld / 32 scales; d = amax / 127 (NaN values left out of amax), q = x * (1 / d)
// rounded to nearest even. QuantizeQ8Portable is the definition (matmul.cc); X86Q8Quantizer
// (matmul_x86.cc) gives the same bytes at `level` (from kAvx512; nullptr below it or off x86-64).
using QuantizeQ8Fn = void (*)(const float* x, int64_t cols, int64_t ld, int8_t* xq, float* xd);
void QuantizeQ8Portable(const float* x, int64_t cols, int64_t ld, int8_t* xq, float* xd);
QuantizeQ8Fn X86Q8Quantizer(SimdLevel level);
// Turns one token's kQ8 codes (xq, ld a multiple of 512, in place) into kQ8X16's interleaved
// order and writes its xs and xsum from them and xd. InterleaveX16Portable is the definition
// (matmul.cc); X86InterleaveX16 (matmul_x86.cc) writes the same bytes at `level` (from kAvx512;
// nullptr below it or off x86-64).
using InterleaveX16Fn = void (*)(int8_t* xq, const float* xd, int64_t ld, float* xs, int16_t* xsum);
void InterleaveX16Portable(int8_t* xq, const float* xd, int64_t ld, float* xs, int16_t* xsum);
InterleaveX16Fn X86InterleaveX16(SimdLevel level);
// Writes one token's kBf16Pairs entries: pair k of x (cols values; Fp32ToBf16 of x[2k] in the
// low half, of x[2k + 1] or 0 in the high half) at dst[k * stride]. Bf16PairsPortable is the
// definition (matmul.cc); X86Bf16Pairs (matmul_x86.cc) writes the same bits at `level` (from
// kAvx512; nullptr below it or off x86-64).
using Bf16PairsFn = void (*)(const float* x, int64_t cols, uint32_t* dst, int64_t stride);
void Bf16PairsPortable(const float* x, int64_t cols, uint32_t* dst, int64_t stride);
Bf16PairsFn X86Bf16Pairs(SimdLevel level);

// The x86 kernels for the block-quantized types other than Q8_0 (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) at `level`; fn == nullptr when there is none. Defined in
// matmul_quant_x86.cc.
Kernel X86QuantKernel(SimdLevel level, GgmlType type);
// Bytes and field offsets of a packed group (the layouts above): of a blocks-of-32 format with
// `block_bytes` per block and (has_min) a min per block, of a K-quant with sub-blocks of 32 with
// (has_min) mins and (fifth) 5th bits, and of one with sub-blocks of 16 with (has_min) mins,
// (nibbles) low nibbles and (third) third bits. sc: the K-quants' sub-block scale bytes; two:
// the 2-bit planes; -1: no such field.
struct PackedGroupLayout {
  int64_t bytes, m, qh, qs, sc, two;
};
constexpr PackedGroupLayout PackedGroup(int64_t block_bytes, bool has_min) {
  return {16 * block_bytes, 32, has_min ? 64 : 32, 16 * block_bytes - 256, -1, -1};
}
constexpr PackedGroupLayout PackedGroupK(bool has_min, bool fifth) {
  const int64_t sc = has_min ? 8 : 4, m = sc + 16, qh = m + (has_min ? 16 : 0);
  const int64_t qs = qh + (fifth ? 64 : 0);
  return {qs + 256, m, qh, qs, sc, -1};
}
constexpr PackedGroupLayout PackedGroupK16(bool has_min, bool nibbles, bool third) {
  const int64_t sc = has_min ? 8 : 4, qs = sc + 32, two = qs + (nibbles ? 256 : 0);
  return {two + (third ? 192 : 128), -1, -1, nibbles ? qs : -1, sc, two};
}

// The x86 kernels for packed rows (kQ8X16 activations; Q8_0: X86Q8PackedKernel, AVX512-VNNI
// only) of every block-quantized type at `level`; fn == nullptr for other types and levels.
// Defined in matmul_quant_x86.cc.
Kernel X86PackedKernel(SimdLevel level, GgmlType type);

}  // namespace pagoda::cpu::mm::internal
