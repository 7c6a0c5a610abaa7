// One synthetic model written as a GGUF and as a Hugging Face directory: both load through
// LoadModel and compute the same logits (for llama the Q/K permutation undoes the RoPE layouts;
// qwen2 / qwen3 use halves in both), for every architecture make-model writes (llama, qwen2 with
// QKV biases, qwen3 with QK-norm and head_dim != hidden / heads) and with RoPE scaling (linear
// from GGUF metadata, llama3 from rope_freqs.weight vs config.json's parameters).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>

#include "model/hf_model.h"
#include "model/make_model.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "tests/reference/llama_forward.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

// make-model's tiny preset cut to 2 layers, written into a fresh temporary directory that is
// removed with the fixture (even after a failed ASSERT).
class TinyModelTest : public ::testing::Test {
 protected:
  MakeModelOptions TinyOptions(const std::string& format, const std::string& out) const {
    MakeModelOptions o;
    o.preset = "tiny";
    o.n_layers = 2;
    o.format = format;
    o.output = out;
    return o;
  }
  testing::TempDir dir_;
};

float MaxAbs(std::span<const float> a) {
  float m = 0;
  for (float v : a) m = std::max(m, std::fabs(v));
  return m;
}

class CrossFormat : public TinyModelTest, public ::testing::WithParamInterface<GgmlType> {
 protected:
  MakeModelOptions Options(const std::string& format, const std::string& out) const {
    MakeModelOptions o = TinyOptions(format, out);
    o.dtype = GetParam();
    o.context_length = 64;
    o.seed = 7;
    return o;
  }
};

TEST_P(CrossFormat, SameLogitsFromGgufAndSafetensors) {
  const std::string gguf = dir_.File("m.gguf"), hf = dir_.File("hf");
  ASSERT_TRUE(MakeModel(Options("gguf", gguf)).ok());
  Status st = MakeModel(Options("safetensors", hf));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(fs::exists(hf + "/.make-model.tmp.gguf"));
  auto a = LoadModel(gguf);
  auto b = LoadModel(hf);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*a)->config.rope_layout, RopeLayout::kInterleaved);
  EXPECT_EQ((*b)->config.rope_layout, RopeLayout::kHalves);
  EXPECT_EQ((*b)->file, nullptr);
  EXPECT_NE((*b)->safetensors, nullptr);
  EXPECT_EQ((*a)->config.vocab_size, (*b)->config.vocab_size);
  EXPECT_EQ((*a)->config.eos_id, (*b)->config.eos_id);
  const std::string text = "Hello, world! 123";
  const auto ids = (*a)->tokenizer->Encode(text, true);
  EXPECT_EQ(ids, (*b)->tokenizer->Encode(text, true));
  EXPECT_EQ((*b)->tokenizer->bos_id(), (*a)->tokenizer->bos_id());

  cpu::LlamaForward fa((*a)->config, (*a)->weights, 64), fb((*b)->config, (*b)->weights, 64);
  auto la = fa.Forward(ids, true);
  ASSERT_TRUE(la.ok()) << la.status().ToString();
  std::vector<float> logits_a(la->begin(), la->end());
  auto lb = fb.Forward(ids, true);
  ASSERT_TRUE(lb.ok()) << lb.status().ToString();
  ASSERT_EQ(logits_a.size(), lb->size());
  // With AVX512-BF16 the BF16 matmul rounds activations to bf16 (kernels/cpu/matmul/matmul.h), so
  // the last-bit differences of the attention sums (whose order the layouts change) can flip a
  // rounding: BF16 gets a looser bound. F32 and F16 keep fp32 activations.
  const float tol = GetParam() == GgmlType::kBF16 ? 5e-2f : 1e-4f;
  const float max_abs = MaxAbs(logits_a);
  EXPECT_LT(testing::MaxAbsDiff(logits_a, *lb), tol) << "max |logit| " << max_abs;
  EXPECT_GT(max_abs, 0.1f);
  // A decode step too (positions > 0 with a cache).
  const int32_t next[] = {ids.back()};
  auto da = fa.Forward(next, false);
  ASSERT_TRUE(da.ok());
  std::vector<float> step_a(da->begin(), da->end());
  auto db = fb.Forward(next, false);
  ASSERT_TRUE(db.ok());
  for (size_t i = 0; i < step_a.size(); ++i) ASSERT_NEAR(step_a[i], (*db)[i], tol) << i;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CrossFormat,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16),
                         [](const auto& info) { return std::string(TypeName(info.param)); });

