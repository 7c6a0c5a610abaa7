// common/numerics.h: every conversion against an independent reference (nearest-even by
// search over the codes, exact decoding by ldexp), exhaustively where the input space allows.
#include "common/numerics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace pagoda {
namespace {

bool IsNanCode(int code) { return (code & 0x7f) == 0x7f; }

// Reference: the finite code nearest to x, ties to the even code; saturating.
uint8_t ReferenceEncode(float x) {
  if (std::isnan(x)) return 0x7f;
  int best = -1;
  double best_err = 0;
  for (int code = 0; code < 256; ++code) {
    if (IsNanCode(code) || (code == 0x80)) continue;  // skip NaNs and -0 (x sign handled below)
    const double v = Fp8E4m3ToFp32(static_cast<uint8_t>(code));
    const double clamped = std::clamp<double>(x, -448.0, 448.0);
    const double err = std::fabs(v - clamped);
    if (best < 0 || err < best_err || (err == best_err && (code & 1) == 0)) {
      best = code;
      best_err = err;
    }
  }
  if (best == 0 && std::signbit(x)) best = 0x80;  // -0 and tiny negatives keep the sign
  return static_cast<uint8_t>(best);
}

TEST(Fp8E4m3Test, KnownValues) {
  EXPECT_EQ(Fp32ToFp8E4m3(0.0f), 0x00);
  EXPECT_EQ(Fp32ToFp8E4m3(-0.0f), 0x80);
  EXPECT_EQ(Fp32ToFp8E4m3(1.0f), 0x38);
  EXPECT_EQ(Fp32ToFp8E4m3(0.5f), 0x30);
  EXPECT_EQ(Fp32ToFp8E4m3(-2.0f), 0xc0);
  EXPECT_EQ(Fp32ToFp8E4m3(448.0f), 0x7e);
  EXPECT_EQ(Fp32ToFp8E4m3(std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(Fp32ToFp8E4m3(std::ldexp(1.0f, -10)), 0x00);  // tie -> even (0)
  EXPECT_EQ(Fp32ToFp8E4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 units, tie -> even (2)
  EXPECT_EQ(Fp32ToFp8E4m3(1.0625f), 0x38);                // tie between 1.0 and 1.125 -> 1.0
  EXPECT_EQ(Fp32ToFp8E4m3(1.1875f), 0x3a);                // tie between 1.125 and 1.25 -> 1.25
  EXPECT_FLOAT_EQ(Fp8E4m3ToFp32(0x7e), 448.0f);
  EXPECT_FLOAT_EQ(Fp8E4m3ToFp32(0x08), std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(Fp8E4m3ToFp32(0x7f)));
  EXPECT_TRUE(std::isnan(Fp8E4m3ToFp32(0xff)));
}

TEST(Fp8E4m3Test, SaturatesAndKeepsNan) {
  EXPECT_EQ(Fp32ToFp8E4m3(464.0f), 0x7e);
  EXPECT_EQ(Fp32ToFp8E4m3(1e6f), 0x7e);
  EXPECT_EQ(Fp32ToFp8E4m3(-1e6f), 0xfe);
  EXPECT_EQ(Fp32ToFp8E4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(Fp32ToFp8E4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_TRUE(IsNanCode(Fp32ToFp8E4m3(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Fp8E4m3Test, RoundTripsEveryFiniteCode) {
  for (int code = 0; code < 256; ++code) {
    if (IsNanCode(code)) continue;
    EXPECT_EQ(Fp32ToFp8E4m3(Fp8E4m3ToFp32(static_cast<uint8_t>(code))), code) << code;
  }
}

TEST(Fp8E4m3Test, MatchesNearestEvenReference) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-12.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = ((rng() & 1) ? -1.0f : 1.0f) * std::exp2(exponent(rng));
    ASSERT_EQ(Fp32ToFp8E4m3(x), ReferenceEncode(x)) << x;
  }
  // Exact midpoints between neighbouring codes.
  for (int code = 0; code < 0x7e; ++code) {
    const float mid = 0.5f * (Fp8E4m3ToFp32(static_cast<uint8_t>(code)) +
                              Fp8E4m3ToFp32(static_cast<uint8_t>(code + 1)));
    EXPECT_EQ(Fp32ToFp8E4m3(mid), ReferenceEncode(mid)) << mid;
  }
}

TEST(Fp8E4m3Test, ScaleIsAMultiplierOnTheWayIn) {
  const float src[3] = {1.0f, -3.0f, 100.0f};
  uint8_t q[3];
  float back[3];
  QuantizeFp8E4m3(src, q, 3, 2.0f);
  EXPECT_EQ(q[0], Fp32ToFp8E4m3(2.0f));
  EXPECT_EQ(q[2], Fp32ToFp8E4m3(200.0f));
  DequantizeFp8E4m3(q, back, 3, 2.0f);
  EXPECT_FLOAT_EQ(back[0], 1.0f);
  EXPECT_FLOAT_EQ(back[1], -3.0f);
  EXPECT_NEAR(back[2], 100.0f, 4.0f);
}

// ---- fp16 ----------------------------------------------------------------------------------

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// IEEE half by its definition: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
double ReferenceFp16(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m == 0 ? sign * INFINITY : NAN;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

// The fp16 code nearest to x, ties to the even code; inf from 65520 (the midpoint between
// 65504 and the next, unrepresentable, step) on. Positive codes are ordered like their values.
uint16_t ReferenceFp16Encode(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;  // largest finite code with value <= a: binary search
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (ReferenceFp16(mid) <= a) {
      lo = mid;
    } else {
      hi = static_cast<uint16_t>(mid - 1);
    }
  }
  const double below = a - ReferenceFp16(lo);
  const double above = ReferenceFp16(static_cast<uint16_t>(lo + 1)) - a;
  const bool up = above < below || (above == below && (lo & 1) != 0);
  return sign | static_cast<uint16_t>(up ? lo + 1 : lo);
}

TEST(Fp16Test, DecodesEveryCodeExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = Fp16ToFp32(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (nan) {  // a NaN keeps its sign and payload
      ASSERT_EQ(Bits(got), ((h & 0x8000) << 16) | 0x7f800000u | ((h & 0x3ff) << 13)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), ReferenceFp16(static_cast<uint16_t>(h))) << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << h;
    }
  }
}

TEST(Fp16Test, KnownValuesAndEdges) {
  EXPECT_EQ(Fp32ToFp16(0.0f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3c00);
  EXPECT_EQ(Fp32ToFp16(-2.0f), 0xc000);
  EXPECT_EQ(Fp32ToFp16(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(Fp32ToFp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);  // tie past 65504 -> inf
  EXPECT_EQ(Fp32ToFp16(1e9f), 0x7c00);
  EXPECT_EQ(Fp32ToFp16(-1e9f), 0xfc00);
  EXPECT_EQ(Fp32ToFp16(kInf), 0x7c00);
  EXPECT_EQ(Fp32ToFp16(-kInf), 0xfc00);
  EXPECT_EQ(Fp32ToFp16(kNan), 0x7e00);  // every NaN -> quiet 0x7e00
  EXPECT_EQ(Fp32ToFp16(-kNan), 0xfe00);
  EXPECT_EQ(Fp32ToFp16(std::bit_cast<float>(0x7f800001u)), 0x7e00);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1023.5f, -24)), 0x0400);  // tie -> even (0x400)
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);     // tie -> even (0)
  EXPECT_EQ(Fp32ToFp16(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units, tie -> even (2)
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(Fp32ToFp16(std::bit_cast<float>(1u)), 0x0000);      // fp32 subnormal
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even (1.0)
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie -> even (1 + 2^-9)
  EXPECT_EQ(Fp16ToFp32(0x7c00), kInf);
  EXPECT_EQ(Fp16ToFp32(0xfc00), -kInf);
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7e00)));
}

TEST(Fp16Test, RoundTripsEveryCode) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    const uint16_t back = Fp32ToFp16(Fp16ToFp32(static_cast<uint16_t>(h)));
    ASSERT_EQ(back, nan ? (h & 0x8000) | 0x7e00 : h) << h;
  }
}

TEST(Fp16Test, MatchesNearestEvenReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-27.0f, 17.0f);
  std::uniform_int_distribution<uint32_t> mantissa(0, (1u << 23) - 1);
  for (int i = 0; i < 50000; ++i) {
    // Random magnitudes across the range, with random low mantissa bits (ties are covered below).
    const float m = std::exp2(exponent(rng));
    const float x =
        std::bit_cast<float>((Bits(m) & ~0x7fffffu) | mantissa(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
    ASSERT_EQ(Fp32ToFp16(x), ReferenceFp16Encode(x)) << x;
  }
  // Exact midpoints between neighbouring codes and their float neighbours.
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const double mid = 0.5 * (ReferenceFp16(static_cast<uint16_t>(h)) +
                              ReferenceFp16(static_cast<uint16_t>(h + 1)));
    const float fm = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(fm), mid);
    for (float x : {fm, std::nextafter(fm, 0.0f), std::nextafter(fm, kInf), -fm}) {
      ASSERT_EQ(Fp32ToFp16(x), ReferenceFp16Encode(x)) << x;
    }
  }
}

// ---- bf16 ----------------------------------------------------------------------------------

TEST(Bf16Test, DecodesEveryCodeExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(Bits(Bf16ToFp32(static_cast<uint16_t>(h))), h << 16) << h;
  }
}

