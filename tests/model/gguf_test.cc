#include "model/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "model/gguf_writer.h"
#include "model/model.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

using testing::TempDir;

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A small valid GGUF image with every metadata type and two tensors.
std::vector<uint8_t> SampleImage(const TempDir& dir) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("u32", 7);
  w.AddInt32("i32", -3);
  w.AddFloat32("f32", 0.5f);
  w.AddBool("flag", true);
  w.AddStringArray("strs", {"a", "bc", ""});
  w.AddFloat32Array("floats", {1.0f, -2.0f});
  w.AddInt32Array("ints", {4, 5, 6});
  std::vector<float> data(64);
  for (int i = 0; i < 64; ++i) data[i] = static_cast<float>(i);
  std::vector<uint8_t> bytes(64 * 4);
  std::memcpy(bytes.data(), data.data(), bytes.size());
  EXPECT_TRUE(w.AddTensor("tensor_a", GgmlType::kF32, {16, 4}, bytes).ok());
  std::vector<uint8_t> q8(2 * 34);
  QuantizeRow(GgmlType::kQ8_0, data.data(), q8.data(), 64);
  EXPECT_TRUE(w.AddTensor("b", GgmlType::kQ8_0, {64}, q8).ok());
  const std::string path = dir.File("sample.gguf");
  EXPECT_TRUE(w.Write(path).ok());
  return ReadAll(path);
}

