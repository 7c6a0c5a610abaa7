// UTF-8 decoding and the Python character classes the Jinja renderer needs (str.isspace,
// str.isprintable, case mapping).
//
// Strings are UTF-8; an invalid byte decodes as a code point of its own, 0xDC00 + byte (like
// Python's surrogateescape), so that lengths, indexing and slicing never fail on bad input and
// re-encoding gives the byte back. Case mapping covers ASCII, Latin-1, Latin Extended-A and
// Additional, Greek, Cyrillic, Armenian and full-width Latin (mathematical letters are cased
// without a mapping); other scripts are left unchanged, a simplification of Python's tables.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::jinja {

// Decodes the code point at s[*i] and advances *i past it.
char32_t DecodeUtf8(std::string_view s, size_t* i);
// Appends `c` (a surrogate-escaped byte 0xDC80..0xDCFF is appended as that raw byte).
void AppendUtf8(std::string* out, char32_t c);
size_t CountCodePoints(std::string_view s);
// Byte offset of every code point of `s`, plus s.size() at the end (n + 1 entries).
std::vector<size_t> CodePointOffsets(std::string_view s);
// Byte offset of code point `k` of `s` scanning from byte `from` (s.size() when past the end).
size_t CodePointToByte(std::string_view s, size_t k, size_t from = 0);

bool IsPySpace(char32_t c);      // str.isspace()
bool IsPyPrintable(char32_t c);  // str.isprintable() (non-printable: controls, separators, ...)
bool IsPyAlpha(char32_t c);
bool IsPyDigit(char32_t c);
bool IsPyUpper(char32_t c);  // has a lower-case mapping
bool IsPyLower(char32_t c);  // has an upper-case mapping
// Case conversion of a whole string (handles the one-to-many mapping of 'ß' -> "SS").
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);       // str.title()
std::string PyCapitalize(std::string_view s);  // str.capitalize()
std::string PySwapCase(std::string_view s);

}  // namespace pagoda::jinja
