// A pre-scan of JSON text for its nesting depth, before a recursive parser or printer sees it:
// nlohmann's DOM recursion overflows the stack at a depth in the hundred thousands, and every
// JSON file of a model folder (config.json, tokenizer.json, tokenizer_config.json,
// generation_config.json, the safetensors header and index) is outside input.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace pagoda {

// Far deeper than any model file nests (tokenizer.json: under 10 levels).
inline constexpr int kMaxJsonDepth = 256;

// INVALID_ARGUMENT "WHAT: JSON nested deeper than 256 levels (at byte N)" when arrays / objects
// nest deeper than `max_depth`; brackets inside strings do not count. Does not validate JSON.
Status CheckJsonDepth(std::string_view text, std::string_view what, int max_depth = kMaxJsonDepth);

}  // namespace pagoda
