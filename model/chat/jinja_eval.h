// The tree-walking evaluator: statements render into a Text (keeping which bytes are
// content), expressions evaluate to Values. Scoping follows jinja2: a for-loop iteration, a
// macro call and block-capturing tags (set block, filter, with, call) get a child scope; if
// does not, so `set` inside an if is visible after it; a macro sees the scope it was defined
// in (as a closure), not its caller's. Internal to the renderer.
#pragma once

#include "common/status.h"
#include "model/chat/jinja_ast.h"
#include "model/chat/jinja_context.h"
#include "model/chat/jinja_text.h"
#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

enum class Flow { kNormal, kBreak, kContinue };

class Evaluator {
 public:
  Evaluator(Context& ctx, ScopePtr root) : ctx_(ctx), root_(std::move(root)) {}

  // Renders `body` into *out. The first failing statement prefixes its line to the error.
  Result<Flow> ExecBody(const Body& body, const ScopePtr& scope, Text* out);
  Result<Value> Eval(const Expr& e, const ScopePtr& scope);

 private:
  // Statements (jinja_eval_stmt.cc).
  Result<Flow> Exec(const Stmt& s, const ScopePtr& scope, Text* out);
  Result<Flow> ExecIf(const Stmt& s, const ScopePtr& scope, Text* out);
  Result<Flow> ExecFor(const Stmt& s, const ScopePtr& scope, Text* out);
  Result<Flow> ExecCallBlock(const Stmt& s, const ScopePtr& scope, Text* out);
  Result<Flow> ExecWith(const Stmt& s, const ScopePtr& scope, Text* out);
  Result<std::vector<Value>> LoopItems(const Stmt& s, const ScopePtr& scope, const Value& iterable);
  Status RunLoop(const Stmt& s, const ScopePtr& scope, const Value& iterable, int loop_depth,
                 Text* out);
  Result<Value> CallLoop(const Object& loop, const Args& args);
  // Renders s.bodies[0] in a frame of its own, through the filter chain `filters` if not null.
  Result<Value> Capture(const Stmt& s, const Expr* filters, const ScopePtr& scope);
  Status Write(const Value& v, Text* out);
  Status Append(const Text& t, Text* out);
  Status Assign(const Target& target, const Value& v, const ScopePtr& scope);

  // Expressions (jinja_eval_expr.cc).
  Result<Value> EvalName(const Expr& e, const ScopePtr& scope);
  Result<Value> EvalItems(const Expr& e, const ScopePtr& scope);
  Result<Value> EvalGetItem(const Expr& e, const ScopePtr& scope);
  Result<Value> EvalCompare(const Expr& e, const ScopePtr& scope);
  Result<Value> EvalFilter(const Expr& e, const ScopePtr& scope, const Value* block_input);
  Result<Value> EvalTest(const Expr& e, const ScopePtr& scope);
  Result<Value> EvalCond(const Expr& e, const ScopePtr& scope);
  Result<Args> EvalArgs(const CallArgs& a, const ScopePtr& scope);
  Result<Value> Call(const Value& callee, const Args& args);
  Result<Value> CallMacro(const Callable& f, const Args& args);
  Status BindMacroArgs(const Callable& f, const Args& args, const ScopePtr& scope);
  Status CountBuilt(const Value& result, const Value& input);

  Context& ctx_;
  ScopePtr root_;
};

}  // namespace pagoda::jinja
