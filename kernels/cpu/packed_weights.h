// PackedWeights: the CPU backend's load-time copies of a model's matrices, in huge pages:
// the rows of every block-quantized type, BF16 and F16 in the layout their kernels read fastest
// (cpu::mm::PackRows; WeightView::packed, the file's rows staying where they are for embedding
// lookups, the portable level and big batches), and, below the packed F16 kernel's level
// (AVX-512), F16 rows as they are (WeightView::data then points at the copy). The copies cost as
// much memory again as those matrices (the file's pages stay in the page cache, reclaimable).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/cpu/simd_level.h"
#include "model/weights.h"

namespace pagoda::cpu {

class PackedWeights {
 public:
  // `weights`' views, each matrix of a type with packed kernels at `level` (an effective level,
  // mm::ReadsPackedRows) with `packed` pointing at a copy owned by this object (so it must
  // outlive the returned views), each other F16 matrix with `data` pointing at one.
  // Throws std::bad_alloc.
  ModelWeights Pack(const ModelWeights& weights, SimdLevel level);
  int64_t bytes() const { return bytes_; }  // of all copies

 private:
  void PackView(WeightView& view, SimdLevel level);
  uint8_t* Allocate(int64_t bytes);  // 2 MiB-aligned, huge pages asked for, owned here
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<uint8_t, Free>> buffers_;
  int64_t bytes_ = 0;
};

}  // namespace pagoda::cpu
