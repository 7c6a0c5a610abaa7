#include "kvcache/fp8_e4m3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

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

}  // namespace
}  // namespace pagoda
