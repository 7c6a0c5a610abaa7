// GGML block-quantized weight formats: dequantizers with the exact bit layouts of ggml (so files
// interoperate with llama.cpp), and reference quantizers for the types `pagoda quantize` writes.
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
//
// Q4_1 (32 elements, 20 bytes): [0..2) d fp16, [2..4) m fp16, [4..20) qs[16] nibbles as Q4_0;
//   x = d * q + m   (q in 0..15)
// Q5_0 (32 elements, 22 bytes): [0..2) d fp16, [2..6) qh (32-bit LE; bit e is element e's 5th
//   bit), [6..22) qs[16] low nibbles as Q4_0;  x = d * (q - 16)   (q in 0..31)
// Q5_1 (32 elements, 24 bytes): [0..2) d, [2..4) m, [4..8) qh, [8..24) qs as Q5_0;  x = d * q + m
// IQ4_NL (32 elements, 18 bytes): [0..2) d fp16, [2..18) qs[16] nibbles as Q4_0;
//   x = d * kIQ4Levels[q]
//
// Q2_K (super-block of 256 = 16 sub-blocks of 16, 84 bytes):
//   [0..16) scales[16]: low nibble sc, high nibble m of sub-block e / 16; [16..80) qs[64];
//   [80..82) d fp16, [82..84) dmin fp16.
//   Element e = 128h + 32jj + l (h 0..1, jj 0..3, l 0..31): q = (qs[32h + l] >> 2jj) & 3;
//   x = d * sc * q - dmin * m
// Q3_K (super-block of 256 = 16 sub-blocks of 16, 110 bytes):
//   [0..32) hmask[32]; [32..96) qs[64]; [96..108) scales: 16 six-bit values, s < 8: low nibble
//   of byte s, s >= 8: high nibble of byte s - 8; bits 4-5 from byte 8 + s % 4 at bit 2 (s / 4);
//   [108..110) d fp16.  Element e = 128h + 32jj + l: low = (qs[32h + l] >> 2jj) & 3,
//   high = (hmask[l] >> (4h + jj)) & 1;  x = d * (scale - 32) * ((low | high << 2) - 4)
// Q5_K (super-block of 256 = 8 sub-blocks of 32, 176 bytes):
//   [0..2) d, [2..4) dmin, [4..16) scales as Q4_K, [16..48) qh[32], [48..176) qs[128] nibbles as
//   Q4_K (chunk c: sub-block 2c low, 2c + 1 high); element 64c + 32i + l gets its 5th bit from
//   (qh[l] >> (2c + i)) & 1;  x = d * sc * q - dmin * m   (q in 0..31)
// IQ4_XS (super-block of 256 = 8 sub-blocks of 32, 136 bytes):
//   [0..2) d fp16; [2..4) scales_h (16-bit LE: bits 2ib, 2ib + 1 are bits 4-5 of sub-block ib's
//   scale); [4..8) scales_l (low nibble of byte ib / 2 for even ib, high for odd); [8..136) qs:
//   16 bytes per sub-block, nibbles as Q4_0;  x = d * (scale - 32) * kIQ4Levels[q]
#pragma once

#include <cstdint>

namespace pagoda::quants {

// Block geometry (also the rows of tensor_types.cc's type table, which
// static_asserts that the sizes agree).
constexpr int64_t kQK4_0 = 32;
constexpr int64_t kQK_K = 256;
constexpr int64_t kBlockBytesQ4_0 = 18;
constexpr int64_t kBlockBytesQ4_K = 144;
constexpr int64_t kBlockBytesQ6_K = 210;
constexpr int64_t kBlockBytesQ4_1 = 20;
constexpr int64_t kBlockBytesQ5_0 = 22;
constexpr int64_t kBlockBytesQ5_1 = 24;
constexpr int64_t kBlockBytesIQ4_NL = 18;
constexpr int64_t kBlockBytesQ2_K = 84;
constexpr int64_t kBlockBytesQ3_K = 110;
constexpr int64_t kBlockBytesQ5_K = 176;
constexpr int64_t kBlockBytesIQ4_XS = 136;

// The 16 non-linear levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIQ4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// Unpacks the 6-bit scale and min of Q4_K sub-block j (0..7) from the 12 packed bytes.
void GetScaleMinK4(int j, const uint8_t* packed, uint8_t* scale, uint8_t* min);
// Packs 8 six-bit scales and mins into those 12 bytes (Q4_K and Q5_K; inverse of GetScaleMinK4).
void PackScaleMinK4(const uint8_t* ls, const uint8_t* lm, uint8_t* packed);
// Q3_K's signed 6-bit scale of sub-block s (0..15) from its 12 packed scale bytes.
int GetScaleQ3K(const uint8_t* packed, int s);

void DequantizeRowQ4_0(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ4_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ6_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ4_1(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ5_0(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ5_1(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowIQ4_NL(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ2_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ3_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowQ5_K(const uint8_t* src, float* dst, int64_t n);
void DequantizeRowIQ4_XS(const uint8_t* src, float* dst, int64_t n);

// Reference quantizers (the algorithms of ggml's quantize_row_*_ref, without importance
// weights): Q4_0 scales by the signed absmax / -8; Q4_K fits scale + min per sub-block by a
// weighted least-squares search, then 6-bit-quantizes them; Q6_K fits a scale per 16 by an
// x^2-weighted search and 8-bit-quantizes the scales.
void QuantizeRowQ4_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ4_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ6_K(const float* src, uint8_t* dst, int64_t n);
// The same for the types of llama.cpp's Q5_0 / Q5_K_M / Q3_K_M / Q2_K mixes and Q4_1 / Q5_1:
// Q4_1 / Q5_1 d = (max - min) / (15 | 31), m = min; Q5_0 d = signed absmax / -16; Q5_K as
// Q4_K with 5-bit levels; Q3_K a signed x^2-weighted fit per 16, scales 6-bit; Q2_K an
// |x|-weighted absolute-error fit of scale + min per 16, both 4-bit.
void QuantizeRowQ4_1(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ5_0(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ5_1(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ2_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ3_K(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowQ5_K(const float* src, uint8_t* dst, int64_t n);
// IQ4_NL / IQ4_XS: per block of 32 the x^2-weighted least-squares scale for the 16 non-linear
// levels, searched over 15 inverse scales around absmax / 127; IQ4_XS then rounds each block's
// scale to a 6-bit multiple of the super-block's d and refits the codes.
void QuantizeRowIQ4_NL(const float* src, uint8_t* dst, int64_t n);
void QuantizeRowIQ4_XS(const float* src, uint8_t* dst, int64_t n);

}  // namespace pagoda::quants
