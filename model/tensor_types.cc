#include "model/tensor_types.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/numerics.h"
#include "model/quants.h"

namespace pagoda {
namespace {

constexpr int64_t kQK8_0 = 32;
using quants::kQK4_0;
using quants::kQK_K;

constexpr std::array<GgmlTypeTraits, 22> kTraits = {{
    {GgmlType::kF32, "F32", 1, 4, true, true},
    {GgmlType::kF16, "F16", 1, 2, true, true},
    {GgmlType::kQ4_0, "Q4_0", kQK4_0, 2 + kQK4_0 / 2, true, true},
    {GgmlType::kQ4_1, "Q4_1", 32, 4 + 16, true, true},
    {GgmlType::kQ5_0, "Q5_0", 32, 2 + 4 + 16, true, true},
    {GgmlType::kQ5_1, "Q5_1", 32, 4 + 4 + 16, true, true},
    {GgmlType::kQ8_0, "Q8_0", kQK8_0, 2 + kQK8_0, true, true},
    {GgmlType::kQ8_1, "Q8_1", 32, 4 + 32, false, false},
    {GgmlType::kQ2_K, "Q2_K", kQK_K, 2 * 2 + kQK_K / 16 + kQK_K / 4, true, true},
    {GgmlType::kQ3_K, "Q3_K", kQK_K, 2 + kQK_K / 4 + kQK_K / 8 + 12, true, true},
    {GgmlType::kQ4_K, "Q4_K", kQK_K, 2 * 2 + 12 + kQK_K / 2, true, true},
    {GgmlType::kQ5_K, "Q5_K", kQK_K, 2 * 2 + 12 + kQK_K / 8 + kQK_K / 2, true, true},
    {GgmlType::kQ6_K, "Q6_K", kQK_K, 2 + kQK_K / 16 + 3 * kQK_K / 4, true, true},
    {GgmlType::kQ8_K, "Q8_K", kQK_K, 4 + kQK_K + kQK_K / 16 * 2, false, false},
    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 2 + 16, true, true},
    {GgmlType::kIQ4_XS, "IQ4_XS", kQK_K, 2 + 2 + kQK_K / 64 + kQK_K / 2, true, true},
    {GgmlType::kI8, "I8", 1, 1, false, false},
    {GgmlType::kI16, "I16", 1, 2, false, false},
    {GgmlType::kI32, "I32", 1, 4, false, false},
    {GgmlType::kI64, "I64", 1, 8, false, false},
    {GgmlType::kF64, "F64", 1, 8, false, false},
    {GgmlType::kBF16, "BF16", 1, 2, true, true},
}};

constexpr const GgmlTypeTraits& ConstTraits(GgmlType type) {
  for (const auto& t : kTraits) {
    if (t.type == type) return t;
  }
  return kTraits[0];  // unreachable for valid enum values
}
// The block layouts of model/quants.h.
static_assert(ConstTraits(GgmlType::kQ4_0).type_size == quants::kBlockBytesQ4_0);
static_assert(ConstTraits(GgmlType::kQ4_K).type_size == quants::kBlockBytesQ4_K);
static_assert(ConstTraits(GgmlType::kQ6_K).type_size == quants::kBlockBytesQ6_K);
static_assert(ConstTraits(GgmlType::kQ4_1).type_size == quants::kBlockBytesQ4_1);
static_assert(ConstTraits(GgmlType::kQ5_0).type_size == quants::kBlockBytesQ5_0);
static_assert(ConstTraits(GgmlType::kQ5_1).type_size == quants::kBlockBytesQ5_1);
static_assert(ConstTraits(GgmlType::kIQ4_NL).type_size == quants::kBlockBytesIQ4_NL);
static_assert(ConstTraits(GgmlType::kQ2_K).type_size == quants::kBlockBytesQ2_K);
static_assert(ConstTraits(GgmlType::kQ3_K).type_size == quants::kBlockBytesQ3_K);
static_assert(ConstTraits(GgmlType::kQ5_K).type_size == quants::kBlockBytesQ5_K);
static_assert(ConstTraits(GgmlType::kIQ4_XS).type_size == quants::kBlockBytesIQ4_XS);

}  // namespace

std::optional<GgmlTypeTraits> GetTypeTraits(uint32_t raw_type) {
  for (const auto& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == raw_type) return t;
  }
  return std::nullopt;
}

const GgmlTypeTraits& TypeTraits(GgmlType type) { return ConstTraits(type); }

const char* TypeName(GgmlType type) { return TypeTraits(type).name; }

std::optional<GgmlType> ParseTypeName(std::string_view name) {
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const auto& t : kTraits) {
    if (upper == t.name) return t.type;
  }
  return std::nullopt;
}

