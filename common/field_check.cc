#include "common/field_check.h"

namespace pagoda {

std::string DescribeRange(const IntRange& range) {
  const std::string min = std::to_string(range.min);
  const std::string max = std::to_string(range.max);
  if (range.power_of_two) return "a power of two in " + min + ".." + max;
  if (range.max == kInt32Max || range.max == kInt64Max) return "an integer >= " + min;
  return "an integer in " + min + ".." + max;
}

std::string DescribeChoices(std::span<const std::string_view> choices) {
  std::string s = "one of ";
  for (size_t i = 0; i < choices.size(); ++i) s += (i > 0 ? ", " : "") + std::string(choices[i]);
  return s;
}

Status CheckRange(std::string_view key, int64_t value, const IntRange& range) {
  if (range.Contains(value)) return Status::Ok();
  return InvalidArgument(std::string(key) + ": expected " + DescribeRange(range) + ", got " +
                         std::to_string(value));
}

}  // namespace pagoda
