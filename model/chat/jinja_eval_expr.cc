// Expression evaluation and calls (globals, methods, macros) of the Evaluator.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/jinja_access.h"
#include "model/chat/jinja_builtins.h"
#include "model/chat/jinja_eval.h"
#include "model/chat/jinja_operators.h"

namespace pagoda::jinja {

Result<Value> Evaluator::Eval(const Expr& e, const ScopePtr& scope) {
  PAGODA_RETURN_IF_ERROR(ctx_.Step());
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.value;
    case ExprKind::kName:
      return EvalName(e, scope);
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kDict:
      return EvalItems(e, scope);
    case ExprKind::kGetAttr: {
      PAGODA_ASSIGN_OR_RETURN(Value obj, Eval(*e.items[0], scope));
      return GetAttr(obj, e.name);
    }
    case ExprKind::kGetItem:
      return EvalGetItem(e, scope);
    case ExprKind::kSlice:
      return Internal("a slice outside of a subscript");
    case ExprKind::kCall: {
      PAGODA_ASSIGN_OR_RETURN(Value callee, Eval(*e.items[0], scope));
      PAGODA_ASSIGN_OR_RETURN(Args args, EvalArgs(e.args, scope));
      return Call(callee, args);
    }
    case ExprKind::kFilter:
      return EvalFilter(e, scope, nullptr);
    case ExprKind::kTest:
      return EvalTest(e, scope);
    case ExprKind::kUnary: {
      PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*e.items[0], scope));
      return UnaryOp(e.name, v);
    }
    case ExprKind::kBinary: {
      PAGODA_ASSIGN_OR_RETURN(Value a, Eval(*e.items[0], scope));
      PAGODA_ASSIGN_OR_RETURN(Value b, Eval(*e.items[1], scope));
      return BinaryOp(ctx_, e.name, a, b);
    }
    case ExprKind::kCompare:
      return EvalCompare(e, scope);
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      PAGODA_ASSIGN_OR_RETURN(Value a, Eval(*e.items[0], scope));
      if (Truthy(a) == (e.kind == ExprKind::kOr)) return a;
      return Eval(*e.items[1], scope);
    }
    case ExprKind::kCond:
      return EvalCond(e, scope);
  }
  return Internal("unknown expression");
}

Result<Value> Evaluator::EvalName(const Expr& e, const ScopePtr& scope) {
  if (const Value* v = scope->Find(e.name)) return *v;
  if (IsGlobal(e.name)) {
    auto f = std::make_shared<Callable>();
    f->kind = Callable::Kind::kGlobal;
    f->name = e.name;
    return Value(Value::Variant(CallablePtr(std::move(f))));
  }
  return Value::MakeUndefined("'" + e.name + "' is undefined");
}

Result<Value> Evaluator::EvalItems(const Expr& e, const ScopePtr& scope) {
  std::vector<Value> values;
  values.reserve(e.items.size());
  for (const ExprPtr& item : e.items) {
    PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*item, scope));
    values.push_back(std::move(v));
  }
  if (e.kind != ExprKind::kDict) return MakeList(std::move(values), e.kind == ExprKind::kTuple);
  std::vector<std::pair<Value, Value>> entries;
  for (size_t i = 0; i + 1 < values.size(); i += 2) {
    entries.emplace_back(std::move(values[i]), std::move(values[i + 1]));
  }
  return MakeDict(std::move(entries));
}

Result<Value> Evaluator::EvalGetItem(const Expr& e, const ScopePtr& scope) {
  PAGODA_ASSIGN_OR_RETURN(Value obj, Eval(*e.items[0], scope));
  const Expr& index = *e.items[1];
  if (index.kind != ExprKind::kSlice) {
    PAGODA_ASSIGN_OR_RETURN(Value key, Eval(index, scope));
    return GetItem(ctx_, obj, key);
  }
  Value bounds[3];
  for (int i = 0; i < 3; ++i) {
    if (index.items[i]) {
      PAGODA_ASSIGN_OR_RETURN(bounds[i], Eval(*index.items[i], scope));
    } else {
      bounds[i] = Value::NoneValue();
    }
  }
  return GetSlice(ctx_, obj, bounds[0], bounds[1], bounds[2]);
}

