// Jinja parser: template source -> syntax tree (model/chat/jinja_ast.h), following jinja2's
// grammar and operator precedence (filters bind tighter than arithmetic, `not x is y` is
// `not (x is y)`, `**` is left-associative as in jinja2).
//
// Statements: if / elif / else, for (tuple targets, inline `if`, else), set (also namespace
// attributes and block set with filters), macro, call, filter, with, break / continue (inside
// loops), print, generation. Tags that load other templates (extends, include, import, block)
// are errors: a chat template has no loader. Nesting of blocks and expressions is limited to
// kMaxParseDepth so that parsing and evaluation never overflow the stack.
#pragma once

#include <string_view>

#include "common/status.h"
#include "model/chat/jinja_ast.h"

namespace pagoda::jinja {

inline constexpr int kMaxParseDepth = 100;

// Errors: InvalidArgument "syntax error, line N: ..." (jinja2's wording where it has one).
Result<Body> ParseTemplate(std::string_view source);

}  // namespace pagoda::jinja
