// The AMX Q8_0 kernel (X86Q8AmxKernel, matmul_kernels.h): packed Q8_0 rows x kQ8Amx
// activations, every output bit for bit the packed-row and token-lane kernels' (GroupQ8Rows and
// TileQ8Lanes in matmul_x86.cc).
//
// Per group of 16 packed rows, up to 16 tokens and Q8_0 block b, one tile product
//   C[token][row] = sum_k x[token][32 b + k] * (w[row][32 b + k] + 128)        (tdpbsud)
// with A = the tokens' 32 codes of block b (kQ8 rows, a tile of `tokens` rows x 32 bytes at the
// activations' row stride) and B = the group's block (8 x 64 bytes of biased codes: the packed
// layout is already AMX's B layout). The token's start value -128 * sum(x) (xc) makes C the
// exact integer dot product, the same integer as the VNNI kernels' chains; each token then takes
// acc = fma(float(C + start), xd * wd, acc) block after block (16 rows in the lanes) as
// GroupQ8Rows does, in the same order and with the same operands.
//
// Tile registers: 0, 3, 4, 5 = C (a ring of four blocks, so the products run ahead of the
// stores read back), 1 = A, 2 = B. A partial token group uses a second configuration with
// fewer A / C rows (a tile load never reads past the last token). The configuration is loaded
// on entry and the tile state released on return.
#include "kernels/cpu/matmul/matmul_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/matmul/matmul_tiles.h"

