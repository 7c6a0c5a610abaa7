#include <gtest/gtest.h>

#include "model/hf_model.h"

namespace pagoda {
namespace {

TEST(HfConfig, Llama3WithRopeScaling) {
  auto c = HfConfigFromJson(R"({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "vocab_size": 300, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "tie_word_embeddings": true, "bos_token_id": 1,
    "eos_token_id": [2, 5, 7], "hidden_act": "silu", "attention_bias": false,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->rope_layout, RopeLayout::kHalves);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->rope_dim, 16);
  EXPECT_EQ(c->context_length, 4096);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->bos_id, 1);
  EXPECT_EQ(c->eos_id, 2);
  EXPECT_EQ(c->eos_ids, (std::vector<int32_t>{2, 5, 7}));
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling_factor, 8.0f);
  EXPECT_FLOAT_EQ(c->rope_high_freq_factor, 4.0f);
  EXPECT_EQ(c->rope_original_context, 8192);
  EXPECT_FALSE(c->has_qkv_bias);
}

TEST(HfConfig, MistralSlidingWindowAndLinearScaling) {
  auto c = HfConfigFromJson(R"({
    "architectures": ["MistralForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "num_key_value_heads": 1, "intermediate_size": 96,
    "vocab_size": 100, "max_position_embeddings": 32768, "sliding_window": 4096,
    "rope_scaling": {"type": "linear", "factor": 2.0}, "eos_token_id": 2})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, "mistral");
  EXPECT_EQ(c->sliding_window, 4096);
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(c->rope_scaling_factor, 2.0f);
  EXPECT_FALSE(c->tied_embeddings);
  EXPECT_EQ(c->bos_id, -1);
  auto null_window = HfConfigFromJson(R"({
    "architectures": ["MistralForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 100,
    "max_position_embeddings": 32768, "sliding_window": null, "rope_scaling": null})");
  ASSERT_TRUE(null_window.ok()) << null_window.status().ToString();
  EXPECT_EQ(null_window->sliding_window, 0);
  EXPECT_EQ(null_window->n_kv_heads, 4);
}

TEST(HfConfig, Qwen2HasQkvBias) {
  auto c = HfConfigFromJson(R"({
    "architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
    "vocab_size": 100, "max_position_embeddings": 32768, "sliding_window": 32768,
    "use_sliding_window": false, "rope_theta": 1000000.0, "tie_word_embeddings": true})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, "qwen2");
  EXPECT_TRUE(c->has_qkv_bias);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_FALSE(c->has_qk_norm);
}

TEST(HfConfig, Qwen3HeadDimAndQkNorm) {
  auto c = HfConfigFromJson(R"({
    "architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "intermediate_size": 96, "vocab_size": 100, "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-06, "attention_bias": false})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, "qwen3");
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->q_dim(), 128);
  EXPECT_TRUE(c->has_qk_norm);
  EXPECT_FALSE(c->has_qkv_bias);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-6f);
}

TEST(HfConfig, DeeplyNestedConfigIsRefusedBeforeParsing) {
  const std::string deep = "{\"a\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_EQ(HfConfigFromJson(deep).status().message(),
            "config.json: JSON nested deeper than 256 levels (at byte 261)");
}

TEST(HfConfig, ErrorsNameTheKey) {
  const std::string base = R"("hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 100,
    "max_position_embeddings": 128)";
  auto err = [&](const std::string& extra) {
    return HfConfigFromJson("{" + base + ", " + extra + "}").status().message();
  };
  EXPECT_NE(err(R"("architectures": ["GPT2LMHeadModel"])").find("architectures[0]"),
            std::string::npos);
  EXPECT_NE(err(R"("architectures": ["LlamaForCausalLM"], "rope_scaling": {"type": "yarn",
                   "factor": 4})")
                .find("rope_scaling.type"),
            std::string::npos);
  EXPECT_NE(
      err(R"("architectures": ["LlamaForCausalLM"], "eos_token_id": "x")").find("eos_token_id"),
      std::string::npos);
  EXPECT_NE(err(R"("architectures": ["LlamaForCausalLM"], "eos_token_id": 100)")
                .find("outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(
      err(R"("architectures": ["LlamaForCausalLM"], "num_key_value_heads": 3)").find("n_kv_heads"),
      std::string::npos);
  EXPECT_NE(
      err(R"("architectures": ["LlamaForCausalLM"], "hidden_act": "gelu")").find("hidden_act"),
      std::string::npos);
  EXPECT_NE(HfConfigFromJson(R"({"architectures": ["LlamaForCausalLM"]})")
                .status()
                .message()
                .find("hidden_size"),
            std::string::npos);
  EXPECT_FALSE(HfConfigFromJson("{").ok());
  EXPECT_FALSE(HfConfigFromJson("[]").ok());
}

}  // namespace
}  // namespace pagoda
