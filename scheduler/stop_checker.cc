#include "scheduler/stop_checker.h"

#include <algorithm>
#include <utility>

namespace pagoda {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Length of the UTF-8 sequence introduced by `lead`, or 0 if it is not a valid lead byte.
size_t Utf8SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Structural check (lead byte + continuation bytes); enough to keep cuts on char boundaries.
bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t len = Utf8SequenceLength(static_cast<unsigned char>(s[i]));
    if (len == 0 || i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j) {
      if (!IsContinuationByte(s[i + j])) return false;
    }
    i += len;
  }
  return true;
}

// First occurrence of `needle` in `text` that starts on a character boundary.
size_t FindAtBoundary(std::string_view text, std::string_view needle) {
  for (size_t pos = text.find(needle); pos != std::string_view::npos;
       pos = text.find(needle, pos + 1)) {
    if (!IsContinuationByte(text[pos])) return pos;
  }
  return std::string_view::npos;
}

}  // namespace

Status ValidateStopStrings(const std::vector<std::string>& stop) {
  for (size_t i = 0; i < stop.size(); ++i) {
    const std::string field = "stop[" + std::to_string(i) + "]";
    if (stop[i].empty()) return InvalidArgument(field + " must be a non-empty string");
    if (!IsValidUtf8(stop[i])) return InvalidArgument(field + " must be valid UTF-8");
  }
  return Status::Ok();
}

StopChecker::StopChecker(std::vector<std::string> stop, bool include_stop_str_in_output)
    : stop_(std::move(stop)), include_stop_(include_stop_str_in_output) {
  for (const std::string& s : stop_) max_stop_len_ = std::max(max_stop_len_, s.size());
}

// Earliest start; on equal starts the shortest string, then the lowest index.
StopChecker::Match StopChecker::FindEarliestMatch() const {
  Match best;
  for (size_t i = 0; i < stop_.size(); ++i) {
    if (stop_[i].empty()) continue;
    const size_t pos = FindAtBoundary(pending_, stop_[i]);
    if (pos == std::string::npos || pos > best.pos) continue;
    if (pos == best.pos && stop_[i].size() >= stop_[best.index].size()) continue;
    best = {pos, static_cast<int32_t>(i)};
  }
  return best;
}

// The first character boundary q < limit where pending_[q:] is a proper prefix of some stop
// string (so a stop string could still start there), or `limit` if there is none.
size_t StopChecker::EarliestPartialStart(size_t limit) const {
  const size_t n = pending_.size();
  const size_t first = n >= max_stop_len_ ? n - max_stop_len_ + 1 : 0;
  const std::string_view text(pending_);
  for (size_t q = first; q < std::min(limit, n); ++q) {
    if (IsContinuationByte(text[q])) continue;
    const std::string_view tail = text.substr(q);
    for (const std::string& s : stop_) {
      if (tail.size() < s.size() && std::string_view(s).starts_with(tail)) return q;
    }
  }
  return limit;
}

StopCheckResult StopChecker::Emit(size_t count) {
  StopCheckResult result;
  result.text = pending_.substr(0, count);
  pending_.erase(0, count);
  return result;
}

StopCheckResult StopChecker::Finish(const Match& match) {
  StopCheckResult result;
  result.text = pending_.substr(0, match.pos);
  if (include_stop_) result.text += stop_[match.index];
  result.stop_index = stop_index_ = match.index;
  pending_.clear();
  return result;
}

StopCheckResult StopChecker::Push(std::string_view delta) {
  if (stopped()) return {};
  pending_.append(delta);
  const Match match = FindEarliestMatch();
  if (match.index < 0) return Emit(EarliestPartialStart(pending_.size()));
  const size_t hold = EarliestPartialStart(match.pos);
  // An earlier-starting stop string may still complete: emit only what precedes it.
  if (hold < match.pos) return Emit(hold);
  return Finish(match);
}

StopCheckResult StopChecker::Flush() {
  if (stopped()) return {};
  const Match match = FindEarliestMatch();
  if (match.index >= 0) return Finish(match);
  return Emit(pending_.size());
}

}  // namespace pagoda