TEST(Bf16Test, KnownValuesAndEdges) {
  EXPECT_EQ(Fp32ToBf16(0.0f), 0x0000);
  EXPECT_EQ(Fp32ToBf16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(-2.0f), 0xc000);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);  // past the tie
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f);  // largest that stays
  EXPECT_EQ(Fp32ToBf16(kInf), 0x7f80);
  EXPECT_EQ(Fp32ToBf16(-kInf), 0xff80);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(1u)), 0x0000);  // fp32 subnormals round normally
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x00008000u)), 0x0000);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x00018000u)), 0x0002);
  // NaN stays NaN, quiet, with its sign and upper payload (a signaling NaN is quietened).
  EXPECT_EQ(Fp32ToBf16(kNan), 0x7fc0);
  EXPECT_EQ(Fp32ToBf16(-kNan), 0xffc0);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0xff8a0000u)), 0xffca);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x7fffffffu)), 0x7fff);
}

TEST(Bf16Test, RoundTripsEveryCode) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    const uint16_t back = Fp32ToBf16(Bf16ToFp32(static_cast<uint16_t>(h)));
    ASSERT_EQ(back, nan ? h | 0x40 : h) << h;
  }
}

TEST(Bf16Test, MatchesNearestEvenReference) {
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    const float x = std::bit_cast<float>(u);
    if (std::isnan(x)) continue;
    // The two bf16 values around x (truncation and one step away from zero), nearest, ties even.
    const uint16_t down = static_cast<uint16_t>(u >> 16);
    const uint16_t up = static_cast<uint16_t>(down + 1);
    const double a = std::fabs(static_cast<double>(x));
    const double d_down = a - std::fabs(static_cast<double>(Bf16ToFp32(down)));
    // Past the largest finite value the next step would be 2^128 (overflow rounds to inf).
    const double up_value = (down & 0x7fff) == 0x7f7f
                                ? std::ldexp(1.0, 128)
                                : std::fabs(static_cast<double>(Bf16ToFp32(up)));
    const double d_up = up_value - a;
    const uint16_t want = d_up < d_down || (d_up == d_down && (down & 1) != 0) ? up : down;
    ASSERT_EQ(Fp32ToBf16(x), want) << x;
  }
}

