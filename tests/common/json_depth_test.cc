// CheckJsonDepth: the nesting pre-scan every model JSON file goes through before nlohmann.
#include "common/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace pagoda {
namespace {

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonDepth, AcceptsUpToTheLimitAndNamesTheFileBeyond) {
  EXPECT_TRUE(CheckJsonDepth(Nested(256), "x.json").ok());
  EXPECT_TRUE(CheckJsonDepth(R"({"a": [{"b": [1, 2]}], "c": {}})", "x.json", 4).ok());
  EXPECT_FALSE(CheckJsonDepth(R"({"a": [{"b": [1, 2]}], "c": {}})", "x.json", 3).ok());
  const Status st = CheckJsonDepth(Nested(200000), "config.json");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "config.json: JSON nested deeper than 256 levels (at byte 256)");
  EXPECT_EQ(CheckJsonDepth(R"({"a": {"b": {}}})", "y", 2).message(),
            "y: JSON nested deeper than 2 levels (at byte 12)");
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  EXPECT_TRUE(CheckJsonDepth(R"(["[[[[", "{{{{\"[[[["])", "s", 1).ok());
  EXPECT_TRUE(CheckJsonDepth(R"(["\\", ["x"]])", "s", 2).ok());  // an escaped backslash ends
  EXPECT_FALSE(CheckJsonDepth(R"(["\\", [["x"]]])", "s", 2).ok());
  // Closing brackets without openers (invalid JSON, left to the parser) never go negative.
  EXPECT_FALSE(CheckJsonDepth("]]]]" + Nested(3), "s", 2).ok());
}

}  // namespace
}  // namespace pagoda
