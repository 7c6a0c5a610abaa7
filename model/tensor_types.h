// GGML tensor element types as stored in GGUF files: ids, block geometry, row sizes and
// reference (de)quantization to/from fp32 (block formats: quants.h; the fp16 / bf16 element
// conversions: common/numerics.h).
//
// A "block" is the unit a quantized type is stored in: `block_size` elements packed into
// `type_size` bytes (1 element / 4 bytes for F32). A row of n elements needs n % block_size == 0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace pagoda {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;
  int64_t block_size;   // elements per block
  int64_t type_size;    // bytes per block
  bool can_dequantize;  // Pagoda has a dequantizer (and so can compute with it): DequantizeRow
  bool can_quantize;    // Pagoda has a quantizer: QuantizeRow, CanQuantize
};

// Traits for a raw type id read from a file; nullopt if the id is not a known GGML type.
std::optional<GgmlTypeTraits> GetTypeTraits(uint32_t raw_type);
const GgmlTypeTraits& TypeTraits(GgmlType type);
const char* TypeName(GgmlType type);
// Parses "f32", "F16", "q8_0", ... (case-insensitive).
std::optional<GgmlType> ParseTypeName(std::string_view name);

// Bytes of a row of `n` elements, or nullopt when n is negative, not a multiple of the block
// size, or so large that the byte count overflows int64.
std::optional<int64_t> RowBytes(GgmlType type, int64_t n);

// Dequantizes one row of n elements (n a multiple of the block size) from `src` into `dst`.
// Precondition: TypeTraits(type).can_dequantize.
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);
// Quantizes one row of n floats into `dst` (RowBytes(type, n) bytes). Supports F32, F16, BF16,
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS (ggml's
// quantizers without an importance matrix; see model/quants.h).
void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);
// TypeTraits(type).can_quantize: whether QuantizeRow supports `type`.
bool CanQuantize(GgmlType type);

}  // namespace pagoda
