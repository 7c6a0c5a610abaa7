#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/test_data.h"

namespace pagoda {
namespace {

std::vector<uint8_t> Floats(std::vector<float> v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<SafetensorsWriteTensor> SampleTensors() {
  return {{"a.weight", "F32", {2, 3}, Floats({1, 2, 3, 4, 5, 6})},
          {"b.bias", "F16", {2}, {0x00, 0x3c, 0x00, 0xc0}},
          {"c", "BF16", {1, 1}, {0x80, 0x3f}},
          {"ids", "I64", {1}, std::vector<uint8_t>(8, 0)}};
}

// An image with a hand-written header (padded to 8) and `data_bytes` zero bytes of data.
std::vector<uint8_t> Image(const std::string& header, size_t data_bytes, uint64_t len = 0) {
  const uint64_t n = len ? len : header.size();
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  s += header;
  s.append(data_bytes, '\0');
  return std::vector<uint8_t>(s.begin(), s.end());
}

Status ParseStatus(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::Parse(bytes).status();
}

TEST(Safetensors, RoundTrip) {
  auto bytes = SerializeSafetensors(SampleTensors(), {{"format", "pt"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto f = SafetensorsFile::Parse(*bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  ASSERT_EQ((*f)->tensors().size(), 4u);
  const SafetensorsTensor* a = (*f)->Find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, GgmlType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  float x[6];
  std::memcpy(x, a->data, 24);
  EXPECT_EQ(x[5], 6.0f);
  EXPECT_EQ((*f)->Find("b.bias")->type, GgmlType::kF16);
  EXPECT_EQ((*f)->Find("c")->type, GgmlType::kBF16);
  const SafetensorsTensor* ids = (*f)->Find("ids");
  EXPECT_FALSE(ids->type.has_value());
  EXPECT_EQ(ids->CheckSupported().code(), StatusCode::kUnimplemented);
  EXPECT_NE(ids->CheckSupported().message().find("I64"), std::string::npos);
}

TEST(Safetensors, OpenFileAndShardedDir) {
  const testing::TempDir tmp;
  const std::filesystem::path dir = tmp.path();
  auto ts = SampleTensors();
  ASSERT_TRUE(WriteSafetensors((dir / "s1.safetensors").string(), {ts[0], ts[1]}).ok());
  ASSERT_TRUE(WriteSafetensors((dir / "s2.safetensors").string(), {ts[2]}).ok());
  std::ofstream((dir / "model.safetensors.index.json").string())
      << R"({"metadata": {}, "weight_map": {"a.weight": "s1.safetensors",
            "b.bias": "s1.safetensors", "c": "s2.safetensors"}})";
  auto set = SafetensorsSet::OpenDir(dir.string());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ((*set)->num_tensors(), 3u);
  EXPECT_EQ((*set)->FileOf("c"), "s2.safetensors");
  EXPECT_NE((*set)->Find("b.bias"), nullptr);
  // A weight_map entry missing from its shard, and a path escaping the directory.
  std::ofstream((dir / "model.safetensors.index.json").string())
      << R"({"weight_map": {"c": "s1.safetensors"}})";
  auto bad = SafetensorsSet::OpenDir(dir.string());
  EXPECT_NE(bad.status().message().find("weight_map.c"), std::string::npos);
  EXPECT_NE(ParseSafetensorsIndex(R"({"weight_map": {"x": "../etc/passwd"}})")
                .status()
                .message()
                .find("plain file name"),
            std::string::npos);
  EXPECT_FALSE(ParseSafetensorsIndex("{").ok());
}

struct HostileCase {
  std::string header;
  size_t data_bytes;
  uint64_t len;
  std::string expect;  // substring of the error
};

TEST(Safetensors, HostileHeadersNameTheField) {
  const std::string ok = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::vector<HostileCase> cases = {
      {ok, 8, uint64_t{1} << 62, "header length"},
      {ok, 8, 200, "header length"},
      {"{not json", 0, 0, "not valid JSON"},
      {"[1,2]", 0, 0, "JSON object"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       16, 0, "duplicate name 't'"},
      {R"({"t":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8, 0, "t'.dtype"},
      {R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, 0, "needs 12 bytes"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, 0, "outside the data"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8, 0, "data_offsets"},
      {R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, 0, "shape[0]"},
      {R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})", 8, 0,
       "overflows"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, 0, "overlaps"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, 0, "a hole"},
      {R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8, 0, "cover 4"},
      {R"({"__metadata__":{"k":1}})", 0, 0, "__metadata__.k"},
      {R"({"t":{"dtype":"F32","shape":[2]}})", 8, 0, "t'.data_offsets"},
      {R"({"t":[1]})", 0, 0, "expected an object"},
      {"{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}", 0, 0,
       "header: JSON nested deeper than 256 levels"},
  };
  for (const auto& c : cases) {
    Status st = ParseStatus(Image(c.header, c.data_bytes, c.len));
    EXPECT_FALSE(st.ok()) << c.header;
    EXPECT_NE(st.message().find(c.expect), std::string::npos)
        << "want '" << c.expect << "' in: " << st.message();
  }
  EXPECT_FALSE(ParseStatus({1, 2, 3}).ok());
  EXPECT_TRUE(ParseStatus(Image(ok, 8)).ok());
}

// The index is reported as the index (it used to say "header: not valid JSON").
TEST(Safetensors, BrokenIndexIsReportedAsTheIndex) {
  EXPECT_EQ(ParseSafetensorsIndex("{not json").status().message(), "index: not valid JSON");
  EXPECT_EQ(ParseSafetensorsIndex("[1]").status().message(), "index: expected a JSON object");
  const Status deep =
      ParseSafetensorsIndex(std::string(200000, '{') + std::string(200000, '}')).status();
  EXPECT_EQ(deep.message(), "index: JSON nested deeper than 256 levels (at byte 256)");
}

// Thousands of mutated images: each parses or fails cleanly; parsed tensors stay in bounds.
TEST(Safetensors, FuzzedHeadersNeverCrash) {
  auto base = SerializeSafetensors(SampleTensors(), {{"format", "pt"}});
  ASSERT_TRUE(base.ok());
  const size_t header_end = 8 + ((*base)[0] | ((*base)[1] << 8));
  std::mt19937_64 rng(42);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> img = *base;
    const int mode = iter % 4;
    if (mode == 0) {  // flip bytes inside the JSON header
      for (int k = 0; k < 1 + iter % 4; ++k) img[8 + rng() % (header_end - 8)] = rng() & 0xff;
    } else if (mode == 1) {  // replace a digit, bracket or quote with another such character
      const char* alphabet = "0123456789[]{}\":,-e.";
      for (int k = 0; k < 1 + iter % 3; ++k) {
        img[8 + rng() % (header_end - 8)] = alphabet[rng() % std::strlen(alphabet)];
      }
    } else if (mode == 2) {  // bad header length
      const uint64_t len = rng() % 4 == 0 ? rng() : rng() % (img.size() + 16);
      for (int i = 0; i < 8; ++i) img[i] = (len >> (8 * i)) & 0xff;
    } else {  // truncation
      img.resize(rng() % img.size());
    }
    auto f = SafetensorsFile::Parse(img);
    if (!f.ok()) {
      EXPECT_FALSE(f.status().message().empty());
      ++rejected;
      continue;
    }
    ++parsed;
    for (const auto& t : (*f)->tensors()) {
      ASSERT_GE(t.data, img.data());
      ASSERT_LE(t.data + t.nbytes(), img.data() + img.size());
    }
  }
  EXPECT_GT(rejected, 1000);
  std::printf("fuzz: %d parsed, %d rejected\n", parsed, rejected);
}

}  // namespace
}  // namespace pagoda
