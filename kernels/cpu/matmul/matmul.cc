#include "kernels/cpu/matmul/matmul.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "common/line_vector.h"
#include "common/numerics.h"
#include "kernels/cpu/matmul/matmul_kernels.h"
#include "kernels/cpu/portable_math.h"
#include "kernels/cpu/thread_team.h"

namespace pagoda::cpu::mm {
namespace {

using internal::ActFormat;
using internal::Activations;
using internal::Kernel;

constexpr int64_t kQ8Block = 32;
constexpr int64_t kTileBytes = 256 * 1024;  // weight bytes per row tile (L2-sized)
// Weight bytes per row tile of the GEMV of packed rows, in whole tiles of 64 rows: the
// kernels walk 4 weight streams per tile (GemvX16: 4 quarters of the tile; Q8_0, BF16, F16: 4
// groups of 16 rows side by side), which tiles of 256 KiB cut to 2 where rows are long (5632
// columns of F16: 2 groups). A harness of MatMul calls over 25 distinct 11264 x 2048 Q4_K
// matrices alternated with the read loop, GEMV GB/s over read GB/s, 3 interleaved rounds:
// 256 KiB tiles 0.827-0.862, 1 MiB 0.862-0.953. bench model --interleave-bandwidth (128 + 64),
// 256 KiB tiles of 16 (Q8_0) or 32 rows (BF16, F16) / these, interleaved: medium32k-q8_0 37.49
// tok/s at 52.5 GB/s / 38.50 at 51.6, 34.91 at 47.9 / 38.08 at 49.7; bf16 23.61 at 49.1 /
// 26.04 at 48.7, 23.15 at 46.7 / 25.63 at 49.3; f16 20.36 at 42.7 / 22.28 at 45.1.
constexpr int64_t kGemvTileBytes = 1024 * 1024;
constexpr int64_t kGemvRowAlign = 64;
constexpr int64_t kChunkBytes = 256 * 1024;      // fp32 activation bytes per token chunk
constexpr int64_t kMinTiles = 8;                 // tasks per call, for load balance
constexpr int64_t kPrefetchBytes = 1024 * 1024;  // per member, of the next call's first claim
// A call's GEMV ran 5-15% below the same kernel streaming one tall matrix (BM_MatMulDram
// gate_up batch 1, Q4_K and Q8_0, per_call against one_call, computed). Not from its tiles:
// near-equal tiles in a count rounded up to a multiple of the threads, or kMinTiles 16 / 32,
// left per_call where it was (Q4_K, two interleaved rounds: 52.2, 48.8 GB/s; those tiles 49.2,
// 49.5; kMinTiles 16: 51.6, 49.1; 32: 50.8, 51.2).

// ------------------------------------------------------------------------- portable F32 ----

void BlockF32Portable(const uint8_t* w, int64_t w_stride, int64_t nr, const Activations& a,
                      int64_t t0, int64_t nt, float* y, int64_t ldy) {
  for (int64_t r = 0; r < nr; ++r) {
    const float* wr = reinterpret_cast<const float*>(w + r * w_stride);
    for (int64_t t = 0; t < nt; ++t) {
      y[t * ldy + r] = DotPortable(wr, a.x + (t0 + t) * a.cols, a.cols);
    }
  }
}

// The kernel for `type` at `level`; fn == nullptr means "dequantize, then use F32's".
Kernel SelectKernel(SimdLevel level, GgmlType type) {
  if (level != SimdLevel::kPortable) return internal::X86Kernel(level, type);
  if (type == GgmlType::kF32) return {BlockF32Portable, ActFormat::kF32, "portable/f32"};
  return {};
}

// --------------------------------------------------------------------- activation prep ----

// One token of a K-quant row (cols a multiple of 256): one scale per 256 (d = amax / 127,
// round to nearest even), the scaled and the plain sum of every 16 quantized values
// (|sum| <= 16 * 127).
void QuantizeQ8K(const float* x, int64_t cols, int8_t* xq, float* xd, float* xs, int16_t* xsum) {
  for (int64_t b = 0; b < cols / 256; ++b) {
    const float* xb = x + b * 256;
    float amax = 0.0f;
    for (int64_t i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    xd[b] = d;
    for (int64_t g = 0; g < 16; ++g) {
      int32_t sum = 0;
      for (int64_t i = 16 * g; i < 16 * g + 16; ++i) {
        const float q = (xb[i] * id + 12582912.0f) - 12582912.0f;
        xq[b * 256 + i] = static_cast<int8_t>(q);
        sum += static_cast<int32_t>(q);
      }
      xs[b * 16 + g] = d * static_cast<float>(sum);
      xsum[b * 16 + g] = static_cast<int16_t>(sum);
    }
  }
}

// Reorders each 128 quantized activations to [0, 32) [64, 96) [32, 64) [96, 128) (kQ8KQ4).
void PermuteForQ4K(int8_t* xq, int64_t cols) {
  int8_t tmp[128];
  for (int64_t c = 0; c < cols; c += 128) {
    std::memcpy(tmp, xq + c, 128);
    std::memcpy(xq + c + 32, tmp + 64, 32);
    std::memcpy(xq + c + 64, tmp + 32, 32);
  }
}

// One token's block start values: xc[b] = factor * the sum of block b's codes (kQ8Vec: -16,
// kQ8Amx: -128; matmul_kernels.h).
void BlockStarts(const int8_t* xq, int64_t ld, int32_t factor, int32_t* xc) {
  for (int64_t b = 0; b < ld / kQ8Block; ++b) {
    int32_t sum = 0;
    for (int64_t i = 0; i < kQ8Block; ++i) sum += xq[b * kQ8Block + i];
    xc[b] = factor * sum;
  }
}

// kQ8Vec: one token's kQ8 codes (ld a multiple of 64) with each block pair's 4-byte groups
// interleaved, and the blocks' start values xc (matmul_kernels.h).
void InterleavePairs(int8_t* xq, int64_t ld, int32_t* xc) {
  BlockStarts(xq, ld, -16, xc);
  int8_t pair[64];
  for (int64_t p = 0; p < ld / 64; ++p) {
    int8_t* q = xq + 64 * p;
    std::memcpy(pair, q, 64);
    for (int64_t k = 0; k < 8; ++k) {
      std::memcpy(q + 8 * k, pair + 4 * k, 4);
      std::memcpy(q + 8 * k + 4, pair + 32 + 4 * k, 4);
    }
  }
}

bool IsQ8(ActFormat f) {
  return f == ActFormat::kQ8 || f == ActFormat::kQ8Vec || f == ActFormat::kQ8VecGroups ||
         f == ActFormat::kQ8Amx || f == ActFormat::kQ8Lanes;
}

// Owned storage behind an Activations view, on cache lines (common/line_vector.h): the kernels
// load it in 64-byte vectors, which from malloc's 16-byte alignment each spanned two lines.
// pagoda_bench_matmul gate_up 5632 x 2048, 512 tokens, GFLOP/s malloc / aligned, two
// interleaved rounds (Zen 5, 2 threads): Q4_K 537 / 653, 553 / 740; Q4_0 596 / 854, 588 / 709;
// Q6_K 391 / 443, 408 / 476; Q8_0 900 / 998, 961 / 903. bench model medium32k-q4_k_m prefill
// 512: 247.6, 246.9 / 276.4, 273.2 tok/s.
struct PreparedActivations {
  LineVector<uint16_t> xb;
  LineVector<int8_t> xq;
  LineVector<float> xd;
  LineVector<float> xs;
  LineVector<int32_t> xc;  // kQ8Vec(Groups), kQ8Amx
  LineVector<int8_t> xg;   // kQ8VecGroups (kQ8GroupedMinTokens+ tokens)
  LineVector<int32_t> xgc;
  LineVector<float> xgd;
  LineVector<uint8_t> xp;  // kQ8Lanes (see matmul_kernels.h)
  LineVector<float> xpd;
  LineVector<int16_t> xi;    // kI16
  LineVector<int16_t> xsum;  // kQ8K, kQ8KQ4
  Activations view;
};

// kQ8Lanes: packs the Q8_0-quantized tokens of group g (16 tokens from 16g; missing ones are
// zero) from p.xq / p.xd (kQ8 layout, row stride ld) into the lane layout.
void PackLanes(PreparedActivations& p, int64_t n, int64_t g) {
  const int64_t nb = p.view.cols / kQ8Block, ld = p.view.ld;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* xp = p.xp.data() + (g * nb + b) * 512;
    float* xd = p.xpd.data() + (g * nb + b) * 16;
    for (int64_t l = 0; l < 16; ++l) {
      const int64_t t = 16 * g + l;
      if (t >= n) {  // padding token (code 0)
        for (int64_t k = 0; k < 8; ++k) std::memset(xp + k * 64 + l * 4, 0x80, 4);
        xd[l] = 0.0f;
        continue;
      }
      const int8_t* q = p.xq.data() + t * ld + b * kQ8Block;
      for (int64_t k = 0; k < 8; ++k) {
        for (int64_t i = 0; i < 4; ++i) {
          xp[k * 64 + l * 4 + i] = static_cast<uint8_t>(q[4 * k + i] + 128);
        }
      }
      xd[l] = p.xd[t * (ld / kQ8Block) + b];
    }
  }
}

// kQ8VecGroups of kQ8GroupedMinTokens+ tokens: copies token group g (tokens 16g.. below n) from the
// token rows into the group layout (matmul_kernels.h xg, xgc, xgd).
void GroupTokens(PreparedActivations& p, int64_t n, int64_t g) {
  const int64_t nbx = p.view.ld / kQ8Block, ld = p.view.ld;
  for (int64_t l = 0; l < 16 && 16 * g + l < n; ++l) {
    const int64_t t = 16 * g + l;
    const int8_t* xq = p.xq.data() + t * ld;
    for (int64_t b = 0; b < nbx; ++b) {
      int8_t* dst = p.xg.data() + (g * nbx + b) * 512 + 4 * l;
      for (int k = 0; k < 8; ++k) {
        std::memcpy(dst + 64 * k, xq + internal::Q8VecCodeOffset(b, k), 4);
      }
      p.xgc[(g * nbx + b) * 16 + l] = 8 * p.xc[t * nbx + b];
      p.xgd[(g * nbx + b) * 16 + l] = p.xd[t * nbx + b];
    }
  }
}

// Sizes p's buffers for n tokens (they only grow) and sets the view's row stride.
void Reserve(ActFormat format, int64_t n, int64_t cols, PreparedActivations& p) {
  if (format == ActFormat::kBf16) {
    p.view.ld = (cols + 31) / 32 * 32;
    p.xb.assign(static_cast<size_t>(n * p.view.ld), 0);
  } else if (format == ActFormat::kBf16Pairs) {
    // Prepare writes every pair of the n tokens; the last group's slots past them are never
    // read (the kernel's token tiles stop at n), so nothing is zeroed on each call.
    p.view.ld = (cols + 1) / 2;
    p.view.group = std::min<int64_t>(16, n);
    const int64_t groups = (n + p.view.group - 1) / p.view.group;
    p.xb.resize(static_cast<size_t>(2 * groups * p.view.group * p.view.ld));
  } else if (format == ActFormat::kI16) {
    p.view.ld = (cols + kQ8Block - 1) / kQ8Block * kQ8Block;
    p.xi.resize(static_cast<size_t>(n * p.view.ld));
    p.xd.resize(static_cast<size_t>(n * p.view.ld / kQ8Block));
  } else if (format == ActFormat::kQ8X16) {
    p.view.ld = (cols + 511) / 512 * 512;
    p.xq.resize(static_cast<size_t>(n * p.view.ld));
    p.xd.resize(static_cast<size_t>(n * p.view.ld / kQ8Block));
    p.xs.resize(static_cast<size_t>(n * p.view.ld / kQ8Block));
    p.xsum.resize(static_cast<size_t>(n * p.view.ld / 16));
  } else if (IsQ8(format)) {
    const bool vec = format == ActFormat::kQ8Vec || format == ActFormat::kQ8VecGroups;
    // kQ8Vec: whole groups of 4 blocks (its kernel's step); else whole block pairs.
    const int64_t unit = (vec ? 4 : 2) * kQ8Block;
    p.view.ld = (cols + unit - 1) / unit * unit;
    if (vec || format == ActFormat::kQ8Amx) {
      p.xc.resize(static_cast<size_t>(n * p.view.ld / kQ8Block));
    }
    if (format == ActFormat::kQ8VecGroups && n >= internal::kQ8GroupedMinTokens) {
      const int64_t groups = (n + 15) / 16;
      p.xg.resize(static_cast<size_t>(groups * 16 * p.view.ld));
      p.xgc.resize(static_cast<size_t>(groups * 16 * p.view.ld / kQ8Block));
      p.xgd.resize(static_cast<size_t>(groups * 16 * p.view.ld / kQ8Block));
    }
    p.xq.resize(static_cast<size_t>(n * p.view.ld));
    p.xd.resize(static_cast<size_t>(n * p.view.ld / kQ8Block));
    if (format == ActFormat::kQ8Lanes) {
      const int64_t groups = (n + 15) / 16, nb = cols / kQ8Block;
      p.xp.resize(static_cast<size_t>(groups * nb * 512));
      p.xpd.resize(static_cast<size_t>(groups * nb * 16));
    }
  } else {  // kQ8K, kQ8KQ4
    p.view.ld = cols;
    p.xq.resize(static_cast<size_t>(n * cols));
    p.xd.resize(static_cast<size_t>(n * cols / 256));
    p.xs.resize(static_cast<size_t>(n * cols / 16));
    p.xsum.resize(static_cast<size_t>(n * cols / 16));
  }
}

void Prepare(ActFormat format, SimdLevel level, const float* x, int64_t n, int64_t cols,
             ThreadTeam* team, PreparedActivations& p) {
  p.view.x = x;
  p.view.cols = cols;
  if (format == ActFormat::kF32) return;
  Reserve(format, n, cols, p);
  const int64_t ld = p.view.ld;
  internal::QuantizeQ8Fn quantize_q8 = internal::X86Q8Quantizer(level);
  if (quantize_q8 == nullptr) quantize_q8 = internal::QuantizeQ8Portable;
  internal::InterleaveX16Fn interleave_x16 = internal::X86InterleaveX16(level);
  if (interleave_x16 == nullptr) interleave_x16 = internal::InterleaveX16Portable;
  internal::Bf16PairsFn bf16_pairs = internal::X86Bf16Pairs(level);
  if (bf16_pairs == nullptr) bf16_pairs = internal::Bf16PairsPortable;
  ParallelFor(team, n, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      const float* xt = x + t * cols;
      if (format == ActFormat::kBf16) {
        for (int64_t c = 0; c < cols; ++c) p.xb[t * ld + c] = Fp32ToBf16(xt[c]);
      } else if (format == ActFormat::kBf16Pairs) {
        const int64_t s = p.view.group;
        bf16_pairs(xt, cols, reinterpret_cast<uint32_t*>(p.xb.data()) + (t / s * ld) * s + t % s,
                   s);
      } else if (format == ActFormat::kI16) {
        internal::X86I16Quantizer()(xt, cols, ld, p.xi.data() + t * ld,
                                    p.xd.data() + t * ld / kQ8Block);
      } else if (format == ActFormat::kQ8X16) {
        const int64_t nbx = ld / kQ8Block;
        quantize_q8(xt, cols, ld, p.xq.data() + t * ld, p.xd.data() + t * nbx);
        interleave_x16(p.xq.data() + t * ld, p.xd.data() + t * nbx, ld, p.xs.data() + t * nbx,
                       p.xsum.data() + t * ld / 16);
      } else if (IsQ8(format)) {
        quantize_q8(xt, cols, ld, p.xq.data() + t * ld, p.xd.data() + t * ld / kQ8Block);
        if (format == ActFormat::kQ8Vec || format == ActFormat::kQ8VecGroups) {
          InterleavePairs(p.xq.data() + t * ld, ld, p.xc.data() + t * ld / kQ8Block);
        } else if (format == ActFormat::kQ8Amx) {
          BlockStarts(p.xq.data() + t * ld, ld, -128, p.xc.data() + t * ld / kQ8Block);
        }
      } else {
        int8_t* xq = p.xq.data() + t * cols;
        QuantizeQ8K(xt, cols, xq, p.xd.data() + t * cols / 256, p.xs.data() + t * cols / 16,
                    p.xsum.data() + t * cols / 16);
        if (format == ActFormat::kQ8KQ4) PermuteForQ4K(xq, cols);
      }
    }
  });
  if (format == ActFormat::kQ8Lanes) {
    ParallelFor(team, (n + 15) / 16, [&](int64_t begin, int64_t end, int) {
      for (int64_t g = begin; g < end; ++g) PackLanes(p, n, g);
    });
  }
  const bool grouped = format == ActFormat::kQ8VecGroups && n >= internal::kQ8GroupedMinTokens;
  if (grouped) {
    ParallelFor(team, (n + 15) / 16, [&](int64_t begin, int64_t end, int) {
      for (int64_t g = begin; g < end; ++g) GroupTokens(p, n, g);
    });
  }
  p.view.xg = grouped ? p.xg.data() : nullptr;
  p.view.xgc = grouped ? p.xgc.data() : nullptr;
  p.view.xgd = grouped ? p.xgd.data() : nullptr;
  p.view.xp = p.xp.data();
  p.view.xpd = p.xpd.data();
  p.view.xb = p.xb.data();
  p.view.xq = p.xq.data();
  p.view.xd = p.xd.data();
  p.view.xs = p.xs.data();
  p.view.xc = p.xc.data();
  p.view.xi = p.xi.data();
  p.view.xsum = p.xsum.data();
}

