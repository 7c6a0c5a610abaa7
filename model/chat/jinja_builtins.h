// The built-ins a template can call: jinja2's filters (jinja_filters.cc) and tests
// (jinja_tests.cc), Python's str / dict / list methods (jinja_methods.cc), and the globals of
// Hugging Face's environment: range, dict, namespace, raise_exception, strftime_now
// (jinja_globals.cc). Internal to the renderer.
//
// Strings a built-in derives from its input keep exact provenance where the bytes are copied
// (strip, split, slices); a rewritten string is all content when any input was content.
#pragma once

#include <string_view>

#include "common/status.h"
#include "model/chat/jinja_context.h"
#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

bool IsFilter(std::string_view name);
// input | name(args). Errors: an unknown filter ("No filter named 'x'."), bad arguments,
// Python's TypeError wording for a wrong input type.
Result<Value> ApplyFilter(Context& ctx, std::string_view name, const Value& input,
                          const Args& args);

bool IsTest(std::string_view name);
// v is name(args). Errors: an unknown test ("No test named 'x'."), bad arguments.
Result<bool> ApplyTest(Context& ctx, std::string_view name, const Value& v, const Args& args);

// self.name(args) for a method GetAttr returned. Errors: bad arguments, unsupported methods.
Result<Value> CallMethod(Context& ctx, const Value& self, std::string_view name, const Args& args);

bool IsGlobal(std::string_view name);
// name(args). raise_exception fails with StatusCode::kAborted and its message verbatim.
Result<Value> CallGlobal(Context& ctx, std::string_view name, const Args& args);

// The value `attribute` (a dotted path such as "function.name"; integer parts index lists)
// names inside `item`, as jinja2's make_attrgetter finds it.
Result<Value> GetPath(Context& ctx, const Value& item, std::string_view attribute);

}  // namespace pagoda::jinja
