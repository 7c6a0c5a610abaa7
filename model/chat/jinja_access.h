// Attribute and item access, slicing, iteration and membership, with jinja2's sandboxed
// semantics: `x.y` tries the attribute (a str / dict / list method) before the key, `x['y']`
// the key before the attribute; a miss is an Undefined carrying jinja2's hint; methods that
// would mutate a list or dict are "unsafe" (an Undefined whose use is an error); names starting
// with "_" are never reachable. Internal to the renderer.
#pragma once

#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/chat/jinja_context.h"
#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

// The error for using an Undefined where a value is needed ("'x' is undefined").
Status UndefinedError(const Value& undefined);

// x.name. Errors: x is undefined.
Result<Value> GetAttr(const Value& obj, std::string_view name);
// x[key]. Errors: x is undefined.
Result<Value> GetItem(Context& ctx, const Value& obj, const Value& key);
// x[start:stop:step] (each bound may be none / undefined). Errors: x undefined, a non-integer
// bound, a zero step.
Result<Value> GetSlice(Context& ctx, const Value& obj, const Value& start, const Value& stop,
                       const Value& step);
// The items `for` visits: list / tuple items, dict keys, the characters of a string, nothing
// for an undefined. Errors: anything else ("'int' object is not iterable").
Result<std::vector<Value>> Iterate(Context& ctx, const Value& v);
// `item in container`. Errors: a non-string left of `in <string>`, a container that is none or
// not iterable.
Result<bool> Contains(const Value& container, const Value& item);
// The characters of a string as values (provenance kept per character).
std::vector<Value> Characters(const Text& t);

}  // namespace pagoda::jinja