// Rows per task: about kTileBytes of weights, a multiple of `align`, at least kMinTiles tasks.
int64_t TileRows(int64_t rows, int64_t row_bytes, int64_t align, int64_t tile_bytes) {
  const int64_t tile = tile_bytes / std::max<int64_t>(1, row_bytes) / align * align;
  const int64_t balanced = ((rows + kMinTiles - 1) / kMinTiles + align - 1) / align * align;
  return std::max(align, std::min(tile, balanced));
}

// What each row tile becomes before the kernel runs on it.
enum class RowConversion : int8_t {
  kNone,    // the kernel reads the weights in their own format
  kF32,     // dequantized to fp32 (types without a kernel at this level)
  kBf16,    // F16 converted to bf16 (the opt-in F16Matmul::kBf16 batches)
  kI16,     // converted to I16 lane tiles (matmul_kernels.h): F16 directly, others dequantized
  kPacked,  // none: the kernel reads the view's load-time packed copy (WeightView::packed)
};

struct Plan {
  Kernel kernel;
  RowConversion conversion = RowConversion::kNone;
};

// At kAvx512Vnni with enough tokens (prefill), the K-quant and Q4_0 products are compute-bound:
// each row tile is dequantized and converted to I16 lane tiles once per call and multiplied with
// vpdpwssd (2x the fp32 FMA rate) from 128 tokens on. pagoda_bench_matmul gate_up 5632 x 2048,
// GFLOP/s at 128 / 512 tokens: Q4_K 290 / 368, Q6_K 195 / 315, Q4_0 258 / 349 (the bf16
// conversion it replaced: 340 / 354, 211 / 311, 257 / 358, with 2^-8 instead of 2^-13 rounding);
// bench model medium-q4_k_m prefill 512: 145 -> 155 tok/s. The other block formats (Q4_1, Q5_0,
// Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K, IQ4_XS) take the same path: their int8 kernels do about as
// much work per weight as Q4_0 / Q4_K. Q8_0 has its own int8 kernel for batches; F16 follows
// MatMulOptions::f16; F32 and BF16 weights keep their exact paths.
//
// Those figures predate the load-time packed rows (WeightView::packed), whose int8 kernels beat
// the I16 tiles well past 128 tokens, so with a packed kernel the switch came later (Zen 4:
// Q4_0 and Q4_K from 2048 tokens, Q5_1 1024, Q2_K and Q5_K 512, Q6_K 256). Since their batches
// take 2 x 6 tiles (1 x 6 for the sub-blocks of 16; BatchX16 in matmul_quant_x86.inc) the packed
// rows win at every batch up to 2048 tokens (the engine's default step budget) but for Q6_K:
// pagoda_bench_matmul on this host (avx512bf16, no AMX), GFLOP/s I16 / packed, two interleaved
// runs, gate_up 5632 x 2048 at 2048 tokens: Q4_0 438, 420 / 531, 552; Q4_1 438, 406 / 529,
// 530; Q5_0 424, 419 / 476, 431; IQ4_NL 440, 442 / 528, 475; Q3_K 357, 353 / 388, 365; IQ4_XS
// 435, 420 / 497, 488; Q4_K 438, 448 / 487, 520 (down 2048 x 5632: 442, 446 / 485, 512); Q5_1
// at 1024: 395, 388 / 453, 463; Q2_K at 512: 285, 275 / 410, 412 (down 280, 285 / 420, 416);
// Q5_K at 512: 391, 390 / 466, 442; but Q6_K at 512: 360, 360 / 283, 300 (down 327, 350 / 316,
// 291) and at 2048 432, 428 / 315, 338. So packed rows kept every batch (which also makes
// batch invariance free for them, FreeBatchInvariance) and Q6_K switched at 256 as before.
// Q6_K's packed batches then ran nearly 2x faster once their code extraction was inlined
// (matmul_quant_x86.inc X16HalfCodes), and keep every batch too, so llama.cpp's mixes (a Q6_K
// output matrix, Q6_K attn_v / ffn_down in Q4_K_M and Q5_K_M) are batch-invariant for free:
// gate_up 5632 x 2048, GFLOP/s at 128 / 256 / 512 / 1024 tokens, two interleaved rounds,
// int16 from 256 / packed: 381, 386 / 383, 369 (both packed at 128); 281, 282 / 373, 367; 347,
// 317 / 377, 366; 383, 348 / 385, 315; down 2048 x 5632 261, 234 / 282, 241; 267, 261 / 263,
// 273; 325, 300 / 273, 282; 352, 362 / 296, 262. bench model --gen-len 2, prefill tok/s,
// interleaved, int16 from 256 / packed: medium32k-q4_k_m 512 tokens (-r 2) 188.5, 186.4, 209.1
// / 193.3, 203.2, 197.1, 2000 tokens (-r 1) 172.9, 168.1 / 166.2, 157.6; q5_k_m 512 186.4,
// 192.1, 191.2 / 183.5, 187.4, 185.4, 2000 156.3, 153.3 / 160.6, 155.0.
int64_t ConvertedMinTokens(GgmlType type, bool packed_kernel) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kIQ4_NL:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kIQ4_XS:
    case GgmlType::kQ6_K:
      return packed_kernel ? std::numeric_limits<int64_t>::max() : 128;
    default:
      return std::numeric_limits<int64_t>::max();
  }
}

