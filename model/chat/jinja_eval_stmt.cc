// Statement execution of the Evaluator.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/jinja_access.h"
#include "model/chat/jinja_eval.h"
#include "model/chat/jinja_repr.h"

namespace pagoda::jinja {
namespace {

ScopePtr ChildScope(const ScopePtr& parent, const std::vector<std::string>* missing = nullptr) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  if (missing) s->SetMissing(*missing);
  return s;
}

const std::vector<std::string>* Missing(const Stmt& s, size_t body) {
  return body < s.frame_missing.size() ? &s.frame_missing[body] : nullptr;
}

}  // namespace

Result<Flow> Evaluator::ExecBody(const Body& body, const ScopePtr& scope, Text* out) {
  for (const StmtPtr& s : body) {
    auto flow = Exec(*s, scope, out);
    if (!flow.ok()) {
      Status st = flow.status();
      if (!ctx_.error_located && st.code() != StatusCode::kAborted) {
        ctx_.error_located = true;
        st = st.WithPrefix("line " + std::to_string(s->line));
      }
      return st;
    }
    if (*flow != Flow::kNormal) return *flow;
  }
  return Flow::kNormal;
}

Result<Flow> Evaluator::Exec(const Stmt& s, const ScopePtr& scope, Text* out) {
  PAGODA_RETURN_IF_ERROR(ctx_.Step());
  switch (s.kind) {
    case StmtKind::kText:
      PAGODA_RETURN_IF_ERROR(Append(Text(s.text), out));
      return Flow::kNormal;
    case StmtKind::kOutput: {
      PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[0], scope));
      PAGODA_RETURN_IF_ERROR(Write(v, out));
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      return ExecIf(s, scope, out);
    case StmtKind::kFor:
      return ExecFor(s, scope, out);
    case StmtKind::kSet: {
      PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[0], scope));
      PAGODA_RETURN_IF_ERROR(Assign(s.target, v, scope));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      PAGODA_ASSIGN_OR_RETURN(Value v, Capture(s, s.exprs[0].get(), scope));
      PAGODA_RETURN_IF_ERROR(Assign(s.target, v, scope));
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      auto f = std::make_shared<Callable>();
      f->kind = Callable::Kind::kMacro;
      f->name = s.macro->name;
      f->macro = s.macro.get();
      f->closure = scope;
      scope->Set(s.macro->name, Value(Value::Variant(CallablePtr(std::move(f)))));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock:
      return ExecCallBlock(s, scope, out);
    case StmtKind::kFilterBlock: {
      PAGODA_ASSIGN_OR_RETURN(Value v, Capture(s, s.exprs[0].get(), scope));
      PAGODA_RETURN_IF_ERROR(Write(v, out));
      return Flow::kNormal;
    }
    case StmtKind::kWith:
      return ExecWith(s, scope, out);
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kBlock: {
      PAGODA_ASSIGN_OR_RETURN(Value v, Capture(s, nullptr, scope));
      PAGODA_RETURN_IF_ERROR(Write(v, out));
      return Flow::kNormal;
    }
  }
  return Internal("unknown statement");
}

Result<Flow> Evaluator::ExecIf(const Stmt& s, const ScopePtr& scope, Text* out) {
  for (size_t i = 0; i < s.exprs.size(); ++i) {
    PAGODA_ASSIGN_OR_RETURN(Value cond, Eval(*s.exprs[i], scope));
    if (Truthy(cond)) return ExecBody(s.bodies[i], scope, out);
  }
  if (s.bodies.size() > s.exprs.size()) return ExecBody(s.bodies.back(), scope, out);
  return Flow::kNormal;
}

// The items of `iterable` a for loop visits, after its inline `if` filter (evaluated with the
// target bound).
Result<std::vector<Value>> Evaluator::LoopItems(const Stmt& s, const ScopePtr& scope,
                                                const Value& iterable) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx_, iterable));
  if (!s.exprs[1]) return items;
  std::vector<Value> kept;
  for (Value& item : items) {
    PAGODA_RETURN_IF_ERROR(ctx_.Iteration());
    ScopePtr probe = ChildScope(scope);
    PAGODA_RETURN_IF_ERROR(Assign(s.target, item, probe));
    PAGODA_ASSIGN_OR_RETURN(Value keep, Eval(*s.exprs[1], probe));
    if (Truthy(keep)) kept.push_back(std::move(item));
  }
  return kept;
}

Result<Flow> Evaluator::ExecFor(const Stmt& s, const ScopePtr& scope, Text* out) {
  PAGODA_ASSIGN_OR_RETURN(Value iterable, Eval(*s.exprs[0], scope));
  PAGODA_RETURN_IF_ERROR(RunLoop(s, scope, iterable, 1, out));
  return Flow::kNormal;
}

