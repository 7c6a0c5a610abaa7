// GGML block-quantized weight formats Q4_0, Q4_K and Q6_K: reference quantizers and
// dequantizers with the exact bit layouts of ggml (so files interoperate with llama.cpp).
//
// All functions work on one row of n elements (n a multiple of the block size) stored as
// consecutive blocks. Blocks are read and written byte-wise (no alignment needed). fp16 fields
// are IEEE half, little-endian.
//
// Q4_0 (32 elements, 18 bytes):
//   [0..2)   d      fp16 scale
//   [2..18)  qs[16] nibbles: qs[j] & 15 is element j, qs[j] >> 4 is element j + 16
//   x = d * (q - 8)
//
// Q4_K (super-block of 256 elements = 8 sub-blocks of 32, 144 bytes):
//   [0..2)     d          fp16 super-scale of the sub-block scales
//   [2..4)     dmin       fp16 super-scale of the sub-block mins
//   [4..16)    scales[12] 8 six-bit scales sc[j] and 8 six-bit mins m[j], packed:
//                j < 4:  sc[j] = scales[j] & 63,   m[j] = scales[j + 4] & 63
//                j >= 4: sc[j] = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4
//                        m[j]  = (scales[j + 4] >> 4) | (scales[j]     >> 6) << 4
//   [16..144)  qs[128]    nibbles; 32-byte chunk c (c = 0..3) holds sub-block 2c in its low
//                         nibbles and sub-block 2c + 1 in its high nibbles
//   x = d * sc[j] * q - dmin * m[j]          (q in 0..15)
//
// Q6_K (super-block of 256 elements = 16 sub-blocks of 16, 210 bytes):
//   [0..128)    ql[128]    low 4 bits; [128..192) qh[64] high 2 bits;
//   [192..208)  scales[16] int8 sub-block scales;  [208..210) d fp16 super-scale
//   For half h (elements 128h .. 128h + 127) and l = 0..31, with L = ql + 64h, H = qh + 32h:
//     element 128h + l      : low L[l] & 15,      high (H[l] >> 0) & 3
//     element 128h + l + 32 : low L[l + 32] & 15, high (H[l] >> 2) & 3
//     element 128h + l + 64 : low L[l] >> 4,      high (H[l] >> 4) & 3
//     element 128h + l + 96 : low L[l + 32] >> 4, high (H[l] >> 6) & 3
//   q = low | high << 4 (0..63);  x = d * scales[e / 16] * (q - 32)
#pragma once

#include <cstdint>

namespace pagoda::quants {

// Block geometry (also the Q4_0 / Q4_K / Q6_K rows of tensor_types.cc's type table, which
// static_asserts that the sizes agree).
constexpr int64_t kQK4_0 = 32;
constexpr int64_t kQK_K = 256;
constexpr int64_t kBlockBytesQ4_0 = 18;
constexpr int64_t kBlockBytesQ4_K = 144;
constexpr int64_t kBlockBytesQ6_K = 210;

// Unpacks the 6-bit scale and min of Q4_K sub-block j (0..7) from the 12 packed bytes.
void GetScaleMinK4(int j, const uint8_t* packed, uint8_t* scale, uint8_t* min);

void DequantizeRowQ4_0(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ4_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ6_K(const uint8_t* src, float* dst, int64_t n);

// Reference quantizers (the algorithms of ggml's quantize_row_*_ref, without importance
// weights): Q4_0 scales by the signed absmax / -8; Q4_K fits scale + min per sub-block by a
// weighted least-squares search, then 6-bit-quantizes them; Q6_K fits a scale per 16 by an
// x^2-weighted search and 8-bit-quantizes the scales.
void QuantizeRowQ4_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ4_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ6_K(const float* src, uint8_t* dst, int64_t n);

}  // namespace pagoda::quants