// Q8_0 file rows from this many tokens on, at kAvx512Vnni and above: the token-lane kernel
// (exact int8 products, 11 instructions per 512 of them, but a whole group of 16 tokens' work).
// Below it the row kernel (RowQ8Vec, up to 8 tokens per pass): a medium-model step of 8 tokens
// took 52.3 ms there against 62.3 ms for 9 by lanes (bench verify, read bandwidth 48.5 GB/s).
// From packed rows (X86Q8PackedKernel) one weight pass served up to 12 tokens (since then: 8, and
// 16 from 9 on), so they take over to there: bench verify medium32k-q8_0 -r 5, a step of 9
// tokens took 1.58x and 1.60x the time of a 1-token step, against 3.37x and 4.19x by lanes (16-18
// GB/s). Beyond that they still win below AMX, one pass per 12 tokens over row groups that
// stayed in L2, as the lanes' per-call weight sums (WeightStarts) and broadcasts cost more:
// pagoda_bench_matmul on a Zen 4 host (avx512bf16), ms lanes / packed, two runs: gate_up 5632 x
// 2048 16 tokens 0.860 / 0.609, 0.860 / 0.560, 64: 2.53 / 2.71, 2.87 / 2.36, 512: 18.4 / 19.6,
// 19.9 / 19.6, 2048: 76.8 / 84.2, 88.2 / 76.8; down 2048 x 5632 16: 0.789 / 0.610, 0.904 /
// 0.567, 512: 19.2 / 19.0, 21.1 / 18.5; q_o 2048 x 2048 16: 0.315 / 0.213, 0.350 / 0.265,
// 512: 8.65 / 7.74, 8.47 / 7.61. So packed rows never take the lanes. At kAmx their batches from
// 13 tokens take the AMX kernel (the same outputs): on an AMX host, pagoda_bench_matmul Q8_0
// gate_up 5632 x 2048, 16 tokens 0.845 ms against 1.54 and 2.03 ms by lanes (two runs); below
// 13 tokens it lost to the packed-row kernel (5 tokens: 1.12 ms against 0.53). AMX against the
// packed rows at 16+ tokens is not measured (no AMX host since).
constexpr int64_t kQ8LanesMinTokens = 9;
constexpr int64_t kQ8PackedAmxMinTokens = 13;

