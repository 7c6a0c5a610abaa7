#include "kernels/cpu/packed_weights.h"

#include <sys/mman.h>

#include <new>

#include "kernels/cpu/matmul/matmul.h"

namespace pagoda::cpu {

// Each copy is 2 MiB-aligned and asks for transparent huge pages: the decode GEMV streams
// through all of them every token, and fewer TLB misses help it keep up with memory.
void PackedWeights::PackView(WeightView& view, SimdLevel level) {
  if (view.data == nullptr || view.rows <= 0 || !mm::ReadsPackedRows(view.type, level)) return;
  constexpr size_t kHuge = size_t{2} << 20;
  const int64_t bytes = mm::PackedBytes(view.type, view.rows, view.cols);
  const size_t size = (static_cast<size_t>(bytes) + kHuge - 1) / kHuge * kHuge;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kHuge, size));
  if (p == nullptr) throw std::bad_alloc();
  buffers_.emplace_back(p);
  madvise(p, size, MADV_HUGEPAGE);  // advisory: ignored where THP is off
  mm::PackRows(view, p);
  view.packed = p;
  bytes_ += bytes;
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
