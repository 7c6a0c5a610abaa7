// jinja2's scoping rules, computed once per template: for every frame (the template, a
// for-loop body or else, a macro or caller body, a set / filter / with / generation block)
// the names that start as *undefined* there rather than visible from outside.
//
// jinja2 compiles each frame with a symbol table: a name the frame assigns before it reads
// it, and that no enclosing frame knows, starts undefined (not the caller's value) until the
// assignment runs; an assignment in only some branches of an if keeps the outer value. The
// evaluator resolves names dynamically through its scope chain, which agrees with jinja2
// everywhere except there; Stmt::frame_missing / MacroDef::missing list those names so each
// frame can start them undefined.
#pragma once

#include <string>
#include <vector>

#include "model/chat/jinja_ast.h"

namespace pagoda::jinja {

// Annotates every frame under `root`; returns the template frame's own list.
std::vector<std::string> AnalyzeScopes(Body& root);

}  // namespace pagoda::jinja
