// RoPE inverse-frequency tables (model_config.h RopeInvFreq): unscaled (bit-identical to the
// original ApplyRope), linear and Llama 3 scaling against hand-computed Hugging Face values,
// llama.cpp's rope_freqs.weight form, and the GGUF keys that select them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/ops.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/model_config.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

ModelConfig Llama31Rope() {
  ModelConfig c;
  c.rope_theta = 500000.0f;
  c.rope_dim = 128;
  c.rope_scaling = RopeScaling::kLlama3;
  c.rope_scaling_factor = 8.0f;
  c.rope_low_freq_factor = 1.0f;
  c.rope_high_freq_factor = 4.0f;
  c.rope_original_context = 8192;
  return c;
}

// transformers' _compute_llama3_parameters, written out independently: inv_freq from the
// default rope, then torch.where(wavelen > low, inv / factor, inv) and the smoothed medium band.
std::vector<double> HfLlama3(double base, int dim, double factor, double lo, double hi,
                             double orig) {
  std::vector<double> out;
  for (int i = 0; i < dim / 2; ++i) {
    const double inv = 1.0 / std::pow(base, static_cast<double>(2 * i) / dim);
    const double wavelen = 2.0 * M_PI / inv;
    const double llama = wavelen > orig / lo ? inv / factor : inv;
    const double smooth = (orig / wavelen - lo) / (hi - lo);
    const double smoothed = (1.0 - smooth) * llama / factor + smooth * llama;
    const bool medium = !(wavelen < orig / hi) && !(wavelen > orig / lo);
    out.push_back(medium ? smoothed : llama);
  }
  return out;
}

TEST(RopeInvFreq, UnscaledIsTheOriginalFormula) {
  ModelConfig c;
  c.rope_theta = 10000.0f;
  c.rope_dim = 32;
  const std::vector<double> inv = RopeInvFreq(c);
  ASSERT_EQ(inv.size(), 16u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(inv[i], std::pow(10000.0, -2.0 * i / 32)) << i;  // exactly
  }
  EXPECT_EQ(inv[0], 1.0);
}

TEST(RopeInvFreq, ApplyRopeWithTableIsBitIdenticalWhenUnscaled) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalves}) {
    for (int32_t rope_dim : {16, 24}) {  // 24: partial rotation of a 32-dim head
      ModelConfig c;
      c.rope_theta = 500000.0f;
      c.rope_dim = rope_dim;
      const std::vector<double> inv = RopeInvFreq(c);
      for (int64_t pos : {0, 1, 7, 1000, 131071}) {
        std::vector<float> a(4 * 32);
        for (float& v : a) v = n(rng);
        std::vector<float> b = a;
        cpu::ApplyRope(a.data(), 4, 32, rope_dim, pos, c.rope_theta, layout);
        cpu::ApplyRope(b.data(), 4, 32, pos, inv, layout);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << pos;
      }
    }
  }
}

TEST(RopeInvFreq, LinearDividesEveryFrequency) {
  ModelConfig c;
  c.rope_theta = 10000.0f;
  c.rope_dim = 64;
  c.rope_scaling = RopeScaling::kLinear;
  c.rope_scaling_factor = 4.0f;
  const std::vector<double> inv = RopeInvFreq(c);
  ASSERT_EQ(inv.size(), 32u);
  EXPECT_DOUBLE_EQ(inv[0], 0.25);
  EXPECT_DOUBLE_EQ(inv[1], std::pow(10000.0, -2.0 / 64) / 4);
  for (int i = 0; i < 32; ++i) {
    EXPECT_NEAR(inv[i], 1.0 / std::pow(10000.0, 2.0 * i / 64) / 4.0, 1e-15 * inv[0]) << i;
  }
}

TEST(RopeInvFreq, Llama3MatchesTheHuggingFaceFormula) {
  const std::vector<double> inv = RopeInvFreq(Llama31Rope());
  ASSERT_EQ(inv.size(), 64u);
  // Hand-computed for Llama 3.1 (theta 5e5, dim 128, factor 8, low 1, high 4, original 8192):
  // pair 0 (wavelen 6.3 < 2048) unchanged; pairs 29..34 in the smoothed band; 35.. divided by 8.
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
  EXPECT_NEAR(inv[29], 0.002166570763503359, 1e-15);
  EXPECT_NEAR(inv[32], 0.0005248461609929547, 1e-15);
  EXPECT_NEAR(inv[34], 0.00017850781276799638, 1e-15);
  EXPECT_NEAR(inv[63], 3.068925988914511e-07, 1e-18);
  EXPECT_NEAR(inv[28], 1.0 / std::pow(500000.0, 56.0 / 128), 1e-15);      // just above the band
  EXPECT_NEAR(inv[35], 1.0 / std::pow(500000.0, 70.0 / 128) / 8, 1e-15);  // just below it
  const std::vector<double> hf = HfLlama3(500000.0, 128, 8.0, 1.0, 4.0, 8192.0);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(inv[i], hf[i], 1e-12 * hf[i]) << i;
}

