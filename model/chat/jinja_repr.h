// Python's str() and repr() of renderer values: what `{{ x }}` prints, what `|string` gives
// for a list or dict (Python's repr, single quotes), and Python's shortest float repr.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "model/chat/jinja_text.h"
#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

// repr(float): "0.1", "1.0", "1e+16", "1.5e-07", "nan", "-inf".
std::string FloatRepr(double d);
// repr(str): quotes and escapes as Python does ('it\'s' becomes "it's").
std::string StrRepr(std::string_view s);
// repr(v). Errors: a namespace cycle deeper than kMaxNesting.
Result<std::string> Repr(const Value& v);
// str(v) with provenance: a string keeps its content ranges, undefined is "", anything else is
// its repr, all content when any string inside it is content.
Result<Text> ToText(const Value& v);

}  // namespace pagoda::jinja
