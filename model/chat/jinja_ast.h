// The syntax tree of a parsed Jinja template: expressions (Expr) and statements (Stmt).
//
// One node type per family keeps the tree-walking evaluator simple; each kind documents which
// fields it uses. Nodes are immutable after parsing and shared by every render of a template.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,  // value
  kName,     // name
  kList,     // items
  kTuple,    // items
  kDict,     // items: key, value, key, value, ...
  kGetAttr,  // items[0].name
  kGetItem,  // items[0][items[1]]
  kSlice,    // items: start, stop, step (each may be null); only as the index of kGetItem
  kCall,     // items[0](args)
  kFilter,   // items[0] | name(args); items[0] is null in a filter / set block (the body)
  kTest,     // items[0] is [not] name(args)
  kUnary,    // op items[0]: "-", "+", "not"
  kBinary,   // items[0] name items[1]: + - * / // % ** ~
  kCompare,  // items[0] ops[0] items[1] ops[1] items[2] ...: == != < <= > >= in, not in
  kAnd,      // items[0] and items[1]
  kOr,       // items[0] or items[1]
  kCond,     // items[0] if items[1] else items[2] (items[2] null: undefined)
};

struct CallArgs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  std::string name;  // name / attribute / filter / test / operator
  Value value;       // kLiteral
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;  // kCompare
  CallArgs args;                 // kCall, kFilter, kTest
  bool negated = false;          // kTest: "is not"
  int depth = 1;                 // height of this subtree (bounded by the parser)
};

// An assignment target: a name, a tuple of names, or namespace.attribute.
struct Target {
  std::vector<std::string> names;
  bool tuple = false;
  std::string attr;  // non-empty: names[0].attr = ...
};

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null when it has none
  Body body;
  std::vector<std::string> missing;  // see Stmt::frame_missing
  bool uses_varargs = false;         // the body reads `varargs` / `kwargs` / `caller`
  bool uses_kwargs = false;
  bool uses_caller = false;
};

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ exprs[0] }}
  kIf,           // exprs: conditions; bodies: one per condition, plus the else body
  kFor,          // target in exprs[0] [if exprs[1]] [recursive]; bodies[0] body, bodies[1] else
  kSet,          // target = exprs[0]
  kSetBlock,     // target = rendered bodies[0], through the filter chain exprs[0] if not null
  kMacro,        // macro
  kCallBlock,    // exprs[0] is the call; macro is the `caller`
  kFilterBlock,  // bodies[0] rendered through the filter chain exprs[0]
  kWith,         // with_names[i] = exprs[i]; bodies[0]
  kBreak,
  kContinue,
  kBlock,  // bodies[0] rendered in place ({% generation %})
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  // For statements whose bodies run in a frame of their own (for, set block, filter, with,
  // generation): per body, the names jinja2 starts as undefined there (jinja_scopes.h).
  std::vector<std::vector<std::string>> frame_missing;
  Target target;
  std::vector<std::string> with_names;
  std::unique_ptr<MacroDef> macro;
  bool recursive = false;  // kFor: `for ... recursive`, loop(items) renders the body again
};

}  // namespace pagoda::jinja
