// String formatting as Python does it: printf-style `fmt % args` (also the `format` filter)
// and str.format() with positional / named fields and the common format specs. The result is
// content when the format or any argument holds content. Internal to the renderer.
#pragma once

#include "common/status.h"
#include "model/chat/jinja_context.h"
#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

// fmt % args (args: a tuple of values, a dict for %(name)s, or one value). Errors: Python's
// wording for too few / too many arguments, a bad conversion, a width over the size limit.
Result<Value> PercentFormat(Context& ctx, const Value& fmt, const Value& args);
// fmt.format(*args, **kwargs). Errors: a missing field, a bad spec.
Result<Value> StrFormat(Context& ctx, const Value& fmt, const Args& args);

}  // namespace pagoda::jinja
