#include "kernels/cpu/attention/paged_kv.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/attention/kv_convert.h"
#include "kernels/cpu/portable_math.h"
#include "kernels/cpu/simd_level.h"

namespace pagoda::cpu {

Status ValidatePagedKv(const PagedKvView& kv) {
  if (kv.k == nullptr || kv.v == nullptr) return InvalidArgument("kv: k and v must be non-null");
  if (kv.num_blocks <= 0 || kv.n_kv_heads <= 0 || kv.block_size <= 0 || kv.head_dim <= 0) {
    return InvalidArgument("kv: num_blocks, n_kv_heads, block_size and head_dim must be > 0");
  }
  const bool fp8 = kv.dtype == KvDtype::kFp8E4m3;
  for (float s : {kv.k_scale, kv.v_scale}) {
    if (!std::isfinite(s) || s <= 0.0f) {
      return InvalidArgument("kv: k_scale/v_scale must be finite and > 0, got " +
                             std::to_string(s));
    }
    if (!fp8 && s != 1.0f) {
      return InvalidArgument(std::string("kv: k_scale/v_scale must be 1 for dtype ") +
                             KvDtypeName(kv.dtype));
    }
  }
  return Status::Ok();
}

Status ValidateAttnSeqs(std::span<const AttnSeq> seqs, int64_t n_rows, const PagedKvView& kv) {
  int64_t prev_end = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const AttnSeq& s = seqs[i];
    const std::string name = "seqs[" + std::to_string(i) + "]";
    if (s.q_start < 0 || s.q_len < 0 || s.ctx_len < 0) {
      return InvalidArgument(name + ": q_start, q_len and ctx_len must be >= 0");
    }
    if (s.q_start < prev_end || static_cast<int64_t>(s.q_start) + s.q_len > n_rows) {
      return InvalidArgument(name + ": rows [" + std::to_string(s.q_start) + ", +" +
                             std::to_string(s.q_len) + ") overlap the previous sequence or pass " +
                             std::to_string(n_rows) + " rows");
    }
    prev_end = static_cast<int64_t>(s.q_start) + s.q_len;
    const int64_t need = (static_cast<int64_t>(s.ctx_len) + kv.block_size - 1) / kv.block_size;
    if (static_cast<int64_t>(s.block_table.size()) < need) {
      return InvalidArgument(name + ": block_table has " + std::to_string(s.block_table.size()) +
                             " entries, ctx_len " + std::to_string(s.ctx_len) + " needs " +
                             std::to_string(need));
    }
    for (int64_t j = 0; j < need; ++j) {
      if (s.block_table[j] >= kv.num_blocks) {
        return InvalidArgument(name + ": block_table[" + std::to_string(j) +
                               "] = " + std::to_string(s.block_table[j]) + " >= num_blocks " +
                               std::to_string(kv.num_blocks));
      }
    }
  }
  return Status::Ok();
}

namespace kv {
namespace {

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,f16c"))) void F16RowToF32F16c(const uint16_t* src, float* dst,
                                                          int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

#endif

// The fp16 / bf16 row loops of EncodeRow and RoundTripRow: the scalar, branch-free conversions
// of common/numerics.h, which these loops vectorize (so bit for bit the scalar results), built
// for each x86-64 level (PAGODA_SIMD_CLONES). As one loop with the dtype switch inside they ran
// element by element (RoundTripRow: ~1% of a 16-stream decode profile).
PAGODA_SIMD_CLONES void EncodeF16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp32ToFp16(src[i]);
}
PAGODA_SIMD_CLONES void EncodeBf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp32ToBf16(src[i]);
}
PAGODA_SIMD_CLONES void RoundTripF16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}
PAGODA_SIMD_CLONES void RoundTripBf16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = Bf16ToFp32(Fp32ToBf16(x[i]));
}

}  // namespace

void F16RowToF32(const uint16_t* src, float* dst, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  // Every CPU of kAvx2 and up has F16C (simd_level.h); the conversion is exact either way.
  if (DetectSimdLevel() >= SimdLevel::kAvx2) return F16RowToF32F16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

void EncodeRow(KvDtype dtype, const float* src, float scale, void* dst, int64_t n) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case KvDtype::kBf16:
      EncodeBf16(src, static_cast<uint16_t*>(dst), n);
      break;
    case KvDtype::kF16:
      EncodeF16(src, static_cast<uint16_t*>(dst), n);
      break;
    case KvDtype::kFp8E4m3:
      QuantizeFp8E4m3(src, static_cast<uint8_t*>(dst), n, scale);
      break;
  }
}

void RoundTripRow(KvDtype dtype, float scale, float* x, int64_t n) {
  switch (dtype) {
    case KvDtype::kF32:
      return;
    case KvDtype::kBf16:
      return RoundTripBf16(x, n);
    case KvDtype::kF16:
      return RoundTripF16(x, n);
    case KvDtype::kFp8E4m3:
      break;
  }
  const float inv = 1.0f / scale;
  for (int64_t i = 0; i < n; ++i) x[i] = kFp8ToF32[Fp32ToFp8E4m3(x[i] * scale)] * inv;
}

}  // namespace kv
}  // namespace pagoda::cpu
