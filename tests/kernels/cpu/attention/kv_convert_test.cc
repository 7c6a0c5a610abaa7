// Element conversions of the KV storage types and the vectorized exp used by the kernels.
#include "kernels/cpu/attention/kv_convert.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "kernels/cpu/attention/attention_core.h"
#include "kvcache/fp8_e4m3.h"
#include "model/tensor_types.h"

namespace pagoda::cpu {
namespace {

TEST(KvConvertTest, Fp8DecodeMatchesKvcacheForAllCodes) {
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

TEST(KvConvertTest, Fp8EncodeMatchesKvcacheBitExactly) {
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
  for (float x : values) EXPECT_EQ(kv::F32ToFp8(x), Fp32ToFp8E4m3(x)) << x;
}

TEST(KvConvertTest, F16DecodeMatchesModelForAllCodes) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float ours = kv::F16ToF32(static_cast<uint16_t>(h));
    const float ref = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(ours)) << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(ours), std::bit_cast<uint32_t>(ref)) << h;
    }
  }
}

TEST(KvConvertTest, Bf16EncodeMatchesModel) {
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    ASSERT_EQ(kv::F32ToBf16(x), Fp32ToBf16(x)) << x;
  }
}

TEST(KvConvertTest, RoundTripUsesScale) {
  float x[3] = {1.0f, -3.0f, 1000.0f};
  kv::RoundTripRow(PagedKvDtype::kFp8E4m3, 2.0f, x, 3);
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
