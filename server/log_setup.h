// SetupLogging: the process-wide spdlog format from the `logging:` section.
//   text: [2026-12-01 23:59:00.123] [info] MESSAGE
//   json: {"time":"2026-12-01T23:59:00.123+00:00","level":"info","msg":"MESSAGE"}, one object
//         per line; MESSAGE is escaped as a JSON string (quotes, backslashes, control
//         characters; invalid UTF-8 replaced by U+FFFD), so every line parses.
#pragma once

#include <string>
#include <string_view>

#include "server/config.h"

namespace pagoda {

void SetupLogging(const LoggingSection& logging);

// `text` as the body of a JSON string (without the surrounding quotes).
std::string JsonEscaped(std::string_view text);

}  // namespace pagoda
