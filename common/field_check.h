// Field checks shared by every layer's config validation: the range of an integer knob, written
// once beside the struct that owns the knob, and the one wording of its error:
//   "engine.max_num_seqs: expected an integer >= 1, got 0"
// The YAML parser (server/config.cc) uses the same ranges to reject a value where it is written;
// each layer's Validate... function uses them for configs built in code.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace pagoda {

struct IntRange {
  int64_t min = 0;
  int64_t max = std::numeric_limits<int64_t>::max();
  bool power_of_two = false;

  bool Contains(int64_t v) const {
    return v >= min && v <= max && (!power_of_two || (v > 0 && (v & (v - 1)) == 0));
  }
};

inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// "an integer >= 1", "an integer in 0..4096", "a power of two in 1..256".
std::string DescribeRange(const IntRange& range);

// OK if `range` contains `value`; else INVALID_ARGUMENT "KEY: expected <range>, got VALUE".
Status CheckRange(std::string_view key, int64_t value, const IntRange& range);

// The names of an enum's values, for parsing and printing (a table owned by the enum's layer).
template <typename E>
using EnumNames = std::span<const std::pair<std::string_view, E>>;

template <typename E>
std::optional<E> ParseEnum(EnumNames<E> names, std::string_view name) {
  for (const auto& [n, v] : names) {
    if (n == name) return v;
  }
  return std::nullopt;
}

template <typename E>
std::string_view EnumName(EnumNames<E> names, E value) {
  for (const auto& [n, v] : names) {
    if (v == value) return n;
  }
  return "?";
}

// "one of a, b, c" (the expectation of a key that takes one of `choices`).
std::string DescribeChoices(std::span<const std::string_view> choices);

}  // namespace pagoda