// ---- rows ----------------------------------------------------------------------------------

// The conversions in row loops (vectorized by GCC) give what they give one element at a time.
TEST(NumericsRowsTest, VectorizedRowsMatchScalar) {
  std::mt19937 rng(9);
  std::vector<float> x(4099);
  for (float& v : x) v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  x[0] = kNan, x[1] = -kInf, x[2] = 1e-40f, x[3] = 65520.0f;
  std::vector<uint16_t> h(x.size()), b(x.size());
  std::vector<uint8_t> q(x.size());
  std::vector<float> back(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = Fp32ToFp16(x[i]);
  for (size_t i = 0; i < x.size(); ++i) b[i] = Fp32ToBf16(x[i]);
  QuantizeFp8E4m3(x.data(), q.data(), static_cast<int64_t>(x.size()), 1.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    volatile float xi = x[i];  // one element at a time, not vectorized
    ASSERT_EQ(h[i], Fp32ToFp16(xi)) << i;
    ASSERT_EQ(b[i], Fp32ToBf16(xi)) << i;
    ASSERT_EQ(q[i], Fp32ToFp8E4m3(xi)) << i;
  }
  for (size_t i = 0; i < x.size(); ++i) back[i] = Fp16ToFp32(h[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    volatile uint16_t hi = h[i];
    ASSERT_EQ(Bits(back[i]), Bits(Fp16ToFp32(hi))) << i;
  }
  DequantizeFp8E4m3(q.data(), back.data(), static_cast<int64_t>(q.size()), 1.0f);
  for (size_t i = 0; i < q.size(); ++i) {
    volatile uint8_t qi = q[i];
    ASSERT_EQ(Bits(back[i]), Bits(Fp8E4m3ToFp32(qi))) << i;
  }
}

// Usable in constant expressions (e.g. kernels/cpu/attention/kv_convert.h's fp8 table).
static_assert(Fp16ToFp32(0x3c00) == 1.0f && Fp32ToFp16(1.0f) == 0x3c00);
static_assert(Bf16ToFp32(0x3f80) == 1.0f && Fp32ToBf16(1.0f) == 0x3f80);
static_assert(Fp8E4m3ToFp32(0x7e) == kFp8E4m3Max && Fp32ToFp8E4m3(1e9f) == 0x7e);

}  // namespace
}  // namespace pagoda
