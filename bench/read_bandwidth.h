// Streaming-read bandwidth probe: the ceiling a memory-bound kernel is compared with.
//
// A page-aligned buffer of floats (first touched by the TBB threads that later read it) is summed
// by the current TBB arena in 16 MiB chunks with wide vector loads and 8 independent
// accumulators: AVX-512 (64-byte loads) or AVX2 when the CPU has them (runtime dispatch, decided
// once), a portable loop otherwise.
#pragma once

#include <cstddef>

namespace pagoda::cpu {

class ReadBuffer {
 public:
  explicit ReadBuffer(size_t bytes);
  ~ReadBuffer();
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;

  size_t bytes() const { return n_ * sizeof(float); }
  // One parallel pass over the whole buffer; returns the sum (so it cannot be optimised away).
  double Sum() const;
  // Best GB/s (1e9 bytes per second) of `reps` passes.
  double BestGbps(int reps) const;
  static const char* KernelName();

 private:
  float* data_ = nullptr;
  size_t n_ = 0;
};

}  // namespace pagoda::cpu
