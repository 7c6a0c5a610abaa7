// common/mapped_file: mapping whole files and reading small ones, and their errors.
#include "common/mapped_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_data.h"

namespace pagoda {
namespace {

using testing::TempDir;

TEST(MappedFile, MapsTheWholeFile) {
  TempDir dir;
  const std::string path = dir.File("a.bin");
  std::ofstream(path, std::ios::binary) << std::string("GGUF\0\x01xyz", 8);
  auto map = MappedFile::Open(path);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->bytes().size(), 8u);
  EXPECT_EQ(map->bytes()[0], 'G');
  EXPECT_EQ(map->bytes()[5], 0x01);
  MappedFile moved = std::move(map).value();
  EXPECT_EQ(moved.bytes().size(), 8u);
}

TEST(MappedFile, ErrorsStartWithThePath) {
  TempDir dir;
  const auto missing = MappedFile::Open(dir.File("missing.gguf"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message().rfind(dir.File("missing.gguf"), 0), 0u)
      << missing.status().ToString();
  std::filesystem::create_directories(dir.File("d"));
  EXPECT_EQ(MappedFile::Open(dir.File("d")).status().code(), StatusCode::kInvalidArgument);
}

TEST(ReadSmallFile, ReadsUpToTheLimit) {
  TempDir dir;
  const std::string path = dir.File("c.json");
  std::ofstream(path) << "{\"a\": 1}";
  EXPECT_EQ(*ReadSmallFile(path, 8), "{\"a\": 1}");
  EXPECT_EQ(ReadSmallFile(path, 7).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ReadSmallFile(dir.File("none.json"), 8).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace pagoda
