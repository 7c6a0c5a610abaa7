// Shared helpers for the attention kernel tests: a randomly filled paged KV pool in any dtype
// with unused blocks poisoned with NaN, shuffled block tables, and fp64 readers that decode the
// stored elements exactly as the kernels do (so references see the same quantized values).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention/kv_convert.h"
#include "kernels/cpu/attention/paged_kv.h"

namespace pagoda::cpu::testing {

inline float Normal(std::mt19937& rng, float stddev = 1.0f) {
  return std::normal_distribution<float>(0.0f, stddev)(rng);
}
inline int Uniform(std::mt19937& rng, int lo, int hi) {  // inclusive
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}
inline bool Chance(std::mt19937& rng, double p) { return std::bernoulli_distribution(p)(rng); }
template <typename T>
const T& Pick(std::mt19937& rng, const std::vector<T>& v) {
  return v[static_cast<size_t>(Uniform(rng, 0, static_cast<int>(v.size()) - 1))];
}

// Owns K and V storage for a PagedKvView.
struct TestPool {
  std::vector<uint8_t> k, v;
  PagedKvView view;

  TestPool(KvDtype dtype, int32_t num_blocks, int32_t n_kv, int32_t bs, int32_t d,
           float k_scale = 1.0f, float v_scale = 1.0f) {
    view.dtype = dtype;
    view.num_blocks = num_blocks;
    view.n_kv_heads = n_kv;
    view.block_size = bs;
    view.head_dim = d;
    view.k_scale = k_scale;
    view.v_scale = v_scale;
    const size_t bytes = static_cast<size_t>(num_blocks) * n_kv * bs * d * KvDtypeSize(dtype);
    k.assign(bytes, 0);
    v.assign(bytes, 0);
    view.k = k.data();
    view.v = v.data();
  }
  int64_t block_elems() const {
    return static_cast<int64_t>(view.n_kv_heads) * view.block_size * view.head_dim;
  }
  // Writes logical value x at element e of K (or V) through the dtype's encoder.
  void Set(bool is_v, int64_t e, float x) {
    const float scale = is_v ? view.v_scale : view.k_scale;
    uint8_t* base = (is_v ? v : k).data() + e * KvDtypeSize(view.dtype);
    kv::EncodeRow(view.dtype, &x, scale, base, 1);
  }
  // The logical value the kernels read at element e (decode, fp8: times 1/scale in fp32).
  double Get(bool is_v, int64_t e) const {
    const float scale = is_v ? view.v_scale : view.k_scale;
    const uint8_t* base = (is_v ? v : k).data() + e * KvDtypeSize(view.dtype);
    float out = 0.0f;
    kv::DecodeRow(view.dtype, base, 1.0f / scale, &out, 1);
    return out;
  }
  void FillBlock(int32_t block, std::mt19937& rng, float stddev) {
    for (int64_t i = 0; i < block_elems(); ++i) {
      Set(false, block * block_elems() + i, Normal(rng, stddev));
      Set(true, block * block_elems() + i, Normal(rng, stddev));
    }
  }
  void PoisonBlock(int32_t block) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 0; i < block_elems(); ++i) {
      Set(false, block * block_elems() + i, nan);
      Set(true, block * block_elems() + i, nan);
    }
  }
};

// A shuffled permutation of physical block ids, handed out to sequences so tables are
// non-contiguous and out of order.
struct BlockAllocator {
  std::vector<int32_t> free;
  BlockAllocator(int32_t num_blocks, std::mt19937& rng) {
    free.resize(static_cast<size_t>(num_blocks));
    std::iota(free.begin(), free.end(), 0);
    std::shuffle(free.begin(), free.end(), rng);
  }
  int32_t Take() {
    const int32_t b = free.back();
    free.pop_back();
    return b;
  }
};

inline const std::vector<KvDtype>& AllDtypes() {
  static const std::vector<KvDtype> kAll = {KvDtype::kF32, KvDtype::kBf16, KvDtype::kF16,
                                            KvDtype::kFp8E4m3};
  return kAll;
}

}  // namespace pagoda::cpu::testing
