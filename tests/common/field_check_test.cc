// common/field_check: the ranges and enum tables every layer's config validation shares, and
// the one wording of their errors.
#include "common/field_check.h"

#include <gtest/gtest.h>

#include <string_view>
#include <utility>

namespace pagoda {
namespace {

TEST(FieldCheck, RangesContainTheirBoundsOnly) {
  constexpr IntRange r{1, 8};
  EXPECT_FALSE(r.Contains(0));
  EXPECT_TRUE(r.Contains(1));
  EXPECT_TRUE(r.Contains(8));
  EXPECT_FALSE(r.Contains(9));
  constexpr IntRange pow2{1, 256, /*power_of_two=*/true};
  for (int64_t v : {1, 2, 64, 256}) EXPECT_TRUE(pow2.Contains(v)) << v;
  for (int64_t v : {0, 3, 48, 512, -2}) EXPECT_FALSE(pow2.Contains(v)) << v;
}

TEST(FieldCheck, ErrorsNameTheKeyTheRangeAndTheValue) {
  EXPECT_TRUE(CheckRange("engine.max_num_seqs", 4, IntRange{1, 8}).ok());
  const Status st = CheckRange("engine.max_num_seqs", 0, IntRange{1, 65536});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "engine.max_num_seqs: expected an integer in 1..65536, got 0");
  EXPECT_EQ(CheckRange("k", -1, IntRange{0, kInt32Max}).message(),
            "k: expected an integer >= 0, got -1");
  EXPECT_TRUE(CheckRange("k", int64_t{1} << 40, IntRange{1, kInt64Max}).ok());
  EXPECT_EQ(CheckRange("kv_cache.block_size", 48, IntRange{1, 256, true}).message(),
            "kv_cache.block_size: expected a power of two in 1..256, got 48");
}

enum class Color { kRed, kGreen };
constexpr std::pair<std::string_view, Color> kColors[] = {{"red", Color::kRed},
                                                          {"green", Color::kGreen}};

TEST(FieldCheck, EnumTablesParseAndPrint) {
  EXPECT_EQ(ParseEnum<Color>(kColors, "green"), Color::kGreen);
  EXPECT_EQ(ParseEnum<Color>(kColors, "Green"), std::nullopt);  // names are exact
  EXPECT_EQ(EnumName<Color>(kColors, Color::kRed), "red");
  EXPECT_EQ(EnumName<Color>(kColors, static_cast<Color>(7)), "?");
  constexpr std::string_view names[] = {"fcfs", "priority"};
  EXPECT_EQ(DescribeChoices(names), "one of fcfs, priority");
  EXPECT_EQ(DescribeChoices({}), "one of ");
}

}  // namespace
}  // namespace pagoda