// F16 with this many tokens and more follows MatMulOptions::f16. Below it the per-call tile
// conversion costs more than the faster products gain (int16, gate_up 5632 x 2048 with
// pagoda_bench_matmul: 161 vs 187 GFLOP/s exact at 16 tokens, 224 vs 196 at 32).
constexpr int64_t kF16FastMinTokens = 32;

// `packed`: the weights have a PackRows copy. `batch_invariant`: only the kernels that sum a
// token alike at every batch size (no F16 fast path, no Q8_0 token lanes, no I16 conversion).
Plan MakePlan(SimdLevel level, GgmlType type, int64_t n_tokens, F16Matmul f16, bool packed,
              bool batch_invariant) {
  // Packed Q8_0 rows, the token lanes and AMX sum a token alike (matmul_kernels.h).
  // Where the plans of every batch size sum a token alike (FreeBatchInvariance), invariance
  // asks nothing; elsewhere it takes the plan of one token.
  const bool free = FreeBatchInvariance(type, level, packed);
  const bool q8_packed = type == GgmlType::kQ8_0 && free;
  if (batch_invariant && !free) n_tokens = 1;
  if (type == GgmlType::kF16 && n_tokens >= kF16FastMinTokens) {
    if (f16 == F16Matmul::kBf16 && level >= SimdLevel::kAvx512Bf16) {
      return {SelectKernel(level, GgmlType::kBF16), RowConversion::kBf16};
    }
    if (f16 == F16Matmul::kInt16 && level >= SimdLevel::kAvx512Vnni) {
      return {internal::X86I16Kernel(), RowConversion::kI16};
    }
  }
  if (q8_packed && level >= SimdLevel::kAmx && n_tokens >= kQ8PackedAmxMinTokens) {
    return {internal::X86Q8AmxKernel(), RowConversion::kPacked};
  }
  if (type == GgmlType::kQ8_0 && !q8_packed && level >= SimdLevel::kAvx512Vnni &&
      n_tokens >= kQ8LanesMinTokens) {
    return {internal::X86Q8LanesKernel(), RowConversion::kNone};
  }
  if (n_tokens >= Int16MinTokens(type, level, packed)) {
    return {internal::X86I16Kernel(), RowConversion::kI16};
  }
  if (packed) {  // no packed kernel at kPortable: the file's rows
    const Kernel k = internal::X86PackedKernel(level, type);
    if (k.fn != nullptr) return {k, RowConversion::kPacked};
  }
  const Kernel k = SelectKernel(level, type);
  if (k.fn != nullptr) return {k, RowConversion::kNone};
  return {SelectKernel(level, GgmlType::kF32), RowConversion::kF32};
}

