// Fuzz-style robustness: randomly corrupted copies of valid GGUF files must each be rejected
// with an error or loaded -- never crash, hang or allocate without bound (run under ASan too).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

#include "model/gguf.h"
#include "model/model.h"
#include "tests/test_data.h"

namespace pagoda {
namespace {

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// One random corruption: flip bytes, overwrite a word with an extreme value, or truncate.
// Header bytes are targeted most, since that is where parsing decisions are made.
void Corrupt(std::vector<uint8_t>& b, size_t header_bytes, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const int kind = static_cast<int>(pick(4));
  const size_t region = pick(10) < 8 ? std::min(header_bytes, b.size()) : b.size();
  if (kind == 0) {
    for (size_t k = 0, n = 1 + pick(8); k < n; ++k) b[pick(region)] ^= 1u << pick(8);
  } else if (kind == 1) {
    static const uint64_t kValues[] = {
        0, 1, 0xffffffffull, 0x7fffffffffffffffull, ~0ull, 1ull << 32, 1ull << 40, 12, 9, 31};
    const size_t at = pick(region > 8 ? region - 8 : 1);
    const uint64_t v = kValues[pick(std::size(kValues))];
    std::memcpy(&b[at], &v, std::min<size_t>(pick(2) ? 8 : 4, b.size() - at));
  } else if (kind == 2) {
    b.resize(pick(b.size()));
  } else {
    for (size_t k = 0, n = 1 + pick(64); k < n; ++k) b[pick(region)] = static_cast<uint8_t>(rng());
  }
}

// Header size = offset of the data section (everything before it is metadata/tensor table).
size_t HeaderBytes(const std::vector<uint8_t>& image) {
  auto f = GgufFile::Parse(image);
  EXPECT_TRUE(f.ok());
  return f.ok() ? static_cast<size_t>((*f)->data_offset()) : image.size();
}

void FuzzFile(const std::string& path, int cases, uint64_t seed) {
  const auto image = ReadAll(path);
  ASSERT_FALSE(image.empty()) << "cannot read " << path;
  const size_t header = HeaderBytes(image);
  std::mt19937_64 rng(seed);
  int rejected = 0, loaded = 0;
  for (int i = 0; i < cases; ++i) {
    auto bytes = image;
    Corrupt(bytes, header, rng);
    auto f = GgufFile::Parse(bytes);
    if (!f.ok()) {
      EXPECT_FALSE(f.status().message().empty());
      ++rejected;
      continue;
    }
    // A file that parses must also be safe to interpret as a model.
    auto config = ModelConfigFromGguf(**f);
    if (config.ok()) (void)BindGgufWeights(**f, *config);
    (void)LoadGgufTokenizer(**f);
    ++loaded;
  }
  // Both outcomes happen: the corruptions reach past the parser's first checks, and they are
  // mostly caught there.
  EXPECT_GT(loaded, 0) << "no corrupted file parsed: the parser's later paths went untested";
  EXPECT_GT(rejected, cases / 4) << "corruptions should mostly be caught";
}

TEST(GgufFuzz, CorruptedAidreams) {
  FuzzFile(testing::SharedPath("models/aidreams260K/aidreams260K-f32.gguf"), 1000, 1);
}

TEST(GgufFuzz, CorruptedSynthQ8) {
  FuzzFile(testing::SharedPath("models/synth-gqa/llama-gqa-q8_0.gguf"), 500, 2);
}

}  // namespace
}  // namespace pagoda