struct ArchCase {
  const char* name;
  const char* arch;
  int32_t head_dim;  // 0: hidden / heads
  const char* rope_scaling;
};

class CrossArch : public TinyModelTest, public ::testing::WithParamInterface<ArchCase> {
 protected:
  MakeModelOptions Options(const std::string& format, const std::string& out,
                           const char* rope_scaling) const {
    MakeModelOptions o = TinyOptions(format, out);
    o.context_length = 128;
    o.seed = 11;
    o.arch = GetParam().arch;
    o.head_dim = GetParam().head_dim;
    o.rope_scaling = *ParseRopeScalingSpec(rope_scaling);
    return o;
  }
};

// Logits at every prompt position, then at three decode steps, concatenated.
std::vector<float> AllLogits(const Model& m, const std::vector<int32_t>& ids) {
  cpu::LlamaForward f(m.config, m.weights, 128);
  auto prompt = f.Forward(ids, true);
  EXPECT_TRUE(prompt.ok()) << prompt.status().ToString();
  if (!prompt.ok()) return {};
  std::vector<float> out(prompt->begin(), prompt->end());
  for (int32_t next : {ids[1], ids[2], ids[3]}) {
    auto step = f.Forward(std::span<const int32_t>(&next, 1), false);
    EXPECT_TRUE(step.ok());
    if (step.ok()) out.insert(out.end(), step->begin(), step->end());
  }
  return out;
}