int64_t TileRowBytes(const WeightView& w, RowConversion c) {
  if (c == RowConversion::kF32) return w.cols * 4;
  if (c == RowConversion::kBf16) return w.cols * 2;
  if (c == RowConversion::kI16) return (w.cols + 31) / 32 * internal::kI16BlockBytes / 16;
  if (c == RowConversion::kPacked) return PackedRowBytes(w.type, w.cols);
  return w.row_bytes;
}

// Whether plans of conversion c read the weights in place (the file's rows or the packed copy),
// and where row r0 then starts (its rows TileRowBytes apart).
bool InPlace(RowConversion c) { return c == RowConversion::kNone || c == RowConversion::kPacked; }
const uint8_t* InPlaceRows(const WeightView& w, RowConversion c, int64_t r0) {
  const uint8_t* base = c == RowConversion::kPacked ? w.packed : w.data;
  return base + r0 * TileRowBytes(w, c);
}

struct TileBuffers {
  LineVector<uint8_t> tile;  // converted rows (aligned too: F16 / Q6_K I16 no faster or slower)
  std::vector<float> rows;   // 16 dequantized rows (I16 conversion of types without a converter)
};

// Rows [r0, r0 + nr) of w as I16 lane tiles in buf.tile, group stride group_bytes: F16 rows
// directly, other types 16 rows at a time dequantized to fp32 first.
void ConvertI16Tile(const WeightView& w, int64_t r0, int64_t nr, int64_t group_bytes,
                    TileBuffers& buf) {
  buf.tile.resize(static_cast<size_t>((nr + 15) / 16 * group_bytes));
  // A packed F16 copy (r0 a multiple of 32: I16 tiles are two groups) is read rather than the
  // file's rows, which sit in the mapping's 4 KiB pages.
  const internal::ToI16LanesFn packed = internal::X86I16PackedConverter(w.type);
  if (w.packed != nullptr && packed != nullptr) {
    const int64_t ws = PackedRowBytes(w.type, w.cols);
    packed(w.packed + r0 * ws, ws, nr, w.cols, buf.tile.data());
    return;
  }
  if (const internal::ToI16LanesFn direct = internal::X86I16Converter(w.type)) {
    direct(w.row(r0), w.row_bytes, nr, w.cols, buf.tile.data());
    return;
  }
  buf.rows.resize(static_cast<size_t>(16 * w.cols));
  for (int64_t g = 0; g < nr; g += 16) {
    const int64_t rows = std::min<int64_t>(16, nr - g);
    for (int64_t r = 0; r < rows; ++r) {
      DequantizeRow(w.type, w.row(r0 + g + r), buf.rows.data() + r * w.cols, w.cols);
    }
    internal::X86I16Converter(GgmlType::kF32)(reinterpret_cast<const uint8_t*>(buf.rows.data()),
                                              w.cols * 4, rows, w.cols,
                                              buf.tile.data() + g / 16 * group_bytes);
  }
}

