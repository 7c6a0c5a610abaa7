#include "kernels/neuron/bucketing.h"

#include <algorithm>
#include <tuple>

namespace pagoda::neuron {
namespace {

// Index of the program minimising key(p) (a std::tuple, compared lexicographically) among those
// that `fits`; -1 if none.
template <typename Fits, typename Key>
int PickSmallest(const std::vector<ManifestProgram>& programs, Fits fits, Key key) {
  int best = -1;
  for (size_t i = 0; i < programs.size(); ++i) {
    if (!fits(programs[i])) continue;
    if (best < 0 || key(programs[i]) < key(programs[best])) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace

int PickDecodeProgram(const std::vector<ManifestProgram>& programs, int32_t n_seqs,
                      int32_t query_len, int32_t ctx_blocks) {
  return PickSmallest(
      programs,
      [&](const ManifestProgram& p) {
        return p.is_decode() && p.tokens_per_seq >= query_len && p.max_seqs >= n_seqs &&
               p.max_ctx_blocks >= ctx_blocks;
      },
      [](const ManifestProgram& p) {
        return std::tuple(p.tokens_per_seq, p.max_seqs, p.max_ctx_blocks);
      });
}

int PickPrefillProgram(const std::vector<ManifestProgram>& programs, int32_t n_tokens,
                       int32_t ctx_blocks) {
  return PickSmallest(
      programs,
      [&](const ManifestProgram& p) {
        return !p.is_decode() && p.max_tokens >= n_tokens && p.max_ctx_blocks >= ctx_blocks;
      },
      [](const ManifestProgram& p) { return std::tuple(p.max_tokens, p.max_ctx_blocks); });
}

int32_t MaxContextBlocks(const std::vector<ManifestProgram>& programs) {
  int32_t decode = 0, prefill = 0;
  for (const ManifestProgram& p : programs) {
    int32_t& m = p.is_decode() ? decode : prefill;
    m = std::max(m, p.max_ctx_blocks);
  }
  return std::min(decode, prefill);
}

int32_t MaxTokensPerSeq(const std::vector<ManifestProgram>& programs, int32_t ctx_blocks) {
  int32_t n = 0;
  for (const ManifestProgram& p : programs) {
    if (p.is_decode() && p.max_ctx_blocks >= ctx_blocks) n = std::max(n, p.tokens_per_seq);
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
