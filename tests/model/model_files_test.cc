// What a model's files say beyond weights (model/model.h, model/generation_defaults.h): chat
// templates (GGUF default and named; HF string, named list, chat_template.jinja), stop tokens
// (GGUF eos / eot / eom, HF EOS lists) and sampling defaults, and how paths are classified.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/gguf_writer.h"
#include "model/hf_model.h"
#include "model/make_model.h"
#include "model/model.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

using testing::TempDir;

MakeModelOptions SmallModel(const std::string& output) {
  MakeModelOptions o;
  o.n_layers = 1;
  o.context_length = 32;
  o.output = output;
  return o;
}

// Copies a GGUF, adding `extra` string keys and uint32 keys.
void CopyWithKeys(const std::string& from, const std::string& to,
                  const std::vector<std::pair<std::string, std::string>>& strings,
                  const std::vector<std::pair<std::string, uint32_t>>& ids) {
  auto f = GgufFile::Open(from);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  GgufWriter w;
  for (const auto& [key, value] : (*f)->metadata()) {
    if (key != "general.alignment") w.AddValue(key, value);
  }
  for (const auto& [key, value] : strings) w.AddString(key, value);
  for (const auto& [key, value] : ids) w.AddUint32(key, value);
  for (const GgufTensor& t : (*f)->tensors()) {
    ASSERT_TRUE(w.AddTensor(t.name, t.type, t.ne, {t.data, t.data + t.nbytes}).ok());
  }
  ASSERT_TRUE(w.Write(to).ok());
}

TEST(ModelFiles, GgufTemplatesAndStopTokens) {
  TempDir dir;
  MakeModelOptions o = SmallModel(dir.File("base.gguf"));
  o.control_tokens = {"<|im_start|>", "<|im_end|>", "<|eom|>"};
  ASSERT_TRUE(MakeModel(o).ok());
  auto base = LoadModel(o.output);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  const int32_t n = (*base)->tokenizer->vocab_size();  // the three control tokens are last
  // Without an eot key, a control token spelled like a known end-of-turn token is one.
  EXPECT_EQ((*base)->generation.stop_token_ids, (std::vector<int32_t>{2, n - 2}));
  EXPECT_TRUE((*base)->chat_template.empty());

  CopyWithKeys(o.output, dir.File("m.gguf"),
               {{"tokenizer.chat_template", "D"}, {"tokenizer.chat_template.tool_use", "T"}},
               {{"tokenizer.ggml.eot_token_id", static_cast<uint32_t>(n - 3)},
                {"tokenizer.ggml.eom_token_id", static_cast<uint32_t>(n - 1)},
                {"tokenizer.ggml.padding_token_id", 0}});
  auto m = LoadModel(dir.File("m.gguf"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->chat_template, "D");
  EXPECT_EQ((*m)->named_chat_templates, (std::map<std::string, std::string>{{"tool_use", "T"}}));
  EXPECT_EQ((*m)->generation.stop_token_ids, (std::vector<int32_t>{2, n - 3, n - 1}));
  EXPECT_EQ((*m)->generation.pad_id, 0);
  EXPECT_FALSE((*m)->generation.temperature.has_value());
}

TEST(ModelFiles, HfTemplatesEosListsAndSamplingDefaults) {
  TempDir dir;
  MakeModelOptions o = SmallModel(dir.File("hf"));
  o.format = "safetensors";
  ASSERT_TRUE(MakeModel(o).ok());
  const std::string hf = dir.File("hf");
  std::ofstream(hf + "/tokenizer_config.json")
      << R"({"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<unk>", "chat_template": [)"
         R"({"name": "rag", "template": "R"}, {"name": "default", "template": "D"}]})";
  std::ofstream(hf + "/generation_config.json")
      << R"({"eos_token_id": [2, 9, 2], "temperature": 0.7, "top_k": -1,)"
         R"( "repetition_penalty": 1.1})";
  auto m = LoadModel(hf);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->chat_template, "D");
  EXPECT_EQ((*m)->named_chat_templates, (std::map<std::string, std::string>{{"rag", "R"}}));
  const GenerationDefaults& g = (*m)->generation;
  EXPECT_EQ(g.stop_token_ids, (std::vector<int32_t>{2, 9}));
  EXPECT_EQ(g.pad_id, 0);
  EXPECT_EQ(g.temperature, 0.7f);
  EXPECT_EQ(g.top_k, 0);  // -1: off
  EXPECT_EQ(g.repetition_penalty, 1.1f);
  EXPECT_FALSE(g.top_p.has_value());

  // A plain string, else chat_template.jinja; bad values name the file and key.
  std::ofstream(hf + "/tokenizer_config.json") << R"({"bos_token": "<s>"})";
  std::ofstream(hf + "/chat_template.jinja") << "J";
  std::ofstream(hf + "/generation_config.json") << R"({"top_p": 2})";
  m = LoadModel(hf);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("generation_config.json: top_p: 2"), std::string::npos)
      << m.status().message();
  std::ofstream(hf + "/generation_config.json") << "{}";
  m = LoadModel(hf);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->chat_template, "J");
}

TEST(ModelFiles, PathsAreClassifiedAndDirectoriesSaySo) {
  TempDir dir;
  std::filesystem::create_directories(dir.File("d"));
  EXPECT_EQ(ClassifyModelPath(dir.File("d")).value(), ModelPathKind::kHfDirectory);
  std::ofstream(dir.File("tokenizer.json")) << "{}";
  EXPECT_EQ(ClassifyModelPath(dir.File("tokenizer.json")).value(), ModelPathKind::kTokenizerJson);
  std::ofstream(dir.File("x.model")) << "x";
  EXPECT_EQ(ClassifyModelPath(dir.File("x.model")).value(), ModelPathKind::kSentencePiece);
  EXPECT_EQ(ClassifyModelPath(dir.File("nope")).status().code(), StatusCode::kNotFound);
  auto m = LoadModel(dir.File("d"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("a directory without config.json"), std::string::npos);
  m = LoadModel(dir.File("tokenizer.json"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("a tokenizer file, not a model"), std::string::npos);
  auto read = ReadSmallFile(dir.File("d"), 1 << 20);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(), dir.File("d") + ": is a directory (expected a file)");
}

}  // namespace
}  // namespace pagoda
