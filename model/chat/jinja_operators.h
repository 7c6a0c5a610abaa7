// Jinja's operators with Python semantics: arithmetic on int (64-bit, overflow is an error) and
// float, string / list concatenation and repetition, `~`, comparisons and membership; `str %
// args` goes to model/chat/jinja_format.h. Internal to the renderer.
#pragma once

#include <string_view>

#include "common/status.h"
#include "model/chat/jinja_context.h"
#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

// a op b for + - * / // % ** ~. Errors: Python's TypeError / ZeroDivisionError wording, an
// undefined operand, integer overflow, a result over the size limits.
Result<Value> BinaryOp(Context& ctx, std::string_view op, const Value& a, const Value& b);
// -v, +v, not v.
Result<Value> UnaryOp(std::string_view op, const Value& v);
// a op b for == != < <= > >= in, not in.
Result<bool> CompareOp(std::string_view op, const Value& a, const Value& b);

}  // namespace pagoda::jinja
