#include "common/field_check.h"

namespace pagoda {

std::string DescribeRange(const IntRange& range) {
  const std::string min = std::to_string(range.min);
  const std::string max = std::to_string(range.max);
  if (range.power_of_two) return "a power of two in " + min + ".." + max;
  if (range.max == kInt32Max || range.max == kInt64Max) return "an integer >= " + min;
  return "an integer in " + min + ".." + max;
}

Status CheckRange(std::string_view key, int64_t value, const IntRange& range) {
  if (range.Contains(value)) return Status::Ok();
  return InvalidArgument(std::string(key) + ": expected " + DescribeRange(range) + ", got " +
                         std::to_string(value));
}

}  // namespace pagoda
