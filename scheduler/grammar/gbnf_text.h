// Internal to the constraint compilers: code points and the GBNF text that stands for them.
//
//   Utf8ToCodepoints / AppendUtf8   UTF-8 <-> code points (invalid UTF-8 is an error);
//   GbnfLiteral / GbnfClass         a quoted literal / a bracketed class, escaped so that the
//                                   parser (gbnf_parser.cc) reads back exactly those code points;
//   NormalizeRanges / Complement    code-point range sets (never the surrogates D800-DFFF);
//   SplitJsonSpecials / JsonEscapeOf   what a character class becomes inside a JSON string:
//                                   the code points allowed raw, and the escapes of the others.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda::grammar::gbnf {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct CpRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
};

// Decodes UTF-8; invalid or overlong sequences and surrogates are INVALID_ARGUMENT.
Result<std::u32string> Utf8ToCodepoints(std::string_view text);
void AppendUtf8(uint32_t cp, std::string& out);

// `"..."` matching exactly these code points (empty: `""`).
std::string GbnfLiteral(std::u32string_view cps);
// `[...]` matching exactly the code points of `ranges` (sorted, disjoint, non-empty).
std::string GbnfClass(std::span<const CpRange> ranges);
// Sorts and merges; removes the surrogates D800-DFFF.
std::vector<CpRange> NormalizeRanges(std::vector<CpRange> ranges);
std::vector<CpRange> ComplementRanges(std::span<const CpRange> normalized);

// Splits a class's ranges into those allowed raw inside a JSON string and the special code
// points ("  \  and 0x00-0x1F) that must be written as escapes.
void SplitJsonSpecials(std::span<const CpRange> ranges, std::vector<CpRange>& plain,
                       std::vector<uint32_t>& specials);
// The JSON escape of a special code point (`\"`, `\\`, `\n`, `\u001f`...), as code points.
std::u32string JsonEscapeOf(uint32_t cp);

}  // namespace pagoda::grammar::gbnf
