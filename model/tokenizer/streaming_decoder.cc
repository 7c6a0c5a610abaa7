// StreamingDecoder (declared in model/tokenizer.h): incremental, O(1) amortised per token.
//
// Decode(ids) of every tokenizer is "the token bytes concatenated, with leading spaces the
// tokenizer strips at the start of a sequence removed, then invalid UTF-8 replaced". The
// decoder therefore only needs Decode() while the sequence has produced no text yet (to learn
// how many leading spaces were stripped); afterwards it appends TokenBytes(id) and emits the
// longest valid UTF-8 prefix, holding back at most 3 bytes of an incomplete character.
#include <string_view>

#include "model/tokenizer.h"
#include "model/tokenizer/utf8.h"

namespace pagoda {
namespace {

// Number of leading spaces of `raw` that `decoded` (= Decode of the same ids) dropped.
size_t StrippedPrefix(std::string_view raw, std::string_view decoded) {
  for (size_t k = 0; k <= raw.size(); ++k) {
    if (utf8::MakeValid(raw.substr(k)) == decoded) return k;
    if (k == raw.size() || raw[k] != ' ') break;
  }
  return 0;  // not a prefix-stripping tokenizer: pass the bytes through
}

}  // namespace

std::string StreamingDecoder::Push(int32_t id) {
  std::string bytes = tokenizer_.TokenBytes(id);
  if (bytes.empty()) return {};  // control tokens and invalid ids produce nothing
  if (!started_) {
    start_ids_.push_back(id);
    const std::string decoded = tokenizer_.Decode(start_ids_);
    if (decoded.empty()) return {};
    std::string raw;
    for (const int32_t start_id : start_ids_) raw += tokenizer_.TokenBytes(start_id);
    bytes = raw.substr(StrippedPrefix(raw, decoded));
    start_ids_.clear();
    start_ids_.shrink_to_fit();
    started_ = true;
  }
  pending_ += bytes;
  std::string out;
  const size_t consumed = utf8::AppendValid(pending_, /*final=*/false, &out);
  pending_.erase(0, consumed);
  return out;
}

std::string StreamingDecoder::Flush() {
  std::string out;
  utf8::AppendValid(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace pagoda