// Rows [r0, r0 + nr) of w as the plan's kernel reads them; *stride = bytes between rows (I16
// tiles: between groups of 16 rows).
const uint8_t* ConvertTile(const WeightView& w, const Plan& plan, int64_t r0, int64_t nr,
                           TileBuffers& buf, int64_t* stride) {
  if (InPlace(plan.conversion)) {
    *stride = TileRowBytes(w, plan.conversion);
    return InPlaceRows(w, plan.conversion, r0);
  }
  if (plan.conversion == RowConversion::kI16) {
    *stride = 16 * TileRowBytes(w, plan.conversion);
    ConvertI16Tile(w, r0, nr, *stride, buf);
    return buf.tile.data();
  }
  *stride = TileRowBytes(w, plan.conversion);
  buf.tile.resize(static_cast<size_t>(nr * *stride));
  for (int64_t r = 0; r < nr; ++r) {
    uint8_t* dst = buf.tile.data() + r * *stride;
    if (plan.conversion == RowConversion::kF32) {
      DequantizeRow(w.type, w.row(r0 + r), reinterpret_cast<float*>(dst), w.cols);
      continue;
    }
    // kBf16: F16 rows (MakePlan's opt-in F16Matmul::kBf16).
    internal::X86Bf16Converter(w.type)(w.row(r0 + r), reinterpret_cast<uint16_t*>(dst), w.cols);
  }
  return buf.tile.data();
}
}  // namespace

const char* F16MatmulName(F16Matmul mode) {
  switch (mode) {
    case F16Matmul::kExact:
      return "exact";
    case F16Matmul::kInt16:
      return "int16";
    case F16Matmul::kBf16:
      return "bf16";
  }
  return "?";
}

std::optional<F16Matmul> ParseF16Matmul(std::string_view name) {
  for (F16Matmul m : {F16Matmul::kExact, F16Matmul::kInt16, F16Matmul::kBf16}) {
    if (name == F16MatmulName(m)) return m;
  }
  return std::nullopt;
}

int64_t Int16MinTokens(GgmlType type, SimdLevel level, bool packed) {
  if (level < SimdLevel::kAvx512Vnni) return std::numeric_limits<int64_t>::max();
  return ConvertedMinTokens(type, packed && ReadsPackedRows(type, level));
}

bool FreeBatchInvariance(GgmlType type, SimdLevel level, bool packed) {
  if (type == GgmlType::kF32 || type == GgmlType::kBF16) return true;
  // F16 batches of kF16FastMinTokens+ follow MatMulOptions::f16 (int16 or bf16 by default).
  if (type == GgmlType::kF16 || !packed || !ReadsPackedRows(type, level)) return false;
  return Int16MinTokens(type, level, true) == std::numeric_limits<int64_t>::max();  // Q8_0 too
}

SimdLevel EffectiveSimdLevel(const MatMulOptions& options) {
  return cpu::EffectiveSimdLevel(options.max_level);
}

const char* KernelName(GgmlType type, SimdLevel level, bool packed) {
  level = cpu::EffectiveSimdLevel(level);
  if (packed) {
    if (const Kernel k = internal::X86PackedKernel(level, type); k.fn != nullptr) return k.name;
  }
  const Kernel k = SelectKernel(level, type);
  if (k.fn != nullptr) return k.name;
  constexpr const char* kNames[] = {"portable/dequant+f32",   "avx2/dequant+f32",
                                    "avx512/dequant+f32",     "avx512vnni/dequant+f32",
                                    "avx512bf16/dequant+f32", "amx/dequant+f32"};
  return kNames[static_cast<int>(level)];
}