#define PAGODA_MM_AMX                                                       \
  __attribute__((                                                           \
      target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni," \
             "amx-tile,amx-int8")))
// The pieces of the kernel loop: inlined, so its accumulators stay in registers.
#define PAGODA_MM_AMX_INLINE PAGODA_MM_AMX inline __attribute__((always_inline))

namespace pagoda::cpu::mm::internal {
namespace {

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// C (0, 3, 4, 5): `tokens` x 16 int32; A (1): `tokens` x 32 int8; B (2): 8 x 64 bytes.
TileConfig MakeConfig(int tokens) {
  TileConfig c;
  for (int i : {0, 3, 4, 5}) {
    c.rows[i] = static_cast<uint8_t>(tokens);
    c.colsb[i] = 64;
  }
  c.rows[1] = static_cast<uint8_t>(tokens);
  c.colsb[1] = 32;
  c.rows[2] = 8;
  c.colsb[2] = 64;
  return c;
}

// C of a block into buffer c, in C tile register kSlot (0..3: tiles 0, 3, 4, 5).
template <int kSlot>
PAGODA_MM_AMX_INLINE void BlockProduct(const int8_t* x, int64_t ld, const uint8_t* blk,
                                       int32_t (*c)[16]) {
  // The tile intrinsics take their register numbers as literal tokens.
  _tile_loadd(1, x, ld);
  _tile_loadd(2, blk, 64);
  if constexpr (kSlot == 0) {
    _tile_zero(0);
    _tile_dpbsud(0, 1, 2);
    _tile_stored(0, c, 64);
  } else if constexpr (kSlot == 1) {
    _tile_zero(3);
    _tile_dpbsud(3, 1, 2);
    _tile_stored(3, c, 64);
  } else if constexpr (kSlot == 2) {
    _tile_zero(4);
    _tile_dpbsud(4, 1, 2);
    _tile_stored(4, c, 64);
  } else {
    _tile_zero(5);
    _tile_dpbsud(5, 1, 2);
    _tile_stored(5, c, 64);
  }
}

// A token group's start values and scales: xc[t * stride + b], xd[t * stride + b] for its 16
// tokens (a partial group's missing ones: zero).
struct TokenTerms {
  const int32_t* xc;
  const float* xd;
  int64_t stride;
};

// acc[t] = fma(float(c[t] + start), xd * wd, acc[t]) for the 16 tokens of block b.
PAGODA_MM_AMX_INLINE void Accumulate(const int32_t (*c)[16], const TokenTerms& x,
                                     const uint8_t* blk, int64_t b, __m512 (&acc)[16]) {
  const __m512 wd =
      _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 512)));
  PAGODA_UNROLL for (int t = 0; t < 16; ++t) {
    const int64_t i = t * x.stride + b;
    const __m512i isum = _mm512_add_epi32(_mm512_load_si512(c[t]), _mm512_set1_epi32(x.xc[i]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(_mm512_set1_ps(x.xd[i]), wd),
                             acc[t]);
  }
}

// Blocks whose products are in flight before the first is accumulated: a tile store takes a
// while to reach the loads that read it back (one block of lag left the kernel waiting on it).
constexpr int64_t kLag = 2;

// What a group's steps share: the group's packed blocks, the tokens' codes (row stride ld) and
// terms, and the buffers the C tiles are stored to.
struct GroupArgs {
  const uint8_t* g;
  int64_t nb;
  const int8_t* xq;
  int64_t ld;
  const TokenTerms& x;
  int32_t (*c)[16][16];
};

// Step b: stores block b's product (slot kSlot = b % 4) and accumulates block b - kLag's.
template <int kSlot>
PAGODA_MM_AMX_INLINE void Step(const GroupArgs& p, int64_t b, __m512 (&acc)[16]) {
  if (b < p.nb) BlockProduct<kSlot>(p.xq + 32 * b, p.ld, p.g + b * kQ8GroupBlockBytes, p.c[kSlot]);
  const int64_t done = b - kLag;
  if (done >= 0 && done < p.nb) {
    Accumulate(p.c[(kSlot + 4 - kLag) % 4], p.x, p.g + done * kQ8GroupBlockBytes, done, acc);
  }
}

// One group of packed rows (nr <= 16 of them stored) x the tokens of x (codes from xq, row
// stride ld; nt <= 16 stored, and the loaded configuration has nt A / C rows).
PAGODA_MM_AMX void GroupQ8Amx(const uint8_t* g, int64_t nb, const int8_t* xq, int64_t ld,
                              const TokenTerms& x, int64_t nt, float* y, int64_t ldy, int64_t nr) {
  alignas(64) int32_t c[4][16][16];
  if (nt < 16) std::memset(c, 0, sizeof(c));  // rows past nt are never stored to: 0
  __m512 acc[16];
  PAGODA_UNROLL for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_ps();
  const GroupArgs p{g, nb, xq, ld, x, c};
  for (int64_t b = 0; b < nb + kLag; b += 4) {
    Step<0>(p, b, acc);
    Step<1>(p, b + 1, acc);
    Step<2>(p, b + 2, acc);
    Step<3>(p, b + 3, acc);
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << nr) - 1);
  for (int64_t t = 0; t < nt; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows, acc[t]);
}

// Row r of a group is row 16 * group + r; ws is the packed bytes per row (groups are 16 * ws).
PAGODA_MM_AMX void BlockQ8Amx(const uint8_t* w, int64_t ws, int64_t nr, const Activations& a,
                              int64_t t0, int64_t nt, float* y, int64_t ldy) {
  const int64_t nb = a.cols / 32, nbx = a.ld / 32;
  const TileConfig full = MakeConfig(16), tail = MakeConfig(static_cast<int>(nt % 16));
  thread_local std::vector<int32_t> tail_xc;  // a partial group's terms, zero padded
  thread_local std::vector<float> tail_xd;
  _tile_loadconfig(&full);
  for (int64_t t = 0; t < nt; t += 16) {
    const int64_t n = std::min<int64_t>(16, nt - t), first = (t0 + t) * nbx;
    TokenTerms x{a.xc + first, a.xd + first, nbx};
    if (n < 16) {
      tail_xc.assign(static_cast<size_t>(16 * nbx), 0);
      tail_xd.assign(static_cast<size_t>(16 * nbx), 0.0f);
      std::copy(a.xc + first, a.xc + first + n * nbx, tail_xc.begin());
      std::copy(a.xd + first, a.xd + first + n * nbx, tail_xd.begin());
      x = {tail_xc.data(), tail_xd.data(), nbx};
      _tile_loadconfig(&tail);
    }
    for (int64_t r = 0; r < nr; r += 16) {
      GroupQ8Amx(w + r * ws, nb, a.xq + (t0 + t) * a.ld, a.ld, x, n, y + t * ldy + r, ldy,
                 std::min<int64_t>(16, nr - r));
    }
  }
  _tile_release();
}

}  // namespace

Kernel X86Q8AmxKernel() { return {BlockQ8Amx, ActFormat::kQ8Amx, "amx/q8_0"}; }

}  // namespace pagoda::cpu::mm::internal

#pragma GCC diagnostic pop

#else  // not x86-64 GCC

namespace pagoda::cpu::mm::internal {
Kernel X86Q8AmxKernel() { return {}; }
}  // namespace pagoda::cpu::mm::internal

#endif
