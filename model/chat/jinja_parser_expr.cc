// Expression productions of the Parser, in jinja2's precedence order (lowest first).
#include <utility>

#include "model/chat/jinja_parser_internal.h"

namespace pagoda::jinja {
namespace {

ExprPtr NewExpr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

bool IsCompareOp(const Token& t) {
  if (t.kind != TokenKind::kOp) return false;
  return t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" ||
         t.text == ">=";
}

}  // namespace

void Parser::NoteName(const std::string& name) {
  if (macros_.empty()) return;
  if (name == "varargs") macros_.back()->uses_varargs = true;
  if (name == "kwargs") macros_.back()->uses_kwargs = true;
  if (name == "caller") macros_.back()->uses_caller = true;
}

Result<ExprPtr> Parser::Binary(ExprKind kind, std::string op, ExprPtr left, ExprPtr right,
                               int line) {
  ExprPtr e = NewExpr(kind, line);
  e->name = std::move(op);
  e->items.push_back(std::move(left));
  e->items.push_back(std::move(right));
  return Seal(std::move(e));
}

Result<ExprPtr> Parser::ParseTuple(bool with_condexpr, bool explicit_parens, bool simplified,
                                   std::string_view extra_end) {
  const int line = Cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) PAGODA_RETURN_IF_ERROR(ExpectOp(","));
    const TokenKind k = Cur().kind;
    if (k == TokenKind::kVarEnd || k == TokenKind::kBlockEnd || IsOp(")") ||
        (!extra_end.empty() && IsName(extra_end))) {
      break;
    }
    auto item = simplified ? ParsePrimary() : ParseExpression(with_condexpr);
    if (!item.ok()) return item.status();
    items.push_back(std::move(item).value());
    if (!IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) return Error("Expected an expression, got '" + Describe(Cur()) + "'");
  }
  ExprPtr e = NewExpr(ExprKind::kTuple, line);
  e->items = std::move(items);
  return Seal(std::move(e));
}

Result<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  PAGODA_RETURN_IF_ERROR(Enter());
  auto e = with_condexpr ? ParseCondExpr() : ParseOr();
  Leave();
  return e;
}

Result<ExprPtr> Parser::ParseCondExpr() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (IsName("if")) {
    const int line = Cur().line;
    Next();
    PAGODA_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
    ExprPtr otherwise;
    if (SkipName("else")) {
      PAGODA_RETURN_IF_ERROR(Enter());
      auto e = ParseCondExpr();
      Leave();
      if (!e.ok()) return e.status();
      otherwise = std::move(e).value();
    }
    ExprPtr node = NewExpr(ExprKind::kCond, line);
    node->items.push_back(std::move(expr));
    node->items.push_back(std::move(cond));
    node->items.push_back(std::move(otherwise));
    PAGODA_ASSIGN_OR_RETURN(expr, Seal(std::move(node)));
  }
  return expr;
}

Result<ExprPtr> Parser::ParseOr() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (IsName("or")) {
    const int line = Cur().line;
    Next();
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    PAGODA_ASSIGN_OR_RETURN(left,
                            Binary(ExprKind::kOr, "or", std::move(left), std::move(right), line));
  }
  return left;
}

Result<ExprPtr> Parser::ParseAnd() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (IsName("and")) {
    const int line = Cur().line;
    Next();
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    PAGODA_ASSIGN_OR_RETURN(left,
                            Binary(ExprKind::kAnd, "and", std::move(left), std::move(right), line));
  }
  return left;
}

Result<ExprPtr> Parser::ParseNot() {
  if (!IsName("not")) return ParseCompare();
  const int line = Cur().line;
  Next();
  PAGODA_RETURN_IF_ERROR(Enter());
  auto operand = ParseNot();
  Leave();
  if (!operand.ok()) return operand.status();
  ExprPtr e = NewExpr(ExprKind::kUnary, line);
  e->name = "not";
  e->items.push_back(std::move(operand).value());
  return Seal(std::move(e));
}

