// Fast y = W x against a typed weight matrix for every batch size (GEMV for one token, a
// register-blocked GEMM for batched decode and prefill), with one implementation per
// instruction-set level (kernels/cpu/simd_level.h) chosen at run time, up to the caller's cap
// (MatMulOptions::max_level).
//
// Layouts: W is a WeightView [rows][cols] in its GGML type (row r at w.row(r)); activations x are
// row-major fp32 [n_tokens][cols]; the output y is row-major fp32 [n_tokens][rows]:
//   y[t * rows + r] = sum_c W[r][c] * x[t][c].
//
// Per weight type and level:
//   F32 / F16 / BF16: fp32 FMA dot products; F16 (F16C / AVX-512) and BF16 (shift) are widened to
//     fp32 in registers. At kAvx512Bf16, BF16 weights use vdpbf16ps with the activations rounded
//     to bf16 (relative error about 2^-8 of sum |w||x|).
//   Q8_0: the activations are quantized per call to int8 blocks of 32 with an fp32 scale
//     (d = amax / 127, round to nearest even) and dotted in int32 per block: AVX2 / AVX-512
//     vpmaddubsw with the sign trick, AVX512-VNNI vpdpbusd with the weights biased to (w + 128)
//     and start values that remove the bias (one row at a time for up to 8 tokens, steps of 4
//     blocks whose int32 lanes are summed per block before one convert + FMA; at kAmx, batches
//     of 13+ tokens on packed rows as 16 x 16 int8 tile products per block, the same int32 and
//     the same FMA chain, so the same bits). Error: at most
//     sum_blocks sum_i |w_i| * amax_block(x) / 254 plus fp32 rounding.
//   Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: the Q8_0 activation blocks; the 4/5-bit codes (IQ4_NL: its
//     signed levels) are unpacked in registers and dotted exactly in int32 per block (offsets
//     -8 / -16 folded in; Q4_1 / Q5_1 mins times the activation sums in fp32), at AVX2 /
//     AVX-512 / VNNI.
//   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS: the activations are quantized per call to int8 with
//     one scale per 256 (and sums per 16); codes unpacked in registers, products weighted by the
//     integer sub-block scales in int32 per super-block, mins / offsets subtracted in fp32 (at
//     VNNI for up to 8 tokens, but Q6_K: times the activations' integer sums per 16, Q3_K's and
//     IQ4_XS's offsets in int32) (matmul_quant_x86.inc). Error: as Q8_0 with 256-element
//     activation blocks.
//   Other dequantizable types, and the quantized types at kPortable: each row tile is
//     dequantized to fp32 and multiplied with the level's F32 kernel.
// Packed rows (PackRows below): Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL rows copied once at load into
//   groups of 16 blocks (the 16 fp16 scales together, each 4 codes of the 16 blocks side by side)
//   are multiplied from that copy at AVX2 and above below the int16 batch path: the activations
//   are quantized as for Q8_0 and their 4-byte groups interleaved the same way, so one 64-byte
//   vector of codes dots 16 blocks at once; per block the int32 sum is exact and the offset
//   (Q4_0 8, Q5_0 16, IQ4_NL at VNNI 128 after a +128 table) or the min is applied in fp32
//   with the activation block sums (error: as above, plus fp32 rounding of that term). The
//   same fp32 summation order for every batch size below 128 tokens. Q4_K, Q5_K and IQ4_XS (their
//   sub-blocks of 32 as the blocks) are packed the same way, two super-blocks per group with the
//   sub-block scales and mins unpacked to bytes: against the same activation blocks of 32, each
//   block's scale d sc and min dmin m formed exactly in fp32 (error: as the blocks of 32).
//   Q2_K, Q3_K and Q6_K (sub-blocks of 16) too: each block of 32 has two sub-block scales, so
//   its two halves are dotted in separate int32 sums, the activations carrying half-block sums
//   for the Q2_K mins and the Q3_K / Q6_K offsets.
//   BF16 at AVX512-BF16: groups of 16 rows with each pair of columns of the 16 rows side by side
//   (64 bytes), multiplied by broadcast pairs of bf16-rounded activations (vdpbf16ps), one fp32
//   lane per output summing its pairs in column order: the same bits for every batch size
//   (error: as BF16's file-row kernel, the sums in another order). F16 at AVX-512 alike: groups of
//   16 rows with each column of the 16 rows side by side (32 bytes), widened to fp32 and
//   multiplied by broadcast activations (FMA), one fp32 lane per output in column order (below
//   its int16 batches; batch-invariant plans use it at every batch size). F32 at AVX-512 alike
//   (64 bytes per column of 16 rows, no widening), at every batch size.
// Batches (matmul.cc MakePlan): Q8_0 from the file's rows with >= 9 tokens at kAvx512Vnni+ uses
// a token-lane kernel (16 tokens per zmm, same int8 arithmetic and error); packed Q8_0 rows keep
// their kernel (AMX from 13 tokens). At kAvx512Vnni+, the block-quantized types above with >=
// Int16MinTokens tokens and F16 with >= 32 (MatMulOptions::f16, int16 by default) convert each
// row tile once per call to 13-bit int16 codes with one scale per 32 columns, quantize the
// activations the same way and use vpdpwssd (matmul_i16_x86.cc): error per 32-column block at most
// (amax_w sum |x| + amax_x sum |w|) / 16382, about 2^-13 of the block's largest terms.
// GEMV and small batches walk one weight row at a time (one sequential stream per thread).
// Every output element is computed by one task in a fixed order: results do not depend on the
// number of threads (they do depend on the level and, through the plan, on the batch size,
// unless MatMulOptions::batch_invariant).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kernels/cpu/simd_level.h"
#include "model/weights.h"

