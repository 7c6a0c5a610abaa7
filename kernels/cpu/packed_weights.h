// PackedWeights: the CPU backend's load-time packed copies of a model's matrices
// (cpu::mm::PackRows: the rows of every block-quantized type in the layout their
// kernels read fastest). The file's rows stay where they are (embedding lookups, the
// portable level and big batches read them); the copies cost as much memory again as those
// matrices.
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
  // outlive the returned views). Throws std::bad_alloc.
  ModelWeights Pack(const ModelWeights& weights, SimdLevel level);
  int64_t bytes() const { return bytes_; }  // of all copies

 private:
  void PackView(WeightView& view, SimdLevel level);
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<uint8_t, Free>> buffers_;
  int64_t bytes_ = 0;
};

}  // namespace pagoda::cpu