Result<Value> Evaluator::EvalCompare(const Expr& e, const ScopePtr& scope) {
  PAGODA_ASSIGN_OR_RETURN(Value left, Eval(*e.items[0], scope));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    PAGODA_ASSIGN_OR_RETURN(Value right, Eval(*e.items[i + 1], scope));
    if (e.ops[i] == "==" || e.ops[i] == "!=") {  // linear in the containers compared
      for (const Value* v : {&left, &right}) {
        if (v->is(Value::Type::kList)) PAGODA_RETURN_IF_ERROR(ctx_.Work(v->list().items.size()));
        if (v->is(Value::Type::kDict)) PAGODA_RETURN_IF_ERROR(ctx_.Work(v->dict().size()));
      }
    }
    if (e.ops[i] == "in" || e.ops[i] == "not in") {  // linear in the container
      if (right.is_string()) PAGODA_RETURN_IF_ERROR(ctx_.Built(right.str().size()));
      if (right.is(Value::Type::kList)) {
        PAGODA_RETURN_IF_ERROR(ctx_.Work(right.list().items.size()));
      }
    }
    PAGODA_ASSIGN_OR_RETURN(bool ok, CompareOp(e.ops[i], left, right));
    if (!ok) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Result<Value> Evaluator::EvalFilter(const Expr& e, const ScopePtr& scope,
                                    const Value* block_input) {
  Value input;
  if (!e.items[0]) {
    if (block_input == nullptr) return Internal("filter without input");
    input = *block_input;
  } else if (e.items[0]->kind == ExprKind::kFilter) {
    PAGODA_RETURN_IF_ERROR(ctx_.Step());
    PAGODA_ASSIGN_OR_RETURN(input, EvalFilter(*e.items[0], scope, block_input));
  } else {
    PAGODA_ASSIGN_OR_RETURN(input, Eval(*e.items[0], scope));
  }
  PAGODA_ASSIGN_OR_RETURN(Args args, EvalArgs(e.args, scope));
  if (input.is_string() && (e.name == "length" || e.name == "count")) {
    PAGODA_RETURN_IF_ERROR(ctx_.Built(input.str().size()));
  }
  PAGODA_ASSIGN_OR_RETURN(Value out, ApplyFilter(ctx_, e.name, input, args));
  PAGODA_RETURN_IF_ERROR(CountBuilt(out, input));
  return out;
}

Result<Value> Evaluator::EvalTest(const Expr& e, const ScopePtr& scope) {
  PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*e.items[0], scope));
  PAGODA_ASSIGN_OR_RETURN(Args args, EvalArgs(e.args, scope));
  PAGODA_ASSIGN_OR_RETURN(bool ok, ApplyTest(ctx_, e.name, v, args));
  return Value::Bool(ok != e.negated);
}

Result<Value> Evaluator::EvalCond(const Expr& e, const ScopePtr& scope) {
  PAGODA_ASSIGN_OR_RETURN(Value cond, Eval(*e.items[1], scope));
  if (Truthy(cond)) return Eval(*e.items[0], scope);
  if (e.items[2]) return Eval(*e.items[2], scope);
  return Value::MakeUndefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
}

Result<Args> Evaluator::EvalArgs(const CallArgs& a, const ScopePtr& scope) {
  Args args;
  for (const ExprPtr& p : a.positional) {
    PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*p, scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [k, x] : a.keyword) {
    PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*x, scope));
    args.keyword.emplace_back(k, std::move(v));
  }
  if (a.star_args) {
    PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*a.star_args, scope));
    PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(ctx_, v));
    args.positional.insert(args.positional.end(), items.begin(), items.end());
  }
  if (a.star_kwargs) {
    PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*a.star_kwargs, scope));
    if (!v.is(Value::Type::kDict)) return InvalidArgument("argument after ** must be a mapping");
    for (const auto& [k, x] : v.dict().entries()) {
      if (!k.is_string()) return InvalidArgument("keywords must be strings");
      args.keyword.emplace_back(k.str(), x);
    }
  }
  return args;
}

Status Evaluator::CountBuilt(const Value& result, const Value& input) {
  if (!result.is_string()) return Status::Ok();
  if (input.is_string() && &input.text() == &result.text()) return Status::Ok();
  return ctx_.Built(result.str().size());
}

// loop(items) in a `recursive` loop: the loop body over `items`, one level deeper.
Result<Value> Evaluator::CallLoop(const Object& loop, const Args& args) {
  if (loop.loop_stmt == nullptr) return InvalidArgument("Tried to call non recursive loop");
  PAGODA_ASSIGN_OR_RETURN(auto a, BindArgs("loop", args, {"iterable"}, 1));
  ScopePtr scope = loop.loop_scope.lock();
  if (!scope) return InvalidArgument("the recursive loop has ended");
  PAGODA_RETURN_IF_ERROR(ctx_.EnterCall());
  Text out;
  Status st = RunLoop(*loop.loop_stmt, scope, *a[0], loop.loop_depth + 1, &out);
  ctx_.LeaveCall();
  if (!st.ok()) return st;
  return Value::Str(std::move(out));
}