TEST(Gguf, RoundTripsAllValueTypesAndTensors) {
  TempDir dir;
  auto image = SampleImage(dir);
  auto f = GgufFile::Parse(image);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ(*(*f)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*f)->GetInt("u32"), 7);
  EXPECT_EQ(*(*f)->GetInt("i32"), -3);
  EXPECT_EQ(*(*f)->GetFloat("f32"), 0.5);
  EXPECT_TRUE(*(*f)->GetBool("flag"));
  EXPECT_EQ((*f)->FindArray("strs")->arr_str, (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ((*f)->FindArray("ints")->arr_i, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ((*f)->FindArray("floats")->arr_f, (std::vector<double>{1.0, -2.0}));
  const GgufTensor* a = (*f)->FindTensor("tensor_a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->ne, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(reinterpret_cast<const float*>(a->data)[63], 63.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data) % 32,
            reinterpret_cast<uintptr_t>(image.data()) % 32);
  const GgufTensor* b = (*f)->FindTensor("b");
  ASSERT_NE(b, nullptr);
  std::vector<float> back(64);
  DequantizeRow(b->type, b->data, back.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(back[i], i, 0.3);
}

TEST(Gguf, TypedGettersNameTheKey) {
  TempDir dir;
  auto image = SampleImage(dir);
  auto f = GgufFile::Parse(image);
  ASSERT_TRUE(f.ok());
  auto missing = (*f)->GetInt("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos);
  auto wrong = (*f)->GetInt("general.architecture");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("expected an integer"), std::string::npos);
}

struct BadCase {
  const char* name;
  std::function<void(std::vector<uint8_t>&)> corrupt;
  const char* expected_field;
};

void Put64(std::vector<uint8_t>& b, size_t off, uint64_t v) { std::memcpy(&b[off], &v, 8); }
void Put32(std::vector<uint8_t>& b, size_t off, uint32_t v) { std::memcpy(&b[off], &v, 4); }

// Offset of the first occurrence of `s` in the image.
size_t Find(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  return static_cast<size_t>(it - b.begin());
}

// Offset just past the name of tensor "tensor_a" in the tensor table: n_dims, then ne[0..1]
// (+4, +12), type (+20), offset (+24).
size_t TensorA(const std::vector<uint8_t>& b) { return Find(b, "tensor_a") + 8; }

TEST(Gguf, RejectsHandMadeBadFilesWithTheField) {
  TempDir dir;
  const auto good = SampleImage(dir);
  const std::vector<BadCase> cases = {
      {"bad magic", [](auto& b) { b[0] = 'X'; }, "magic"},
      {"version 1", [](auto& b) { Put32(b, 4, 1); }, "version"},
      {"version 99", [](auto& b) { Put32(b, 4, 99); }, "version"},
      {"huge tensor count", [](auto& b) { Put64(b, 8, 1ull << 60); }, "tensor_count"},
      {"huge kv count", [](auto& b) { Put64(b, 16, ~0ull); }, "metadata_kv_count"},
      {"huge key length", [](auto& b) { Put64(b, 24, 1ull << 62); }, "metadata key #0"},
      {"truncated header", [](auto& b) { b.resize(30); }, "cannot fit"},
      {"truncated before counts", [](auto& b) { b.resize(12); }, "truncated file"},
      {"unknown value type", [](auto& b) { Put32(b, Find(b, "u32") + 3, 77); },
       "unknown GGUF value type"},
      {"huge array", [](auto& b) { Put64(b, Find(b, "strs") + 4 + 8, 1ull << 61); }, "'strs'"},
      {"bad bool", [](auto& b) { b[Find(b, "flag") + 4 + 4] = 7; }, "'flag'"},
      {"unknown tensor type", [](auto& b) { Put32(b, TensorA(b) + 20, 99); }, "tensor 'tensor_a'"},
      {"n_dims 9", [](auto& b) { Put32(b, TensorA(b), 9); }, "n_dims"},
      {"zero dim", [](auto& b) { Put64(b, TensorA(b) + 4, 0); }, "ne[0]"},
      {"overflowing shape",
       [](auto& b) {
         const size_t at = TensorA(b) + 4;
         Put64(b, at, 1ull << 40);
         Put64(b, at + 8, 1ull << 40);
       },
       "overflows"},
      {"offset past end", [](auto& b) { Put64(b, TensorA(b) + 24, 1ull << 20); }, "past the end"},
      {"misaligned offset", [](auto& b) { Put64(b, TensorA(b) + 24, 4); }, "alignment"},
      {"truncated data", [](auto& b) { b.resize(b.size() - 40); }, "past the end"},
  };
  for (const BadCase& c : cases) {
    auto bytes = good;
    c.corrupt(bytes);
    auto f = GgufFile::Parse(bytes);
    ASSERT_FALSE(f.ok()) << c.name;
    EXPECT_NE(f.status().message().find(c.expected_field), std::string::npos)
        << c.name << ": " << f.status().ToString();
  }
}

TEST(Gguf, OpenReportsMissingFileAndNonGguf) {
  auto f = GgufFile::Open("/nonexistent/model.gguf");
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  TempDir dir;
  std::ofstream(dir.File("text.gguf")) << "hello, this is not a model";
  f = GgufFile::Open(dir.File("text.gguf"));
  EXPECT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("magic"), std::string::npos);
}

TEST(Gguf, ReadsTheSharedModels) {
  for (const char* rel :
       {"models/aidreams260K/aidreams260K-f32.gguf", "models/synth-gqa/llama-gqa-q4_k_m.gguf",
        "models/synth-gqa/qwen2-bias-f32.gguf"}) {
    auto f = GgufFile::Open(testing::SharedPath(rel));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_GT((*f)->tensors().size(), 10u) << rel;
  }
}

// NaN / Inf weights are refused at load with the tensor's name (they loaded silently and made
// every logit NaN): a norm is checked in full, a matrix on sampled rows (its first and last).
TEST(Gguf, NonFiniteWeightsAreRefusedAtLoad) {
  const std::string src = testing::SharedPath("models/aidreams260K/aidreams260K-f32.gguf");
  std::ifstream in(src, std::ios::binary);
  const std::string image{std::istreambuf_iterator<char>(in), {}};
  auto file =
      GgufFile::Parse(std::span(reinterpret_cast<const uint8_t*>(image.data()), image.size()));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  // Writes `value` over element `index` of tensor `name` in a copy of the model; loads the copy.
  auto load_with = [&](const char* name, int64_t index, float value) {
    const GgufTensor* t = (*file)->FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    std::string bytes = image;
    if (t != nullptr) {
      std::memcpy(bytes.data() + (*file)->data_offset() + t->offset + index * 4, &value, 4);
    }
    TempDir dir;
    std::ofstream(dir.File("m.gguf"), std::ios::binary) << bytes;
    return LoadModel(dir.File("m.gguf")).status();
  };
  EXPECT_TRUE(load_with("output_norm.weight", 0, 1.0f).ok());
  const Status norm = load_with("output_norm.weight", 3, std::nanf(""));
  EXPECT_EQ(norm.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(norm.message().find("output_norm: NaN at element 3 (the weights are corrupt)"),
            std::string::npos)
      << norm.ToString();
  const Status wq = load_with("blk.0.attn_q.weight", 1, INFINITY);
  EXPECT_NE(wq.message().find("layer 0 wq: Inf at row 0, element 1"), std::string::npos)
      << wq.ToString();
  const GgufTensor* embd = (*file)->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  const int64_t last_row_first = embd->num_elements() - embd->ne[0];
  const Status last = load_with("token_embd.weight", last_row_first, -INFINITY);
  EXPECT_NE(last.message().find("token_embd: Inf at row " + std::to_string(embd->ne[1] - 1)),
            std::string::npos)
      << last.ToString();
}

}  // namespace
}  // namespace pagoda
