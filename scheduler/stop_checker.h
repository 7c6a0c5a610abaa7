// StopChecker: stop-string detection over the text stream of one sequence.
//
// Feed it the deltas of the incremental detokenizer (StreamingDecoder::Push); it answers the
// text that is safe to emit now and whether a stop string matched. Matches are found across
// delta boundaries. Any pending suffix that could still grow into a stop string is held back,
// so a stop string is never partially emitted. The winning match is the one that starts
// earliest in the full text (on equal starts: the shortest, then the first listed); a match is
// only reported once no earlier-starting stop string can still complete. On a match the output
// ends just before the stop string (or just after it with include_stop_str_in_output) and
// nothing later is ever emitted. Flush() at the end of generation releases the held-back text.
// Emitted pieces never split a UTF-8 character when the deltas are valid UTF-8.
// Token-id stops (EOS, stop_token_ids) are left to the OutputProcessor (output_processor.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda {

// OK, or INVALID_ARGUMENT naming stop[i] when a stop string is empty or not valid UTF-8.
Status ValidateStopStrings(const std::vector<std::string>& stop);

struct StopCheckResult {
  std::string text;         // safe to emit now
  int32_t stop_index = -1;  // index into the stop list of the matched string, or -1
  bool stopped() const { return stop_index >= 0; }
};

class StopChecker {
 public:
  // `stop` should pass ValidateStopStrings (empty strings are ignored).
  explicit StopChecker(std::vector<std::string> stop, bool include_stop_str_in_output = false);

  // Consumes the next text delta. After a match, returns empty results.
  StopCheckResult Push(std::string_view delta);
  // End of generation: the held-back text. If it completes a stop string whose report was
  // waiting for a possible earlier-starting match, that match is reported (and truncates).
  StopCheckResult Flush();

  bool stopped() const { return stop_index_ >= 0; }
  int32_t stop_index() const { return stop_index_; }
  const std::vector<std::string>& stop_strings() const { return stop_; }

 private:
  struct Match {
    size_t pos = std::string::npos;
    int32_t index = -1;
  };
  Match FindEarliestMatch() const;
  size_t EarliestPartialStart(size_t limit) const;
  StopCheckResult Emit(size_t count);
  StopCheckResult Finish(const Match& match);

  std::vector<std::string> stop_;
  bool include_stop_;
  size_t max_stop_len_ = 0;
  std::string pending_;  // held back: may still become (part of) a stop string
  int32_t stop_index_ = -1;
};

}  // namespace pagoda
