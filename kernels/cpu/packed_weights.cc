#include "kernels/cpu/packed_weights.h"

#include <sys/mman.h>

#include <cstring>
#include <new>

#include "kernels/cpu/matmul/matmul.h"

namespace pagoda::cpu {

// Each copy is 2 MiB-aligned and asks for transparent huge pages: the decode GEMV streams
// through all of them every token, and fewer TLB misses help it keep up with memory.
uint8_t* PackedWeights::Allocate(int64_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t size = (static_cast<size_t>(bytes) + kHuge - 1) / kHuge * kHuge;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kHuge, size));
  if (p == nullptr) throw std::bad_alloc();
  buffers_.emplace_back(p);
  madvise(p, size, MADV_HUGEPAGE);  // advisory: ignored where THP is off
  bytes_ += bytes;
  return p;
}

// F16 and F32 matrices below AVX-512 keep their layout: the copy only moves them off the file
// mapping's 4 KiB pages. bench verify --tokens 1 on a Zen 5 host (F16 medium model, interleaved,
// 55-75 GB/s, a four-chain trial of the GEMV): 36.0-38.7 ms a step from the copy, 46.8-50.4 ms from
// the mapping. A plain copy of BF16 rows ran slower (the dot-product kernel, --pack-weights on /
// off: 58.8 / 43.2, 57.9 / 45.8, 55.9 / 44.5 ms); BF16 now gets PackRows' groups of 16 rows where
// the level reads them (below), and so does F16 from AVX-512 on (bench model medium32k-f16
// --interleave-bandwidth, decode fraction of the read bandwidth, plain copy / groups, 3 rounds:
// 0.818 / 0.932, 0.759 / 0.983, 1.170 / 1.315 as the host read 51-28 GB/s). Its int16 batches
// then convert the file's rows. F32 alike: bench model medium32k-f32 --interleave-bandwidth,
// decode fraction, 2 interleaved rounds at 30-32 GB/s, mapped rows / plain copy / groups of 16
// rows (X86F32PackedKernel): 0.776, 0.736 / 0.815, 0.872 and 0.719, 0.677 / 0.772, 0.744 / 1.052,
// 1.047 (the row kernel avx512/f32 for the first two); prefill 512 from 59-60 to 144 tok/s.
void PackedWeights::PackView(WeightView& view, SimdLevel level) {
  if (view.data == nullptr || view.rows <= 0) return;
  const bool packs = mm::ReadsPackedRows(view.type, level);
  if ((view.type == GgmlType::kF16 || view.type == GgmlType::kF32) && !packs) {
    const int64_t bytes = view.rows * view.row_bytes;
    uint8_t* p = Allocate(bytes);
    std::memcpy(p, view.data, static_cast<size_t>(bytes));
    view.data = p;
    return;
  }
  if (!packs) return;
  uint8_t* p = Allocate(mm::PackedBytes(view.type, view.rows, view.cols));
  mm::PackRows(view, p);
  view.packed = p;
}

ModelWeights PackedWeights::Pack(const ModelWeights& weights, SimdLevel level) {
  ModelWeights out = weights;
  for (LayerWeights& l : out.layers) {
    for (WeightView* v : l.matrices()) PackView(*v, level);
  }
  PackView(out.output, level);
  return out;
}

}  // namespace pagoda::cpu