TEST(RopeInvFreq, Llama3FromLlamaCppFreqFactorsMatchesTheHfParameters) {
  // convert_hf_to_gguf.py's rope_freqs.weight: 1 / ((1 - smooth) / factor + smooth), as F32.
  ModelConfig gguf = Llama31Rope();
  for (int i = 0; i < 64; ++i) {
    const double freq = 1.0 / std::pow(500000.0, 2.0 * i / 128);
    const double wavelen = 2.0 * M_PI / freq;
    double f = 1.0;
    if (wavelen > 8192.0) {
      f = 8.0;
    } else if (wavelen >= 2048.0) {
      const double smooth = (8192.0 / wavelen - 1.0) / 3.0;
      f = 1.0 / ((1.0 - smooth) / 8.0 + smooth);
    }
    gguf.rope_freq_factors.push_back(static_cast<float>(f));
  }
  gguf.rope_original_context = 0;  // GGUF files do not record the parameters
  const std::vector<double> a = RopeInvFreq(gguf), b = RopeInvFreq(Llama31Rope());
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(a[i], b[i], 1e-7 * b[i]) << i;
  EXPECT_TRUE(gguf.ValidateRopeScaling().ok());
  gguf.rope_freq_factors.pop_back();
  EXPECT_FALSE(gguf.ValidateRopeScaling().ok());
}

// A minimal llama GGUF with extra RoPE keys / tensors, read back through ModelConfigFromGguf.
class GgufRope : public ::testing::Test {
 protected:
  void SetUp() override {
    w_.AddString("general.architecture", "llama");
    w_.AddUint32("llama.embedding_length", 64);
    w_.AddUint32("llama.block_count", 1);
    w_.AddUint32("llama.feed_forward_length", 128);
    w_.AddUint32("llama.attention.head_count", 4);
    w_.AddUint32("llama.context_length", 256);
    ASSERT_TRUE(
        w_.AddTensor("token_embd.weight", GgmlType::kF32, {64, 8}, std::vector<uint8_t>(64 * 8 * 4))
            .ok());
  }
  Result<ModelConfig> Read() {
    if (Status st = w_.Write(path_); !st.ok()) return st;
    PAGODA_ASSIGN_OR_RETURN(auto f, GgufFile::Open(path_));
    return ModelConfigFromGguf(*f);
  }
  testing::TempDir dir_;
  const std::string path_ = dir_.File("rope.gguf");
  GgufWriter w_;
};

TEST_F(GgufRope, NoScalingByDefault) {
  auto c = Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kNone);
  EXPECT_TRUE(c->rope_freq_factors.empty());
}

TEST_F(GgufRope, LinearFromScalingKeys) {
  w_.AddString("llama.rope.scaling.type", "linear");
  w_.AddFloat32("llama.rope.scaling.factor", 2.0f);
  w_.AddUint32("llama.rope.scaling.original_context_length", 128);
  auto c = Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLinear);
  EXPECT_EQ(c->rope_scaling_factor, 2.0f);
  EXPECT_EQ(c->rope_original_context, 128);
  EXPECT_DOUBLE_EQ(RopeInvFreq(*c)[0], 0.5);
}

TEST_F(GgufRope, LegacyScaleLinear) {
  w_.AddFloat32("llama.rope.scale_linear", 4.0f);
  auto c = Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLinear);
  EXPECT_EQ(c->rope_scaling_factor, 4.0f);
}

TEST_F(GgufRope, Llama3FromRopeFreqsTensor) {
  std::vector<float> f(8, 1.0f);
  f[7] = 8.0f, f[6] = 3.0f;
  std::vector<uint8_t> bytes(32);
  std::memcpy(bytes.data(), f.data(), 32);
  ASSERT_TRUE(w_.AddTensor("rope_freqs.weight", GgmlType::kF32, {8}, bytes).ok());
  auto c = Read();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(c->rope_freq_factors, f);
  EXPECT_EQ(c->rope_scaling_factor, 8.0f);
  const std::vector<double> inv = RopeInvFreq(*c);
  EXPECT_DOUBLE_EQ(inv[6], std::pow(10000.0, -12.0 / 16) / 3.0);
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
}

TEST_F(GgufRope, RejectsYarn) {
  w_.AddString("llama.rope.scaling.type", "yarn");
  w_.AddFloat32("llama.rope.scaling.factor", 4.0f);
  auto c = Read();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("rope.scaling.type"), std::string::npos);
}

TEST_F(GgufRope, RejectsRopeFreqsOfTheWrongSize) {
  ASSERT_TRUE(
      w_.AddTensor("rope_freqs.weight", GgmlType::kF32, {5}, std::vector<uint8_t>(20)).ok());
  auto c = Read();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rope_freqs.weight"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
