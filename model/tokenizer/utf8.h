// UTF-8 validation helpers shared by the tokenizers and the StreamingDecoder.
//
// "Valid" means well-formed UTF-8 per Unicode Table 3-7 (no overlong forms, no surrogates,
// nothing above U+10FFFF) — the same rule SentencePiece applies when it decodes byte tokens.
// Every byte that does not start a valid character is replaced by one U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pagoda::utf8 {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

enum class CharStatus {
  kValid,       // `s` starts with a valid character of *len bytes.
  kInvalid,     // The first byte cannot start a valid character here (*len = 1).
  kIncomplete,  // `s` is a proper prefix of a valid character (more bytes needed).
};

// Examines the character at the start of `s` (which must not be empty).
CharStatus ExamineChar(std::string_view s, size_t* len);

// Appends `in` to `out`, replacing each byte that does not start a valid character with U+FFFD.
// When `final` is false, a trailing incomplete character is left unconsumed. Returns the number
// of bytes of `in` consumed.
size_t AppendValid(std::string_view in, bool final, std::string* out);

// Returns `in` with invalid bytes replaced by U+FFFD (an incomplete tail counts as invalid).
std::string MakeValid(std::string_view in);

// Whether `s` is entirely valid UTF-8.
bool IsValid(std::string_view s);

}  // namespace pagoda::utf8