namespace {

// One matrix of a call: its plan and token chunk limit (MaxTokenChunk), its output and its row
// tiles [first_tile, first_tile + n_tiles).
struct Product {
  const WeightView* w;
  float* y;
  Plan plan;
  int64_t max_chunk;
  int64_t tile_rows = 0;
  int64_t first_tile = 0;
};

// Rows per task of product p (see TileRows): I16 tiles are whole groups of 16 rows, two groups
// per kernel tile; packed BF16 and F16 rows too (two groups make their batched kernels'
// 16-accumulator tile: pagoda_bench_matmul BF16 down 2048 x 5632, 512 tokens, 448-492 GFLOP/s
// with tiles of one group, 659-704 with two); packed Q8_0 rows come in groups of 16.
// The GEMV of packed rows takes kGemvTileBytes in whole tiles of kGemvRowAlign rows; on a
// ThreadTeam (`on_team`) one kGemvRowAlign tile each, which the team's shrinking claims join
// (RunTiles).
int64_t ProductTileRows(const Product& p, int64_t n_tokens, bool on_team) {
  const bool packed = p.plan.conversion == RowConversion::kPacked;
  int64_t row_align = 4;
  int64_t tile_bytes = kTileBytes;
  const bool float_groups = packed && (p.w->type == GgmlType::kBF16 ||
                                       p.w->type == GgmlType::kF16 || p.w->type == GgmlType::kF32);
  if (packed && n_tokens == 1) {
    row_align = kGemvRowAlign;
    tile_bytes = on_team ? 0 : kGemvTileBytes;
  } else if (p.plan.conversion == RowConversion::kI16 || float_groups) {
    row_align = 32;
  } else if (packed && p.w->type == GgmlType::kQ8_0) {
    row_align = 16;
  }
  return TileRows(p.w->rows, TileRowBytes(*p.w, p.plan.conversion), row_align, tile_bytes);
}

// Sets each product's tile_rows and first_tile (tiles numbered across the products in order);
// returns the number of tiles.
int64_t NumberTiles(std::span<Product> products, int64_t n_tokens, bool on_team) {
  int64_t n_tiles = 0;
  for (Product& p : products) {
    p.tile_rows = ProductTileRows(p, n_tokens, on_team);
    p.first_tile = n_tiles;
    n_tiles += (p.w->rows + p.tile_rows - 1) / p.tile_rows;
  }
  return n_tiles;
}

// Runs tiles [begin, end) (RunProducts' numbering), each with its product's kernel. Where a
// kernel reads the rows as they are (no conversion) and takes every token in one chunk, the
// run's consecutive tiles of one product go to one kernel call (one longer stream per row
// group: a team's claims of many tiles).
void RunTiles(std::span<const Product> products, const Activations& acts, int64_t n_tokens,
              int64_t chunk, int64_t begin, int64_t end, TileBuffers& buffers) {
  for (int64_t i = begin; i < end;) {
    const Product& p =
        *(std::upper_bound(products.begin(), products.end(), i,
                           [](int64_t v, const Product& q) { return v < q.first_tile; }) -
          1);
    const WeightView& w = *p.w;
    const bool join = n_tokens <= chunk && InPlace(p.plan.conversion);
    const int64_t p_tiles = (w.rows + p.tile_rows - 1) / p.tile_rows;
    const int64_t last = join ? std::min(end, p.first_tile + p_tiles) : i + 1;
    const int64_t r0 = (i - p.first_tile) * p.tile_rows;
    const int64_t nr = std::min((last - p.first_tile) * p.tile_rows, w.rows) - r0;
    int64_t stride = w.row_bytes;
    const uint8_t* wt = ConvertTile(w, p.plan, r0, nr, buffers, &stride);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += chunk) {
      const int64_t nt = std::min(chunk, n_tokens - t0);
      p.plan.kernel.fn(wt, stride, nr, acts, t0, nt, p.y + t0 * w.rows + r0, w.rows);
    }
    i = last;
  }
}

// Runs the products (same cols; plans that read the same activation format, prepared once in
// acts, and the same max_chunk) in one parallel loop over all their row tiles, each tile with its
// product's kernel: on `team` in its claims, else on oneTBB one tile per task (grain 1, simple
// partitioner: RunTiles then never joins tiles).
void RunProducts(std::span<Product> products, const Activations& acts, int64_t n_tokens,
                 ThreadTeam* team) {
  const int64_t n_tiles = NumberTiles(products, n_tokens, team != nullptr);
  // A register tile walks its rows for one token chunk (about kChunkBytes of fp32 activations,
  // kept in cache). The token-lane kernel walks the whole tile once per group of 16 tokens
  // instead, so it takes every token in one call and computes its weights' start values once
  // per tile.
  const int64_t cols = products.front().w->cols;
  const int64_t chunk =
      products.front().plan.kernel.act == ActFormat::kQ8Lanes
          ? n_tokens
          : std::min(products.front().max_chunk,
                     std::max<int64_t>(16, kChunkBytes / std::max<int64_t>(1, cols * 4)) / 16 * 16);
  if (team != nullptr) {
    team->ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int) {
      thread_local TileBuffers buffers;  // this thread's converted rows (grow-only)
      RunTiles(products, acts, n_tokens, chunk, begin, end, buffers);
    });
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, n_tiles, 1),
      [&](const tbb::blocked_range<int64_t>& range) {
        thread_local TileBuffers buffers;  // this worker's converted rows (grow-only)
        RunTiles(products, acts, n_tokens, chunk, range.begin(), range.end(), buffers);
      },
      tbb::simple_partitioner());
}

// The bytes of tiles [begin, end) of `products` (RunProducts' numbering), up to kPrefetchBytes
// and kMaxPrefetchRanges ranges, in ranges; returns their count. Tiles converted per call are
// skipped.
int TileBytes(std::span<const Product> products, int64_t begin, int64_t end,
              ThreadTeam::ByteRange (&ranges)[ThreadTeam::kMaxPrefetchRanges]) {
  int count = 0;
  int64_t budget = kPrefetchBytes;
  for (const Product& p : products) {
    const int64_t p_tiles = (p.w->rows + p.tile_rows - 1) / p.tile_rows;
    const int64_t b = std::max(begin, p.first_tile);
    const int64_t e = std::min(end, p.first_tile + p_tiles);
    if (b >= e || !InPlace(p.plan.conversion)) continue;
    if (budget <= 0 || count == ThreadTeam::kMaxPrefetchRanges) break;
    const int64_t r0 = (b - p.first_tile) * p.tile_rows;
    const int64_t r1 = std::min((e - p.first_tile) * p.tile_rows, p.w->rows);
    const int64_t bytes = std::min(budget, (r1 - r0) * TileRowBytes(*p.w, p.plan.conversion));
    ranges[count++] = {InPlaceRows(*p.w, p.plan.conversion, r0), bytes};
    budget -= bytes;
  }
  return count;
}

// Hands each member of `team` the weight bytes of its first claim (ThreadTeam::FirstClaim) in the
// first loop MatMulSameInput would run for `next` (the products of its first matrix's group).
// Per call, on the caller, for teams of 2+ (a team of one never waits); allocates only `next`.
void PostPrefetch(std::vector<Product> next, int64_t n_tokens, ThreadTeam& team) {
  if (next.empty()) return;
  const Product first = next.front();
  std::erase_if(next, [&](const Product& p) {
    return p.plan.kernel.act != first.plan.kernel.act || p.max_chunk != first.max_chunk;
  });
  const int64_t n_tiles = NumberTiles(next, n_tokens, true);
  for (int m = 0; m < team.size(); ++m) {
    const auto [begin, end] = team.FirstClaim(n_tiles, m);
    ThreadTeam::ByteRange ranges[ThreadTeam::kMaxPrefetchRanges];
    const int count = TileBytes(next, begin, end, ranges);
    team.SetPrefetch(m, std::span<const ThreadTeam::ByteRange>(ranges, count));
  }
}