// a < b < c is (a < b) and (b < c), as in Python, with b evaluated once.
Result<ExprPtr> Parser::ParseCompare() {
  const int line = Cur().line;
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, ParseMath1());
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (IsCompareOp(Cur())) {
      op = Cur().text;
      Next();
    } else if (SkipName("in")) {
      op = "in";
    } else if (IsName("not") && Look().kind == TokenKind::kName && Look().text == "in") {
      Next();
      Next();
      op = "not in";
    } else {
      break;
    }
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
    if (!cmp) {
      cmp = NewExpr(ExprKind::kCompare, line);
      cmp->items.push_back(std::move(left));
    }
    cmp->ops.push_back(std::move(op));
    cmp->items.push_back(std::move(right));
  }
  if (!cmp) return left;
  return Seal(std::move(cmp));
}

Result<ExprPtr> Parser::ParseMath1() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (IsOp("+") || IsOp("-")) {
    const std::string op = Cur().text;
    const int line = Cur().line;
    Next();
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    PAGODA_ASSIGN_OR_RETURN(left,
                            Binary(ExprKind::kBinary, op, std::move(left), std::move(right), line));
  }
  return left;
}

Result<ExprPtr> Parser::ParseConcat() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
  while (IsOp("~")) {
    const int line = Cur().line;
    Next();
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
    PAGODA_ASSIGN_OR_RETURN(
        left, Binary(ExprKind::kBinary, "~", std::move(left), std::move(right), line));
  }
  return left;
}

Result<ExprPtr> Parser::ParseMath2() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const std::string op = Cur().text;
    const int line = Cur().line;
    Next();
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    PAGODA_ASSIGN_OR_RETURN(left,
                            Binary(ExprKind::kBinary, op, std::move(left), std::move(right), line));
  }
  return left;
}

Result<ExprPtr> Parser::ParsePow() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  while (IsOp("**")) {
    const int line = Cur().line;
    Next();
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    PAGODA_ASSIGN_OR_RETURN(
        left, Binary(ExprKind::kBinary, "**", std::move(left), std::move(right), line));
  }
  return left;
}

Result<ExprPtr> Parser::ParseUnary(bool with_filter) {
  PAGODA_RETURN_IF_ERROR(Enter());
  Result<ExprPtr> node = Status(StatusCode::kInternal, "unset");
  if (IsOp("-") || IsOp("+")) {
    ExprPtr e = NewExpr(ExprKind::kUnary, Cur().line);
    e->name = Cur().text;
    Next();
    auto operand = ParseUnary(false);
    if (operand.ok()) {
      e->items.push_back(std::move(operand).value());
      node = Seal(std::move(e));
    } else {
      node = operand.status();
    }
  } else {
    node = ParsePrimary();
  }
  if (node.ok()) node = ParsePostfix(std::move(node).value());
  if (node.ok() && with_filter) node = ParseFilterExpr(std::move(node).value());
  Leave();
  return node;
}

Result<ExprPtr> Parser::ParsePrimary() {
  const TokenKind k = Cur().kind;
  if (k == TokenKind::kName || k == TokenKind::kString || k == TokenKind::kInt ||
      k == TokenKind::kFloat) {
    return ParseAtom();
  }
  if (IsOp("(")) {
    Next();
    PAGODA_ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(true, true, false));
    PAGODA_RETURN_IF_ERROR(ExpectOp(")"));
    return inner;
  }
  if (IsOp("[")) return ParseList();
  if (IsOp("{")) return ParseDict();
  return Error("unexpected '" + Describe(Cur()) + "'");
}