// One run of a for loop over `iterable` (loop.depth `loop_depth`; > 1 for loop(...) calls).
Status Evaluator::RunLoop(const Stmt& s, const ScopePtr& scope, const Value& iterable,
                          int loop_depth, Text* out) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> list, LoopItems(s, scope, iterable));
  auto items = std::make_shared<const std::vector<Value>>(std::move(list));
  int depth = 0;
  for (const Value& v : *items) depth = std::max(depth, DepthOf(v));
  if (depth + 1 > kMaxNesting) return InvalidArgument("loop items nested too deeply");
  if (items->empty()) {
    return ExecBody(s.bodies[1], ChildScope(scope, Missing(s, 1)), out).status();
  }
  for (size_t i = 0; i < items->size(); ++i) {
    PAGODA_RETURN_IF_ERROR(ctx_.Iteration());
    ScopePtr iteration = ChildScope(scope, Missing(s, 0));
    PAGODA_RETURN_IF_ERROR(Assign(s.target, (*items)[i], iteration));
    auto loop = std::make_shared<Object>();
    loop->kind = Object::Kind::kLoop;
    loop->items = items;
    loop->index = i;
    loop->depth = depth + 1;
    loop->loop_depth = loop_depth;
    if (s.recursive) loop->loop_stmt = &s, loop->loop_scope = scope;
    iteration->Set("loop", Value(Value::Variant(ObjectPtr(std::move(loop)))));
    PAGODA_ASSIGN_OR_RETURN(Flow f, ExecBody(s.bodies[0], iteration, out));
    if (f == Flow::kBreak) break;
  }
  return Status::Ok();
}

Result<Flow> Evaluator::ExecCallBlock(const Stmt& s, const ScopePtr& scope, Text* out) {
  const Expr& call = *s.exprs[0];
  PAGODA_ASSIGN_OR_RETURN(Value callee, Eval(*call.items[0], scope));
  PAGODA_ASSIGN_OR_RETURN(Args args, EvalArgs(call.args, scope));
  auto caller = std::make_shared<Callable>();
  caller->kind = Callable::Kind::kMacro;
  caller->name = "caller";
  caller->macro = s.macro.get();
  caller->closure = scope;
  args.keyword.emplace_back("caller", Value(Value::Variant(CallablePtr(std::move(caller)))));
  PAGODA_ASSIGN_OR_RETURN(Value result, Call(callee, args));
  PAGODA_RETURN_IF_ERROR(Write(result, out));
  return Flow::kNormal;
}

Result<Flow> Evaluator::ExecWith(const Stmt& s, const ScopePtr& scope, Text* out) {
  ScopePtr inner = ChildScope(scope, Missing(s, 0));
  for (size_t i = 0; i < s.with_names.size(); ++i) {
    PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[i], scope));
    inner->Set(s.with_names[i], std::move(v));
  }
  return ExecBody(s.bodies[0], inner, out);
}

Result<Value> Evaluator::Capture(const Stmt& s, const Expr* filters, const ScopePtr& scope) {
  Text captured;
  PAGODA_ASSIGN_OR_RETURN(Flow f,
                          ExecBody(s.bodies[0], ChildScope(scope, Missing(s, 0)), &captured));
  (void)f;
  Value v = Value::Str(std::move(captured));
  if (filters == nullptr) return v;
  return EvalFilter(*filters, scope, &v);
}

Status Evaluator::Append(const Text& t, Text* out) {
  PAGODA_RETURN_IF_ERROR(ctx_.CheckStringSize(out->size() + t.size()));
  PAGODA_RETURN_IF_ERROR(ctx_.Built(t.size()));
  out->Append(t);
  return Status::Ok();
}

Status Evaluator::Write(const Value& v, Text* out) {
  PAGODA_ASSIGN_OR_RETURN(Text t, ToText(v));
  return Append(t, out);
}

Status Evaluator::Assign(const Target& target, const Value& v, const ScopePtr& scope) {
  if (!target.attr.empty()) {
    const Value* ns = scope->Find(target.names[0]);
    if (ns == nullptr || !ns->is(Value::Type::kObject) ||
        ns->object().kind != Object::Kind::kNamespace) {
      return InvalidArgument("cannot assign attribute on non-namespace object");
    }
    return ns->object().attrs.Set(Value::Str(target.attr), v);
  }
  if (!target.tuple) {
    scope->Set(target.names[0], v);
    return Status::Ok();
  }
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx_, v));
  if (items.size() != target.names.size()) {
    const std::string want = std::to_string(target.names.size());
    if (items.size() > target.names.size()) {
      return InvalidArgument("too many values to unpack (expected " + want + ")");
    }
    return InvalidArgument("not enough values to unpack (expected " + want + ", got " +
                           std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i) scope->Set(target.names[i], items[i]);
  return Status::Ok();
}

}  // namespace pagoda::jinja
