#include "model/tokenizer/utf8.h"

#include <cstdint>

namespace pagoda::utf8 {
namespace {

// Length of the character a lead byte starts and the allowed range of its second byte;
// len == 0 marks a byte that can never start a character.
struct LeadInfo {
  size_t len;
  uint8_t lo;
  uint8_t hi;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};  // continuation byte or overlong 2-byte lead
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};  // no overlong forms
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};  // no overlong forms
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0, 0, 0};
}

}  // namespace

CharStatus ExamineChar(std::string_view s, size_t* len) {
  *len = 1;
  const LeadInfo info = Lead(static_cast<uint8_t>(s[0]));
  if (info.len == 0) return CharStatus::kInvalid;
  if (info.len == 1) return CharStatus::kValid;
  const size_t avail = s.size() < info.len ? s.size() : info.len;
  for (size_t i = 1; i < avail; ++i) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    const uint8_t lo = i == 1 ? info.lo : 0x80;
    const uint8_t hi = i == 1 ? info.hi : 0xBF;
    if (b < lo || b > hi) return CharStatus::kInvalid;
  }
  if (avail < info.len) return CharStatus::kIncomplete;
  *len = info.len;
  return CharStatus::kValid;
}

size_t AppendValid(std::string_view in, bool final, std::string* out) {
  size_t pos = 0;
  while (pos < in.size()) {
    size_t len = 0;
    const CharStatus status = ExamineChar(in.substr(pos), &len);
    if (status == CharStatus::kValid) {
      out->append(in.substr(pos, len));
      pos += len;
    } else if (status == CharStatus::kIncomplete && !final) {
      break;
    } else {
      out->append(kReplacementChar);
      pos += 1;
    }
  }
  return pos;
}

std::string MakeValid(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  AppendValid(in, /*final=*/true, &out);
  return out;
}

bool IsValid(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 0;
    if (ExamineChar(s.substr(pos), &len) != CharStatus::kValid) return false;
    pos += len;
  }
  return true;
}

}  // namespace pagoda::utf8