// A name (true / false / none are literals), adjacent strings (concatenated) or a number.
Result<ExprPtr> Parser::ParseAtom() {
  const Token& t = Cur();
  ExprPtr e = NewExpr(ExprKind::kLiteral, t.line);
  if (t.kind == TokenKind::kString) {
    std::string s;
    while (Cur().kind == TokenKind::kString) {
      s += Cur().text;
      Next();
    }
    e->value = Value::Str(std::move(s));
    return e;
  }
  if (t.kind == TokenKind::kInt) {
    e->value = Value::Int(t.int_value);
  } else if (t.kind == TokenKind::kFloat) {
    e->value = Value::Float(t.float_value);
  } else if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
    e->value = Value::Bool(t.text == "true" || t.text == "True");
  } else if (t.text == "none" || t.text == "None") {
    e->value = Value::NoneValue();
  } else {
    e->kind = ExprKind::kName;
    e->name = t.text;
    NoteName(t.text);
  }
  Next();
  return e;
}

Result<ExprPtr> Parser::ParseList() {
  ExprPtr e = NewExpr(ExprKind::kList, Cur().line);
  Next();  // [
  while (!IsOp("]")) {
    if (!e->items.empty()) PAGODA_RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp("]")) break;
    PAGODA_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
    e->items.push_back(std::move(item));
  }
  PAGODA_RETURN_IF_ERROR(ExpectOp("]"));
  return Seal(std::move(e));
}

Result<ExprPtr> Parser::ParseDict() {
  ExprPtr e = NewExpr(ExprKind::kDict, Cur().line);
  Next();  // {
  while (!IsOp("}")) {
    if (!e->items.empty()) PAGODA_RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp("}")) break;
    PAGODA_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
    PAGODA_RETURN_IF_ERROR(ExpectOp(":"));
    PAGODA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    e->items.push_back(std::move(key));
    e->items.push_back(std::move(value));
  }
  PAGODA_RETURN_IF_ERROR(ExpectOp("}"));
  return Seal(std::move(e));
}

