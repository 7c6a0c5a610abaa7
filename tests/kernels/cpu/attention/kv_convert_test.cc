// Row conversions of the KV storage types (the fp8 table, the F16C decode, EncodeRow) against
// common/numerics.h's element conversions, bit for bit, and the vectorized exp of the kernels.
#include "kernels/cpu/attention/kv_convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/numerics.h"
#include "kernels/cpu/attention/attention_core.h"

namespace pagoda::cpu {
namespace {

TEST(KvConvertTest, Fp8DecodeTableMatchesNumericsForAllCodes) {
  for (int b = 0; b < 256; ++b) {
    const float ours = kv::kFp8ToF32[b];
    const float ref = Fp8E4m3ToFp32(static_cast<uint8_t>(b));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(ours)) << b;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(ours), std::bit_cast<uint32_t>(ref)) << b;
    }
  }
}

TEST(KvConvertTest, Fp8EncodeRowMatchesNumericsBitExactly) {
  // Every fp8 code, the midpoints between neighbours (ties), saturation, specials, random.
  std::vector<float> values = {0.0f,   -0.0f,   448.0f,      449.0f,     464.0f,
                               1e9f,   -1e9f,   INFINITY,    -INFINITY,  NAN,
                               1e-30f, -1e-30f, 1.0f / 1024, 3.0f / 1024};
  for (int b = 0; b < 256; ++b) {
    const float x = Fp8E4m3ToFp32(static_cast<uint8_t>(b));
    values.push_back(x);
    values.push_back(std::nextafter(x, INFINITY));
    values.push_back(std::nextafter(x, -INFINITY));
    const float y = Fp8E4m3ToFp32(static_cast<uint8_t>(b + 1));
    if (std::isfinite(x) && std::isfinite(y)) values.push_back(0.5f * (x + y));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    values.push_back(std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng),
                                std::uniform_int_distribution<int>(-14, 10)(rng)));
  }
  std::vector<uint8_t> row(values.size());
  kv::EncodeRow(KvDtype::kFp8E4m3, values.data(), 1.0f, row.data(),
                static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(row[i], Fp32ToFp8E4m3(values[i])) << values[i];
}

TEST(KvConvertTest, F16RowDecodeMatchesNumericsForAllCodes) {
  std::vector<uint16_t> codes(65536);
  for (uint32_t h = 0; h < 65536; ++h) codes[h] = static_cast<uint16_t>(h);
  std::vector<float> row(codes.size());
  kv::F16RowToF32(codes.data(), row.data(), static_cast<int64_t>(codes.size()));  // F16C
  for (uint32_t h = 0; h < 65536; ++h) {
    const float ours = row[h];
    const float ref = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(ours)) << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(ours), std::bit_cast<uint32_t>(ref)) << h;
    }
  }
}

TEST(KvConvertTest, Bf16EncodeRowMatchesNumerics) {
  std::mt19937 rng(3);
  std::vector<float> x;
  for (int i = 0; i < 100000; ++i) {
    const float v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isnan(v)) x.push_back(v);
  }
  std::vector<uint16_t> row(x.size());
  kv::EncodeRow(KvDtype::kBf16, x.data(), 1.0f, row.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(row[i], Fp32ToBf16(x[i])) << x[i];
}

// EncodeRow and RoundTripRow of fp16 / bf16 (vectorized loops) against the element conversions,
// bit for bit, on random bit patterns (NaNs, infinities, subnormals included) and an odd count.
TEST(KvConvertTest, F16AndBf16RowsMatchNumericsBitExactly) {
  std::mt19937 rng(5);
  std::vector<float> x(100003);
  for (float& v : x) v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  for (int i = 0; i < 2000; ++i) {  // fp16's range: subnormals, ties, overflow
    x[static_cast<size_t>(i)] = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng),
                                           std::uniform_int_distribution<int>(-26, 17)(rng));
  }
  const int64_t n = static_cast<int64_t>(x.size());
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBf16}) {
    const bool f16 = dtype == KvDtype::kF16;
    std::vector<uint16_t> row(x.size());
    kv::EncodeRow(dtype, x.data(), 1.0f, row.data(), n);
    std::vector<float> y = x;
    kv::RoundTripRow(dtype, 1.0f, y.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t ref = f16 ? Fp32ToFp16(x[i]) : Fp32ToBf16(x[i]);
      ASSERT_EQ(row[i], ref) << i << " " << x[i];
      const float back = f16 ? Fp16ToFp32(ref) : Bf16ToFp32(ref);
      ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(back)) << i << " " << x[i];
    }
  }
}

TEST(KvConvertTest, RoundTripUsesScale) {
  float x[3] = {1.0f, -3.0f, 1000.0f};
  kv::RoundTripRow(KvDtype::kFp8E4m3, 2.0f, x, 3);
  EXPECT_FLOAT_EQ(x[0], 1.0f);
  EXPECT_FLOAT_EQ(x[1], -3.0f);
  EXPECT_FLOAT_EQ(x[2], 224.0f);  // 2000 saturates to 448, / 2
}

TEST(KvConvertTest, VectorExpIsAccurate) {
  std::vector<float> x;
  for (float v = -90.0f; v <= 0.0f; v += 0.001953125f) x.push_back(v);
  x.push_back(-INFINITY);
  std::vector<float> y = x;
  attn::ExpInPlace(y.data(), static_cast<int>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(static_cast<double>(x[i]));
    if (x[i] < -87.0f) {
      EXPECT_EQ(y[i], 0.0f) << x[i];
    } else {
      EXPECT_NEAR(y[i], ref, 4e-7 * ref) << x[i];
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu
