#include "kernels/neuron/bucketing.h"

#include <algorithm>

namespace pagoda::neuron {
namespace {

// Index of the program minimising (size(p), max_ctx_blocks) among those `fits`; -1 if none.
template <typename Fits, typename Size>
int PickSmallest(const std::vector<ManifestProgram>& programs, Fits fits, Size size) {
  int best = -1;
  for (size_t i = 0; i < programs.size(); ++i) {
    const ManifestProgram& p = programs[i];
    if (!fits(p)) continue;
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const ManifestProgram& b = programs[best];
    if (size(p) < size(b) || (size(p) == size(b) && p.max_ctx_blocks < b.max_ctx_blocks)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

}  // namespace

int PickDecodeProgram(const std::vector<ManifestProgram>& programs, int32_t n_seqs,
                      int32_t ctx_blocks) {
  return PickSmallest(
      programs,
      [&](const ManifestProgram& p) {
        return p.is_decode() && p.max_seqs >= n_seqs && p.max_ctx_blocks >= ctx_blocks;
      },
      [](const ManifestProgram& p) { return p.max_seqs; });
}

int PickPrefillProgram(const std::vector<ManifestProgram>& programs, int32_t n_tokens,
                       int32_t ctx_blocks) {
  return PickSmallest(
      programs,
      [&](const ManifestProgram& p) {
        return !p.is_decode() && p.max_tokens >= n_tokens && p.max_ctx_blocks >= ctx_blocks;
      },
      [](const ManifestProgram& p) { return p.max_tokens; });
}

int32_t MaxContextBlocks(const std::vector<ManifestProgram>& programs) {
  int32_t decode = 0, prefill = 0;
  for (const ManifestProgram& p : programs) {
    int32_t& m = p.is_decode() ? decode : prefill;
    m = std::max(m, p.max_ctx_blocks);
  }
  return std::min(decode, prefill);
}

int32_t MaxDecodeSeqs(const std::vector<ManifestProgram>& programs, int32_t ctx_blocks) {
  int32_t n = 0;
  for (const ManifestProgram& p : programs) {
    if (p.is_decode() && p.max_ctx_blocks >= ctx_blocks) n = std::max(n, p.max_seqs);
  }
  return n;
}

int32_t MaxPrefillTokens(const std::vector<ManifestProgram>& programs, int32_t ctx_blocks) {
  int32_t n = 0;
  for (const ManifestProgram& p : programs) {
    if (!p.is_decode() && p.max_ctx_blocks >= ctx_blocks) n = std::max(n, p.max_tokens);
  }
  return n;
}

}  // namespace pagoda::neuron
