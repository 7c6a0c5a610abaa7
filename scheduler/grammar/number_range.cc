#include "scheduler/grammar/number_range.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace pagoda::grammar::gbnf {
namespace {

constexpr int kFracDigits = 6;

std::string Lit(std::string_view digits) { return "\"" + std::string(digits) + "\""; }

std::string Join(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

std::string Alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i == 0 ? " " : " | ") + alts[i];
  return out + " )";
}

// [0-9] repeated min..max times ("" for none).
std::string Digits(size_t min, size_t max) {
  if (max == 0) return "";
  if (min == 0 && max == 1) return "[0-9]?";
  if (min == 1 && max == 1) return "[0-9]";
  if (min == max) return "[0-9]{" + std::to_string(min) + "}";
  return "[0-9]{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

std::string DigitClass(char lo, char hi) {
  if (lo == hi) return Lit(std::string(1, lo));
  return std::string("[") + lo + "-" + hi + "]";
}

// Every digit string of x's length between x and y (same length, x <= y).
std::string SameLength(const std::string& x, const std::string& y) {
  if (x == y) return x.empty() ? "" : Lit(x);
  size_t p = 0;
  while (x[p] == y[p]) ++p;
  const size_t n = x.size() - p - 1;
  const std::string rx = x.substr(p + 1), ry = y.substr(p + 1);
  char start = x[p], end = y[p];
  std::vector<std::string> alts;
  if (rx.find_first_not_of('0') != std::string::npos) {
    alts.push_back(Join({Lit(std::string(1, x[p])), SameLength(rx, std::string(n, '9'))}));
    ++start;
  }
  std::string last;
  if (ry.find_first_not_of('9') != std::string::npos) {
    last = Join({Lit(std::string(1, y[p])), SameLength(std::string(n, '0'), ry)});
    --end;
  }
  if (start <= end) alts.push_back(Join({DigitClass(start, end), Digits(n, n)}));
  if (!last.empty()) alts.push_back(last);
  return Join({p > 0 ? Lit(x.substr(0, p)) : "", Alternatives(alts)});
}

int64_t Pow10(size_t n) {
  int64_t v = 1;
  for (size_t i = 0; i < n; ++i) v *= 10;
  return v;
}

// The non-negative integers in [a, b], grouped by digit count; whole digit counts merge.
std::string Magnitudes(int64_t a, int64_t b) {
  const size_t la = std::to_string(a).size(), lb = std::to_string(b).size();
  const size_t last_full = b == Pow10(lb) - 1 ? lb : lb - 1;  // largest all-values length
  std::vector<std::string> alts;
  for (size_t len = la; len <= lb;) {
    const bool full_from_here = len > la && len <= last_full && len > 1;
    if (full_from_here) {
      alts.push_back(Join({"[1-9]", Digits(len - 1, last_full - 1)}));
      len = last_full + 1;
      continue;
    }
    const int64_t lo = len == la ? a : Pow10(len - 1);
    const int64_t hi = len == lb ? b : Pow10(len) - 1;
    alts.push_back(SameLength(std::to_string(lo), std::to_string(hi)));
    ++len;
  }
  return Alternatives(alts);
}

std::string ZeroFraction() { return "( \".\" \"0\"{1," + std::to_string(kFracDigits) + "} )?"; }
std::string AnyFraction() { return "( \".\" [0-9]{1," + std::to_string(kFracDigits) + "} )?"; }
// "." and 1..kFracDigits digits, not all zero (alternatives by the first non-zero digit).
std::string NonZeroFraction() {
  std::vector<std::string> alts;
  for (int zeros = 0; zeros < kFracDigits; ++zeros) {
    const size_t rest = static_cast<size_t>(kFracDigits - zeros - 1);
    alts.push_back(Join({zeros > 0 ? Lit(std::string(static_cast<size_t>(zeros), '0')) : "",
                         "[1-9]", Digits(0, rest)}));
  }
  return "\".\" " + Alternatives(alts);
}

// Magnitudes m with a <(=) m <(=) b, 0 <= a, b; "" when none.
std::string MagnitudeRange(NumberBound a, NumberBound b) {
  if (a.value > b.value) return "";
  const std::string sa = std::to_string(a.value), sb = std::to_string(b.value);
  if (a.value == b.value) {
    return a.exclusive || b.exclusive ? "" : Join({Lit(sa), ZeroFraction()});
  }
  std::vector<std::string> alts;
  int64_t mid_lo = a.value;
  if (a.exclusive) {
    alts.push_back(Join({Lit(sa), NonZeroFraction()}));
    ++mid_lo;
  }
  if (mid_lo <= b.value - 1) alts.push_back(Join({Magnitudes(mid_lo, b.value - 1), AnyFraction()}));
  if (!b.exclusive) alts.push_back(Join({Lit(sb), ZeroFraction()}));
  return Alternatives(alts);
}

}  // namespace

std::string IntegerRangeGbnf(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back(Join({"\"-\"", Magnitudes(hi < 0 ? -hi : 1, -lo)}));
  if (hi >= 0) alts.push_back(Magnitudes(std::max<int64_t>(lo, 0), hi));
  return Alternatives(alts);
}

std::string NumberRangeGbnf(NumberBound lo, NumberBound hi) {
  std::vector<std::string> alts;
  if (lo.value < 0) {
    const NumberBound near =
        hi.value < 0 ? NumberBound{-hi.value, hi.exclusive} : NumberBound{0, true};  // never "-0"
    const std::string neg = MagnitudeRange(near, {-lo.value, lo.exclusive});
    if (!neg.empty()) alts.push_back("\"-\" " + neg);
  }
  if (hi.value >= 0) {
    const NumberBound from = lo.value >= 0 ? lo : NumberBound{0, false};
    const std::string pos = MagnitudeRange(from, hi);
    if (!pos.empty()) alts.push_back(pos);
  }
  if (alts.empty()) return "";
  return Alternatives(alts);
}

}  // namespace pagoda::grammar::gbnf