TEST_P(CrossArch, SameLogitsFromGgufAndSafetensorsAtEveryPosition) {
  const ArchCase& k = GetParam();
  const std::string gguf = dir_.File("m.gguf"), hf = dir_.File("hf");
  ASSERT_TRUE(MakeModel(Options("gguf", gguf, k.rope_scaling)).ok());
  Status st = MakeModel(Options("safetensors", hf, k.rope_scaling));
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto a = LoadModel(gguf);
  auto b = LoadModel(hf);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const ModelConfig &ca = (*a)->config, &cb = (*b)->config;
  const bool llama = std::string(k.arch) == "llama";
  EXPECT_EQ(ca.architecture, k.arch);
  EXPECT_EQ(cb.architecture, k.arch);
  EXPECT_EQ(ca.rope_layout, llama ? RopeLayout::kInterleaved : RopeLayout::kHalves);
  EXPECT_EQ(cb.rope_layout, RopeLayout::kHalves);
  EXPECT_EQ(ca.has_qkv_bias, std::string(k.arch) == "qwen2");
  EXPECT_EQ(cb.has_qkv_bias, ca.has_qkv_bias);
  EXPECT_EQ(ca.has_qk_norm, std::string(k.arch) == "qwen3");
  EXPECT_EQ(cb.has_qk_norm, ca.has_qk_norm);
  EXPECT_EQ(ca.head_dim, k.head_dim > 0 ? k.head_dim : 32);
  EXPECT_EQ(cb.head_dim, ca.head_dim);
  EXPECT_EQ(ca.rope_scaling, cb.rope_scaling);
  EXPECT_EQ(ca.rope_scaling, ParseRopeScalingSpec(k.rope_scaling)->type);
  EXPECT_EQ(ca.rope_freq_factors.empty(), ca.rope_scaling != RopeScaling::kLlama3);
  EXPECT_TRUE(cb.rope_freq_factors.empty());

  const std::string text = "The quick brown fox jumps over the lazy dog; 0123456789 and more!";
  const auto ids = (*a)->tokenizer->Encode(text, true);
  ASSERT_EQ(ids, (*b)->tokenizer->Encode(text, true));
  ASSERT_GT(ids.size(), 50u);
  const std::vector<float> la = AllLogits(**a, ids), lb = AllLogits(**b, ids);
  const double diff = testing::MaxAbsDiff(la, lb);
  const float max_abs = MaxAbs(la);
  std::printf(
      "[cross-format] %-14s %zu positions + 3 decode steps: max |GGUF - HF| = %.3g "
      "(max |logit| %.3g)\n",
      k.name, ids.size(), diff, max_abs);
  RecordProperty("max_diff", std::to_string(diff));
  EXPECT_LE(diff, 1e-4f);
  EXPECT_GT(max_abs, 0.1f);

  if (ca.rope_scaling != RopeScaling::kNone) {  // the scaling is really applied
    const std::string plain = dir_.File("plain.gguf");
    ASSERT_TRUE(MakeModel(Options("gguf", plain, "none")).ok());
    auto p = LoadModel(plain);
    ASSERT_TRUE(p.ok());
    EXPECT_GT(testing::MaxAbsDiff(AllLogits(**p, ids), la), 1e-2);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, CrossArch,
                         ::testing::Values(ArchCase{"llama", "llama", 0, "none"},
                                           ArchCase{"qwen2_bias", "qwen2", 0, "none"},
                                           ArchCase{"qwen3_qk_norm", "qwen3", 48, "none"},
                                           ArchCase{"llama_llama3", "llama", 0, "llama3:8,1,4,32"},
                                           ArchCase{"qwen2_linear", "qwen2", 0, "linear:4"},
                                           ArchCase{"qwen3_llama3", "qwen3", 48,
                                                    "llama3:4,1,4,64"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(HfLoad, RejectsQuantizedSafetensorsAndMissingTensors) {
  MakeModelOptions o;
  o.dtype = GgmlType::kQ8_0;
  o.format = "safetensors";
  const testing::TempDir tmp;
  o.output = tmp.File("q8");
  EXPECT_NE(MakeModel(o).message().find("safetensors"), std::string::npos);
  EXPECT_FALSE(LoadModel(tmp.File("no_such_dir")).ok());
}

// The make-model directory re-dressed as Qwen3 (head_dim, q_norm / k_norm) and Qwen2 (biases).
TEST(HfLoad, Qwen3AndQwen2Bind) {
  const testing::TempDir tmp;
  const fs::path dir = tmp.File("hf");
  MakeModelOptions o;
  o.n_layers = 1;
  o.context_length = 32;
  o.format = "safetensors";
  o.output = dir.string();
  ASSERT_TRUE(MakeModel(o).ok());
  auto file = SafetensorsFile::Open((dir / "model.safetensors").string());
  ASSERT_TRUE(file.ok());
  std::vector<SafetensorsWriteTensor> ts;
  for (const auto& t : (*file)->tensors()) {
    ts.push_back({t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes())});
  }
  file->reset();
  const std::string a = "model.layers.0.self_attn.";
  std::vector<uint8_t> ones(32 * 4);
  for (size_t i = 0; i < 32; ++i) std::memcpy(ones.data() + 4 * i, "\x00\x00\x80\x3f", 4);
  ts.push_back({a + "q_norm.weight", "F32", {32}, ones});
  ts.push_back({a + "k_norm.weight", "F32", {32}, ones});
  ts.push_back({a + "q_proj.bias", "F32", {256}, std::vector<uint8_t>(1024)});
  ts.push_back({a + "k_proj.bias", "F32", {64}, std::vector<uint8_t>(256)});
  ts.push_back({a + "v_proj.bias", "F32", {64}, std::vector<uint8_t>(256)});
  ASSERT_TRUE(WriteSafetensors((dir / "model.safetensors").string(), ts).ok());
  std::ifstream in((dir / "config.json").string());
  std::string cfg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* arch : {"Qwen3ForCausalLM", "Qwen2ForCausalLM"}) {
    std::string c = cfg;
    c.replace(c.find("LlamaForCausalLM"), 16, arch);
    std::ofstream((dir / "config.json").string()) << c;
    auto m = LoadModel(dir.string());
    ASSERT_TRUE(m.ok()) << arch << ": " << m.status().ToString();
    const LayerWeights& l = (*m)->weights.layers[0];
    if (std::string(arch) == "Qwen3ForCausalLM") {
      EXPECT_TRUE((*m)->config.has_qk_norm);
      ASSERT_EQ(l.q_norm.size(), 32u);
      EXPECT_EQ(l.k_norm[31], 1.0f);
    } else {
      EXPECT_EQ(l.bq.size(), 256u);
      EXPECT_TRUE(l.q_norm.empty());
    }
  }
}

}  // namespace
}  // namespace pagoda