Result<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      PAGODA_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      PAGODA_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      PAGODA_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node), false));
    } else if (IsName("is")) {
      PAGODA_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      PAGODA_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  const int line = Cur().line;
  if (SkipOp(".")) {
    if (Cur().kind == TokenKind::kName) {
      ExprPtr e = NewExpr(ExprKind::kGetAttr, line);
      e->name = Cur().text;
      e->items.push_back(std::move(node));
      Next();
      return Seal(std::move(e));
    }
    if (Cur().kind != TokenKind::kInt) return Error("expected name or number");
    ExprPtr index = NewExpr(ExprKind::kLiteral, line);
    index->value = Value::Int(Cur().int_value);
    Next();
    return Binary(ExprKind::kGetItem, "[]", std::move(node), std::move(index), line);
  }
  Next();  // [
  std::vector<ExprPtr> args;
  while (!IsOp("]")) {
    if (!args.empty()) PAGODA_RETURN_IF_ERROR(ExpectOp(","));
    PAGODA_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  PAGODA_RETURN_IF_ERROR(ExpectOp("]"));
  if (args.empty()) return Error("expected an index");
  ExprPtr index;
  if (args.size() == 1) {
    index = std::move(args[0]);
  } else {
    index = NewExpr(ExprKind::kTuple, line);
    index->items = std::move(args);
    PAGODA_ASSIGN_OR_RETURN(index, Seal(std::move(index)));
  }
  return Binary(ExprKind::kGetItem, "[]", std::move(node), std::move(index), line);
}

Result<ExprPtr> Parser::ParseSubscribed() {
  const int line = Cur().line;
  ExprPtr slice = NewExpr(ExprKind::kSlice, line);
  if (SkipOp(":")) {
    slice->items.emplace_back();
  } else {
    PAGODA_ASSIGN_OR_RETURN(ExprPtr start, ParseExpression());
    if (!SkipOp(":")) return start;
    slice->items.push_back(std::move(start));
  }
  auto optional_expr = [&]() -> Result<ExprPtr> {
    if (IsOp("]") || IsOp(",") || IsOp(":")) return ExprPtr();
    return ParseExpression();
  };
  PAGODA_ASSIGN_OR_RETURN(ExprPtr stop, optional_expr());
  slice->items.push_back(std::move(stop));
  ExprPtr step;
  if (SkipOp(":")) {
    PAGODA_ASSIGN_OR_RETURN(step, optional_expr());
  }
  slice->items.push_back(std::move(step));
  return Seal(std::move(slice));
}

Result<ExprPtr> Parser::ParseCall(ExprPtr node) {
  ExprPtr e = NewExpr(ExprKind::kCall, Cur().line);
  e->items.push_back(std::move(node));
  PAGODA_RETURN_IF_ERROR(ParseCallArgs(&e->args));
  return Seal(std::move(e));
}

Status Parser::ParseCallArgs(CallArgs* args) {
  const int line = Cur().line;
  PAGODA_RETURN_IF_ERROR(ExpectOp("("));
  bool require_comma = false;
  auto ensure = [&](bool ok) -> Status {
    return ok ? Status::Ok() : ErrorAt(line, "invalid syntax for function call expression");
  };
  while (!IsOp(")")) {
    if (require_comma) {
      PAGODA_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
    }
    if (SkipOp("*")) {
      PAGODA_RETURN_IF_ERROR(ensure(!args->star_args && !args->star_kwargs));
      PAGODA_ASSIGN_OR_RETURN(args->star_args, ParseExpression());
    } else if (SkipOp("**")) {
      PAGODA_RETURN_IF_ERROR(ensure(!args->star_kwargs));
      PAGODA_ASSIGN_OR_RETURN(args->star_kwargs, ParseExpression());
    } else if (Cur().kind == TokenKind::kName && Look().kind == TokenKind::kOp &&
               Look().text == "=") {
      PAGODA_RETURN_IF_ERROR(ensure(!args->star_kwargs));
      std::string key = Cur().text;
      Next();
      Next();
      PAGODA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      args->keyword.emplace_back(std::move(key), std::move(value));
    } else {
      PAGODA_RETURN_IF_ERROR(
          ensure(!args->star_args && !args->star_kwargs && args->keyword.empty()));
      PAGODA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      args->positional.push_back(std::move(value));
    }
    require_comma = true;
  }
  return ExpectOp(")");
}

Result<ExprPtr> Parser::ParseFilter(ExprPtr node, bool start_inline) {
  while (IsOp("|") || start_inline) {
    if (!start_inline) Next();
    start_inline = false;
    const int line = Cur().line;
    PAGODA_ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
    while (SkipOp(".")) {
      PAGODA_ASSIGN_OR_RETURN(std::string part, ExpectAnyName());
      name += "." + part;
    }
    ExprPtr e = NewExpr(ExprKind::kFilter, line);
    e->name = std::move(name);
    e->items.push_back(std::move(node));
    if (IsOp("(")) PAGODA_RETURN_IF_ERROR(ParseCallArgs(&e->args));
    PAGODA_ASSIGN_OR_RETURN(node, Seal(std::move(e)));
  }
  return node;
}

Result<ExprPtr> Parser::ParseTest(ExprPtr node) {
  const int line = Cur().line;
  Next();  // is
  ExprPtr e = NewExpr(ExprKind::kTest, line);
  e->negated = SkipName("not");
  PAGODA_ASSIGN_OR_RETURN(e->name, ExpectAnyName());
  while (SkipOp(".")) {
    PAGODA_ASSIGN_OR_RETURN(std::string part, ExpectAnyName());
    e->name += "." + part;
  }
  e->items.push_back(std::move(node));
  const TokenKind k = Cur().kind;
  if (IsOp("(")) {
    PAGODA_RETURN_IF_ERROR(ParseCallArgs(&e->args));
  } else if ((k == TokenKind::kName || k == TokenKind::kString || k == TokenKind::kInt ||
              k == TokenKind::kFloat || IsOp("[") || IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Error("You cannot chain multiple tests with is");
    PAGODA_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    PAGODA_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    e->args.positional.push_back(std::move(arg));
  }
  return Seal(std::move(e));
}

}  // namespace pagoda::jinja
