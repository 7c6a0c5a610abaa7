// Register-tile walkers shared by the x86 MatMul kernels (matmul_x86.cc, matmul_quant_x86.cc).
// A block of nr rows x nt tokens is cut into tiles of at most MaxR rows x MaxT tokens; each tile
// calls a kernel instantiated for its exact size, so the kernel's accumulators stay in registers.
#pragma once

#include <algorithm>
#include <cstdint>

// Put before the loops over a tile's rows, tokens and parts. Fully unrolled, the accumulator
// arrays become registers; otherwise GCC 12 keeps them in memory and loads / stores every
// accumulator on each column step (measured: a bf16 GEMM at a quarter of the vdpbf16ps peak).
#define PAGODA_UNROLL _Pragma("GCC unroll 16")

namespace pagoda::cpu::mm::internal {

// Calls fn.template operator()<R, T>() for R = rr <= MaxR, T = tt <= MaxT.
template <int MaxR, int MaxT, typename Fn>
inline void ForTile(int64_t rr, int64_t tt, Fn&& fn) {
  if constexpr (MaxR > 1) {
    if (rr < MaxR) return ForTile<MaxR - 1, MaxT>(rr, tt, fn);
  }
  if constexpr (MaxT > 1) {
    if (tt < MaxT) return ForTile<MaxR, MaxT - 1>(rr, tt, fn);
  }
  fn.template operator()<MaxR, MaxT>();
}

// Walks a block in R x T tiles (rows outer, tokens inner); tile(r, t, R, T) via ForTile.
// With at most MaxT tokens (GEMV, small batches) the rows go one at a time: the weights are then
// read as one sequential stream, which the hardware prefetcher follows; MaxR interleaved row
// streams defeated it (Q8_0 GEMV from DRAM, 2 threads: 9.8 GB/s with 4 rows, 31 GB/s with 1).
template <int MaxR, int MaxT, typename Tile>
inline void ForEachTile(int64_t nr, int64_t nt, Tile&& tile) {
  if (nt <= MaxT) {
    for (int64_t r = 0; r < nr; ++r) {
      ForTile<1, MaxT>(1, nt, [&]<int R, int T>() { tile.template operator()<R, T>(r, 0); });
    }
    return;
  }
  for (int64_t r = 0; r < nr; r += MaxR) {
    for (int64_t t = 0; t < nt; t += MaxT) {
      ForTile<MaxR, MaxT>(std::min<int64_t>(MaxR, nr - r), std::min<int64_t>(MaxT, nt - t),
                          [&]<int R, int T>() { tile.template operator()<R, T>(r, t); });
    }
  }
}

}  // namespace pagoda::cpu::mm::internal