Result<Value> Evaluator::Call(const Value& callee, const Args& args) {
  if (callee.is_undefined()) return UndefinedError(callee);
  if (callee.is(Value::Type::kObject) && callee.object().kind == Object::Kind::kLoop) {
    return CallLoop(callee.object(), args);
  }
  if (callee.is(Value::Type::kObject) && callee.object().kind == Object::Kind::kJoiner) {
    PAGODA_RETURN_IF_ERROR(BindArgs("joiner", args, {}).status());
    Object& j = callee.object();
    return std::exchange(j.used, true) ? j.separator : Value::Str("");
  }
  if (!callee.is(Value::Type::kFunc)) {
    return InvalidArgument("'" + TypeName(callee) + "' object is not callable");
  }
  const Callable& f = callee.func();
  switch (f.kind) {
    case Callable::Kind::kGlobal: {
      PAGODA_ASSIGN_OR_RETURN(Value out, CallGlobal(ctx_, f.name, args));
      PAGODA_RETURN_IF_ERROR(CountBuilt(out, Value()));
      return out;
    }
    case Callable::Kind::kMethod: {
      PAGODA_ASSIGN_OR_RETURN(Value out, CallMethod(ctx_, f.self, f.name, args));
      PAGODA_RETURN_IF_ERROR(CountBuilt(out, f.self));
      return out;
    }
    case Callable::Kind::kLoopCycle:
      if (args.positional.empty()) return InvalidArgument("no items for cycling given");
      return args.positional[f.self.as_int() % args.positional.size()];
    case Callable::Kind::kMacro:
      return CallMacro(f, args);
  }
  return Internal("unknown callable");
}

Status Evaluator::BindMacroArgs(const Callable& f, const Args& args, const ScopePtr& scope) {
  const MacroDef& m = *f.macro;
  const std::string who = "macro '" + m.name + "'";
  if (args.positional.size() > m.params.size() && !m.uses_varargs) {
    return InvalidArgument(who + " takes not more than " + std::to_string(m.params.size()) +
                           " argument(s)");
  }
  std::vector<bool> bound(m.params.size(), false);
  for (size_t i = 0; i < m.params.size() && i < args.positional.size(); ++i) {
    scope->Set(m.params[i], args.positional[i]);
    bound[i] = true;
  }
  std::vector<std::pair<Value, Value>> extra;
  for (const auto& [k, v] : args.keyword) {
    size_t i = 0;
    while (i < m.params.size() && m.params[i] != k) ++i;
    if (i < m.params.size()) {
      if (bound[i]) return InvalidArgument(who + " got multiple values for argument '" + k + "'");
      scope->Set(k, v);
      bound[i] = true;
    } else if (k == "caller" && m.uses_caller) {
      scope->Set("caller", v);
    } else if (m.uses_kwargs) {
      extra.emplace_back(Value::Str(k), v);
    } else {
      return InvalidArgument(who + " takes no keyword argument '" + k + "'");
    }
  }
  for (size_t i = 0; i < m.params.size(); ++i) {  // a default may read only earlier params
    if (!bound[i])
      scope->Set(m.params[i], Value::MakeUndefined("'" + m.params[i] + "' is undefined"));
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (bound[i]) continue;
    if (m.defaults[i]) {
      PAGODA_ASSIGN_OR_RETURN(Value v, Eval(*m.defaults[i], scope));
      scope->Set(m.params[i], std::move(v));
    } else {
      scope->Set(m.params[i],
                 Value::MakeUndefined("parameter '" + m.params[i] + "' was not provided"));
    }
  }
  if (m.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = m.params.size(); i < args.positional.size(); ++i) {
      rest.push_back(args.positional[i]);
    }
    PAGODA_ASSIGN_OR_RETURN(Value varargs, MakeList(std::move(rest), true));
    scope->Set("varargs", std::move(varargs));
  }
  if (m.uses_kwargs) {
    PAGODA_ASSIGN_OR_RETURN(Value kwargs, MakeDict(std::move(extra)));
    scope->Set("kwargs", std::move(kwargs));
  }
  return Status::Ok();
}

Result<Value> Evaluator::CallMacro(const Callable& f, const Args& args) {
  PAGODA_RETURN_IF_ERROR(ctx_.EnterCall());
  auto scope = std::make_shared<Scope>();
  scope->parent = f.closure.lock();
  if (!scope->parent) scope->parent = root_;
  scope->SetMissing(f.macro->missing);
  Text out;
  Status st = BindMacroArgs(f, args, scope);
  if (st.ok()) {
    auto flow = ExecBody(f.macro->body, scope, &out);
    if (!flow.ok()) st = flow.status();
  }
  ctx_.LeaveCall();
  if (!st.ok()) return st;
  return Value::Str(std::move(out));
}

}  // namespace pagoda::jinja
