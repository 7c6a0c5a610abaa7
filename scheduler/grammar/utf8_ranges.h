// Internal to pagoda_grammar: code-point classes as UTF-8 byte patterns.
//
// A character class of GBNF ([a-z], [^"\\], `.`) is a set of code-point ranges; the byte-level
// grammar matches it as alternatives of byte-set sequences, one byte set per UTF-8 byte, split
// as in Russ Cox's "UTF-8 ranges" (RE2): each sequence covers code points whose encodings have
// the same length and vary only within each byte's set. Surrogates (D800-DFFF) are never valid.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "scheduler/grammar/grammar_internal.h"

namespace pagoda::grammar::internal {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct CodepointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
};

// Sorted, merged ranges without surrogates (ranges above kMaxCodepoint are clipped).
std::vector<CodepointRange> NormalizeRanges(std::vector<CodepointRange> ranges);
// Every valid code point not in `normalized`.
std::vector<CodepointRange> ComplementRanges(std::span<const CodepointRange> normalized);
// Byte-set sequences matching exactly the UTF-8 encodings of the code points in `normalized`;
// sequences that differ only in their first byte are merged.
std::vector<std::vector<ByteSet>> Utf8Sequences(std::span<const CodepointRange> normalized);
// Appends the UTF-8 encoding of a valid code point.
void AppendUtf8(uint32_t cp, std::string* out);

}  // namespace pagoda::grammar::internal