// The most tokens one kernel call takes. Batch-invariant calls give the K-quants' file-row
// kernels at most 8 (their RowsK switches to TileK above 8); every other kernel sums a token
// alike at any count.
int64_t MaxTokenChunk(const Plan& plan, GgmlType type, bool batch_invariant) {
  const bool k_quant = TypeTraits(type).block_size == 256;
  if (batch_invariant && plan.conversion == RowConversion::kNone && k_quant) return 8;
  return std::numeric_limits<int64_t>::max();
}

// Each matrix's plan (ys: the outputs, or empty for plans only).
std::vector<Product> MakeProducts(std::span<const WeightView* const> ws, std::span<float* const> ys,
                                  int64_t n_tokens, SimdLevel level, const MatMulOptions& options) {
  std::vector<Product> products;
  for (size_t i = 0; i < ws.size(); ++i) {
    if (ws[i]->rows <= 0) continue;
    const Plan plan = MakePlan(level, ws[i]->type, n_tokens, options.f16, ws[i]->packed != nullptr,
                               options.batch_invariant);
    products.push_back({ws[i], ys.empty() ? nullptr : ys[i], plan,
                        MaxTokenChunk(plan, ws[i]->type, options.batch_invariant)});
  }
  return products;
}

// Per calling thread and reused across calls (the buffers only grow): no allocation per call
// once the largest shape has been seen. One set suffices: a call is done with them when its
// parallel loop returns, before MatMulSameInput goes on to the next type. (The workers see this
// thread's buffers through the Activations view they are handed.)
PreparedActivations& ThreadActivations() {
  thread_local PreparedActivations prepared;
  return prepared;
}

}  // namespace

void MatMul(const WeightView& w, const float* x, int64_t n_tokens, float* y,
            const MatMulOptions& options) {
  const WeightView* ws[] = {&w};
  float* ys[] = {y};
  MatMulSameInput(ws, x, n_tokens, ys, options);
}

void MatMulSameInput(std::span<const WeightView* const> ws, const float* x, int64_t n_tokens,
                     std::span<float* const> ys, const MatMulOptions& options) {
  assert(ws.size() == ys.size());
  if (n_tokens <= 0) return;
  const SimdLevel level = EffectiveSimdLevel(options);
  // Each matrix's plan; the matrices whose plans read the same activation format with the same
  // token chunk limit (at batch 1, e.g., every packed block-quantized type but Q8_0) share one
  // preparation and one parallel loop.
  std::vector<Product> products = MakeProducts(ws, ys, n_tokens, level, options);
  if (options.team != nullptr && options.team->size() > 1 && !options.prefetch_next.empty()) {
    PostPrefetch(MakeProducts(options.prefetch_next, {}, n_tokens, level, options), n_tokens,
                 *options.team);
  }
  for (auto rest = products.begin(); rest != products.end();) {
    const Product first = *rest;
    const auto group_end = std::stable_partition(rest, products.end(), [&](const Product& p) {
      return p.plan.kernel.act == first.plan.kernel.act && p.max_chunk == first.max_chunk;
    });
    PreparedActivations& acts = ThreadActivations();
    Prepare(first.plan.kernel.act, level, x, n_tokens, first.w->cols, options.team, acts);
    RunProducts(std::span<Product>(rest, group_end), acts.view, n_tokens, options.team);
    rest = group_end;
  }
}

namespace internal {

void Bf16PairsPortable(const float* x, int64_t cols, uint32_t* dst, int64_t stride) {
  for (int64_t c = 0; c < cols; c += 2) {
    const uint32_t hi = c + 1 < cols ? Fp32ToBf16(x[c + 1]) : 0;
    dst[c / 2 * stride] = Fp32ToBf16(x[c]) | hi << 16;
  }
}

// kQ8X16: one token's kQ8 codes (ld a multiple of 512) with each 512's 4-byte groups
// interleaved by block (matmul_kernels.h), the scaled block sums xs and the half-block sums xsum.
void InterleaveX16Portable(int8_t* xq, const float* xd, int64_t ld, float* xs, int16_t* xsum) {
  int8_t group[512];
  for (int64_t g = 0; g < ld / 512; ++g) {
    int8_t* q = xq + g * 512;
    std::memcpy(group, q, 512);
    for (int64_t b = 0; b < 16; ++b) {
      int32_t half[2] = {0, 0};
      for (int64_t i = 0; i < 32; ++i) half[i / 16] += group[32 * b + i];
      xsum[32 * g + 2 * b] = static_cast<int16_t>(half[0]);
      xsum[32 * g + 2 * b + 1] = static_cast<int16_t>(half[1]);
      xs[16 * g + b] = xd[16 * g + b] * static_cast<float>(half[0] + half[1]);
      for (int64_t v = 0; v < 8; ++v) std::memcpy(q + 64 * v + 4 * b, group + 32 * b + 4 * v, 4);
    }
  }
}

void QuantizeQ8Portable(const float* x, int64_t cols, int64_t ld, int8_t* xq, float* xd) {
  for (int64_t b = 0; b < ld / kQ8Block; ++b) {
    const int64_t c0 = b * kQ8Block;
    const int64_t n = std::clamp<int64_t>(cols - c0, 0, kQ8Block);
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[c0 + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    xd[b] = d;
    for (int64_t i = 0; i < kQ8Block; ++i) {
      // Adding and subtracting 1.5 * 2^23 rounds to nearest even (|x * id| <= 127).
      const float v = i < n ? x[c0 + i] * id : 0.0f;
      const float q = (v + 12582912.0f) - 12582912.0f;
      xq[c0 + i] = static_cast<int8_t>(q);
    }
  }
}

}  // namespace internal
}  // namespace pagoda::cpu::mm
