// Code-point ranges to UTF-8 byte-set sequences (utf8_ranges.h).
#include "scheduler/grammar/utf8_ranges.h"

#include <algorithm>
#include <map>

namespace pagoda::grammar::internal {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;
constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodepoint};

using Sequences = std::map<std::vector<ByteSet>, ByteSet>;  // bytes 2.. -> first bytes

// Adds [lo, hi] (same encoded length) once each byte varies within a range only.
void AddSplit(uint32_t lo, uint32_t hi, Sequences* out) {
  std::string a, b;
  AppendUtf8(lo, &a);
  const size_t n = a.size();
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      AddSplit(lo, lo | m, out);
      AddSplit((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      AddSplit(lo, (hi & ~m) - 1, out);
      AddSplit(hi & ~m, hi, out);
      return;
    }
  }
  AppendUtf8(hi, &b);
  std::vector<ByteSet> rest(n - 1, ByteSet{});
  for (size_t k = 1; k < n; ++k) {
    for (uint32_t v = static_cast<uint8_t>(a[k]); v <= static_cast<uint8_t>(b[k]); ++v) {
      Insert(rest[k - 1], static_cast<uint8_t>(v));
    }
  }
  ByteSet& first = (*out)[rest];
  for (uint32_t v = static_cast<uint8_t>(a[0]); v <= static_cast<uint8_t>(b[0]); ++v) {
    Insert(first, static_cast<uint8_t>(v));
  }
}

}  // namespace

std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges) {
  std::vector<CodepointRange> cut;
  for (CodepointRange r : ranges) {
    r.hi = std::min(r.hi, kMaxCodepoint);
    if (r.lo > r.hi) continue;
    if (r.lo < kSurrogateLo && r.hi >= kSurrogateLo) {
      cut.push_back({r.lo, kSurrogateLo - 1});
      r.lo = kSurrogateLo;
    }
    if (r.lo >= kSurrogateLo && r.lo <= kSurrogateHi) r.lo = kSurrogateHi + 1;
    if (r.lo <= r.hi) cut.push_back(r);
  }
  std::sort(cut.begin(), cut.end(),
            [](const CodepointRange& x, const CodepointRange& y) { return x.lo < y.lo; });
  std::vector<CodepointRange> merged;
  for (const CodepointRange& r : cut) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::vector<CodepointRange> ComplementRanges(std::span<const CodepointRange> normalized) {
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  for (const CodepointRange& r : normalized) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return NormalizeRanges(std::move(out));
}

std::vector<std::vector<ByteSet>> Utf8Sequences(std::span<const CodepointRange> normalized) {
  Sequences seqs;
  for (const CodepointRange& r : normalized) {
    uint32_t lo = r.lo;
    for (uint32_t end : kLengthEnds) {
      if (lo > r.hi) break;
      if (lo > end) continue;
      const uint32_t hi = std::min(r.hi, end);
      AddSplit(lo, hi, &seqs);
      lo = hi + 1;
    }
  }
  std::vector<std::vector<ByteSet>> out;
  for (const auto& [rest, first] : seqs) {
    std::vector<ByteSet> seq{first};
    seq.insert(seq.end(), rest.begin(), rest.end());
    out.push_back(std::move(seq));
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace pagoda::grammar::internal
