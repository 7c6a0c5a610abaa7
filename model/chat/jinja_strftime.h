// strftime_now's formatting: Python's datetime.strftime on a naive local time (CivilTime),
// in the C locale, so "%d %b %Y" gives "26 Jul 2026" on every machine. Internal to the
// renderer (ParseCivilTime, the public parser of a fixed clock, is in model/chat/jinja.h).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "model/chat/jinja.h"

namespace pagoda::jinja {

// Errors: a format longer than 1000 bytes, an invalid date.
Result<std::string> Strftime(const CivilTime& t, std::string_view format);

}  // namespace pagoda::jinja
