// PackedWeights: the CPU backend's load-time packed copies of a model's matrices
// (cpu::mm::PackRows: the rows of every block-quantized type but Q8_0 in the layout their
// kernels read fastest). The file's rows stay where they are (embedding lookups, the
// portable level and big batches read them); the copies cost as much memory again as those
// matrices.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "model/weights.h"

namespace pagoda::cpu {

class PackedWeights {
 public:
  // `weights`' views, each matrix of a packable type with `packed` pointing at a copy owned by
  // this object (so it must outlive the returned views). Throws std::bad_alloc.
  ModelWeights Pack(const ModelWeights& weights);
  int64_t bytes() const { return bytes_; }  // of all copies

 private:
  void PackView(WeightView& view);
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<uint8_t, Free>> buffers_;
  int64_t bytes_ = 0;
};

}  // namespace pagoda::cpu