std::optional<int64_t> RowBytes(GgmlType type, int64_t n) {
  const GgmlTypeTraits& t = TypeTraits(type);
  if (n < 0 || n % t.block_size != 0) return std::nullopt;
  const int64_t blocks = n / t.block_size;
  if (blocks > std::numeric_limits<int64_t>::max() / t.type_size) return std::nullopt;
  return blocks * t.type_size;
}

namespace {

void DequantizeQ8_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const uint8_t* block = src + b * (2 + kQK8_0);
    uint16_t d16;
    std::memcpy(&d16, block, 2);
    const float d = Fp16ToFp32(d16);
    const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
    for (int64_t i = 0; i < kQK8_0; ++i) dst[b * kQK8_0 + i] = d * static_cast<float>(qs[i]);
  }
}

// Same rounding as ggml's quantize_row_q8_0_ref: d = amax / 127, q = round(x / d).
void QuantizeQ8_0(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* x = src + b * kQK8_0;
    float amax = 0.0f;
    for (int64_t i = 0; i < kQK8_0; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* block = dst + b * (2 + kQK8_0);
    const uint16_t d16 = Fp32ToFp16(d);
    std::memcpy(block, &d16, 2);
    int8_t* qs = reinterpret_cast<int8_t*>(block + 2);
    for (int64_t i = 0; i < kQK8_0; ++i) qs[i] = static_cast<int8_t>(std::lround(x[i] * id));
  }
}

}  // namespace

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = Fp16ToFp32(h);
      }
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = Bf16ToFp32(h);
      }
      return;
    case GgmlType::kQ8_0:
      DequantizeQ8_0(bytes, dst, n);
      return;
    case GgmlType::kQ4_0:
      quants::DequantizeRowQ4_0(bytes, dst, n);
      return;
    case GgmlType::kQ4_K:
      quants::DequantizeRowQ4_K(bytes, dst, n);
      return;
    case GgmlType::kQ6_K:
      quants::DequantizeRowQ6_K(bytes, dst, n);
      return;
    case GgmlType::kQ4_1:
      quants::DequantizeRowQ4_1(bytes, dst, n);
      return;
    case GgmlType::kQ5_0:
      quants::DequantizeRowQ5_0(bytes, dst, n);
      return;
    case GgmlType::kQ5_1:
      quants::DequantizeRowQ5_1(bytes, dst, n);
      return;
    case GgmlType::kIQ4_NL:
      quants::DequantizeRowIQ4_NL(bytes, dst, n);
      return;
    case GgmlType::kQ2_K:
      quants::DequantizeRowQ2_K(bytes, dst, n);
      return;
    case GgmlType::kQ3_K:
      quants::DequantizeRowQ3_K(bytes, dst, n);
      return;
    case GgmlType::kQ5_K:
      quants::DequantizeRowQ5_K(bytes, dst, n);
      return;
    case GgmlType::kIQ4_XS:
      quants::DequantizeRowIQ4_XS(bytes, dst, n);
      return;
    default:
      break;
  }
  throw std::logic_error(std::string("DequantizeRow: unsupported type ") + TypeName(type));
}

bool CanQuantize(GgmlType type) { return TypeTraits(type).can_quantize; }

void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  auto* bytes = static_cast<uint8_t*>(dst);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Fp32ToFp16(src[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Fp32ToBf16(src[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return;
    case GgmlType::kQ8_0:
      QuantizeQ8_0(src, bytes, n);
      return;
    case GgmlType::kQ4_0:
      quants::QuantizeRowQ4_0(src, bytes, n);
      return;
    case GgmlType::kQ4_K:
      quants::QuantizeRowQ4_K(src, bytes, n);
      return;
    case GgmlType::kQ6_K:
      quants::QuantizeRowQ6_K(src, bytes, n);
      return;
    case GgmlType::kQ4_1:
      quants::QuantizeRowQ4_1(src, bytes, n);
      return;
    case GgmlType::kQ5_0:
      quants::QuantizeRowQ5_0(src, bytes, n);
      return;
    case GgmlType::kQ5_1:
      quants::QuantizeRowQ5_1(src, bytes, n);
      return;
    case GgmlType::kQ2_K:
      quants::QuantizeRowQ2_K(src, bytes, n);
      return;
    case GgmlType::kQ3_K:
      quants::QuantizeRowQ3_K(src, bytes, n);
      return;
    case GgmlType::kQ5_K:
      quants::QuantizeRowQ5_K(src, bytes, n);
      return;
    case GgmlType::kIQ4_NL:
      quants::QuantizeRowIQ4_NL(src, bytes, n);
      return;
    case GgmlType::kIQ4_XS:
      quants::QuantizeRowIQ4_XS(src, bytes, n);
      return;
    default:
      break;
  }
  throw std::logic_error(std::string("QuantizeRow: unsupported type ") + TypeName(type));
}

}  // namespace pagoda
