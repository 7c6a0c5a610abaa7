// Internal to the constraint compilers: GBNF for decimal numbers between bounds (JSON schema
// minimum / maximum / exclusiveMinimum / exclusiveMaximum), built digit by digit as
// llama.cpp's json-schema-to-grammar does for integers: [13, 205] becomes
// `"1" [3-9] | [2-9] [0-9] | "1" [0-9] [0-9] | "20" [0-5]`, and so on.
//
// Integers have at most 15 digits (an unbounded side stops there); numbers of type `number` have
// no exponent, at most 9 integer and 6 fraction digits (so every one of them converts to a
// distinct double and compares with the bounds exactly), and integer-valued bounds.
#pragma once

#include <cstdint>
#include <string>

namespace pagoda::grammar::gbnf {

inline constexpr int64_t kMaxRangeInteger = 999'999'999'999'999;  // 15 digits
inline constexpr int64_t kMaxRangeNumber = 999'999'999;           // 9 digits

// The integers in [lo, hi] (lo <= hi, |lo|, |hi| <= kMaxRangeInteger), no leading zeros or -0.
std::string IntegerRangeGbnf(int64_t lo, int64_t hi);

struct NumberBound {
  int64_t value = 0;  // |value| <= kMaxRangeNumber
  bool exclusive = false;
};
// The numbers x with lo <(=) x <(=) hi; "" when there are none.
std::string NumberRangeGbnf(NumberBound lo, NumberBound hi);

}  // namespace pagoda::grammar::gbnf