namespace pagoda::cpu {
class ThreadTeam;  // kernels/cpu/thread_team.h
}  // namespace pagoda::cpu

namespace pagoda::cpu::mm {

// How F16 weights are multiplied in batches of >= 32 tokens (batched decode, prefill); one
// token (GEMV) is always exact.
enum class F16Matmul : int8_t {
  kExact,  // fp32 products of the widened weights (bound by the fp32 FMA rate)
  kInt16,  // 13-bit block-scaled weights and activations, int16 dot products (AVX512-VNNI;
           // exact below that level): 2x the FMA rate, error about 2^-13 of a block's largest
           // terms
  kBf16,   // weights and activations rounded to bf16, vdpbf16ps (AVX512-BF16; exact below):
           // 2x the FMA rate, error about 2^-8 of every term (the synth-gqa F16 logits then
           // differ from llama.cpp's by up to 0.09, past its suggested 0.03)
};
inline constexpr F16Matmul kDefaultF16Matmul = F16Matmul::kInt16;
const char* F16MatmulName(F16Matmul mode);  // "exact", "int16", "bf16"
std::optional<F16Matmul> ParseF16Matmul(std::string_view name);

struct MatMulOptions {
  // Highest level used (simd_level.h); the effective level is min(max_level, DetectSimdLevel()).
  SimdLevel max_level = kMaxSimdLevel;
  F16Matmul f16 = kDefaultF16Matmul;
  // Batch-invariant plans: y[t] is bit for bit what token t gets alone, whatever n_tokens, for
  // every type at every level (the kernels above for one token, in token chunks they sum alike;
  // no int16 or bf16 conversion, no Q8_0 token lanes but from packed rows: prefill and large
  // batches run at the small-batch kernels' rate, see FreeBatchInvariance).
  bool batch_invariant = false;
  // Where the parallel loops run: this team (not owned; CpuBackend's, one call at a time), or
  // oneTBB's current arena when null. The results are the same bits either way.
  ThreadTeam* team = nullptr;
  // The weights of the team's next call (the same n_tokens): before this call's loop each member
  // is handed the bytes of its first claim there, to prefetch into its caches while it waits
  // (ThreadTeam::SetPrefetch), so the weight stream goes on through the loops' tails and the
  // serial work between them. Not owned (only addresses are kept); empty: none.
  std::span<const WeightView* const> prefetch_next = {};
};

// Whether batch-invariant plans for `type` at `level` (an effective level) cost nothing: F32
// and BF16 (one kernel family at every batch), and the block-quantized types with a packed copy
// whose packed rows kernel serves every batch size (Q8_0: below AMX the only one in use; every
// other block type; F16 follows MatMulOptions::f16).
bool FreeBatchInvariance(GgmlType type, SimdLevel level, bool packed);

// The batch size from which the default plans (not batch-invariant) for `type` at `level` (an
// effective level) dequantize the row tiles to int16 and multiply with vpdpwssd; max() when
// never (F32, BF16, Q8_0 and F16, which follows MatMulOptions::f16). `packed`: the weights have
// a PackRows copy, whose kernels keep every batch (max()). For error bounds in tests.
int64_t Int16MinTokens(GgmlType type, SimdLevel level, bool packed);

// The level MatMul runs at for these options.
SimdLevel EffectiveSimdLevel(const MatMulOptions& options);
// Describes the kernel used for `type` at `level` (for `packed` rows: the one for a PackRows
// copy), e.g. "avx512vnni/q8_0", "avx512vnni/q4_0x16" or "avx512/dequant+f32" (for benchmarks
// and logs).
const char* KernelName(GgmlType type, SimdLevel level, bool packed = false);

// Load-time packing of rows for faster decode (see "Packed rows" above). CanPackRows: whether
// `type` has a packed layout (every block-quantized type, BF16, F16, F32); ReadsPackedRows:
// whether MatMul at `level` (an effective level) has a kernel for it (none at kPortable; Q8_0's
// is AVX512-VNNI's, BF16's AVX512-BF16's, F16's and F32's AVX-512's, elsewhere a packed copy
// would be memory spent for nothing); PackedRowBytes: the bytes of one packed row of `cols`
// elements (cols rounded up to 512; Q8_0: its 34 bytes per 32; BF16: 4 per pair of columns;
// F16: 2 per column; F32: 4); PackedBytes: the bytes of a packed copy of rows x cols (Q8_0,
// BF16, F16, F32: rows rounded up to groups of 16); PackRows writes w's rows at dst (PackedBytes
// bytes), in parallel. The caller owns dst and points w.packed at it; MatMul then reads it where
// its kernels can.
bool CanPackRows(GgmlType type);
bool ReadsPackedRows(GgmlType type, SimdLevel level);
int64_t PackedRowBytes(GgmlType type, int64_t cols);
int64_t PackedBytes(GgmlType type, int64_t rows, int64_t cols);
void PackRows(const WeightView& w, uint8_t* dst);

// y: [n_tokens][w.rows], x: [n_tokens][w.cols] (see the layouts above). Parallel over row tiles
// (MatMulOptions::team, else oneTBB's current arena); each weight row is read once per call for up
// to 32 tokens (about 256 KiB of activations), once per such token chunk beyond that.
void MatMul(const WeightView& w, const float* x, int64_t n_tokens, float* y,
            const MatMulOptions& options = {});

// One product per matrix against the same x: ys[i] = ws[i] x, [n_tokens][ws[i]->rows]. Every
// matrix has x's cols. The matrices whose kernels read the same prepared activations (any types:
// e.g. at batch 1 every packed block-quantized type but Q8_0, so a Q4_K_M layer's Q4_K q / k and
// Q6_K v) share one activation preparation and run in one parallel loop over all their row
// tiles; every output is bit-identical to MatMul's.
void MatMulSameInput(std::span<const WeightView* const> ws, const float* x, int64_t n_tokens,
                     std::span<float* const> ys, const MatMulOptions& options = {});

}  // namespace pagoda::cpu::mm
