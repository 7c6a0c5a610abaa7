#include "model/chat/jinja_parser.h"

#include <algorithm>
#include <utility>

#include "model/chat/jinja_parser_internal.h"

namespace pagoda::jinja {

// ---- token stream ----

bool Parser::IsOp(std::string_view op) const {
  return Cur().kind == TokenKind::kOp && Cur().text == op;
}

bool Parser::IsName(std::string_view name) const {
  return Cur().kind == TokenKind::kName && Cur().text == name;
}

bool Parser::SkipOp(std::string_view op) {
  if (!IsOp(op)) return false;
  Next();
  return true;
}

bool Parser::SkipName(std::string_view name) {
  if (!IsName(name)) return false;
  Next();
  return true;
}

std::string Parser::Describe(const Token& t) const {
  switch (t.kind) {
    case TokenKind::kData:
      return "template data";
    case TokenKind::kVarBegin:
      return "begin of print statement";
    case TokenKind::kVarEnd:
      return "end of print statement";
    case TokenKind::kBlockBegin:
      return "begin of statement block";
    case TokenKind::kBlockEnd:
      return "end of statement block";
    case TokenKind::kEof:
      return "end of template";
    case TokenKind::kString:
      return "string";
    case TokenKind::kInt:
      return "integer";
    case TokenKind::kFloat:
      return "float";
    default:
      return t.text;
  }
}

Status Parser::ErrorAt(int line, const std::string& msg) const {
  return InvalidArgument("syntax error, line " + std::to_string(line) + ": " + msg);
}

Status Parser::Error(const std::string& msg) const { return ErrorAt(Cur().line, msg); }

Status Parser::ExpectOp(std::string_view op) {
  if (SkipOp(op)) return Status::Ok();
  return Error("expected token '" + std::string(op) + "', got '" + Describe(Cur()) + "'");
}

Status Parser::ExpectName(std::string_view name) {
  if (SkipName(name)) return Status::Ok();
  return Error("expected token '" + std::string(name) + "', got '" + Describe(Cur()) + "'");
}

Result<std::string> Parser::ExpectAnyName() {
  if (Cur().kind != TokenKind::kName) {
    return Error("expected token 'name', got '" + Describe(Cur()) + "'");
  }
  std::string name = Cur().text;
  Next();
  return name;
}

Status Parser::Expect(TokenKind kind) {
  if (Cur().kind == kind) {
    Next();
    return Status::Ok();
  }
  Token want;
  want.kind = kind;
  return Error("expected token '" + Describe(want) + "', got '" + Describe(Cur()) + "'");
}

Status Parser::Enter() {
  if (++depth_ > kMaxParseDepth) {
    --depth_;
    return Error("template nested more than " + std::to_string(kMaxParseDepth) + " levels deep");
  }
  return Status::Ok();
}

Result<ExprPtr> Parser::Seal(ExprPtr e) {
  int d = 0;
  auto see = [&d](const ExprPtr& x) {
    if (x) d = std::max(d, x->depth);
  };
  for (const auto& x : e->items) see(x);
  for (const auto& x : e->args.positional) see(x);
  for (const auto& kv : e->args.keyword) see(kv.second);
  see(e->args.star_args);
  see(e->args.star_kwargs);
  e->depth = d + 1;
  if (e->depth > kMaxParseDepth) {
    return ErrorAt(
        e->line, "expression nested more than " + std::to_string(kMaxParseDepth) + " levels deep");
  }
  return e;
}

// ---- template structure ----

Result<Body> Parser::ParseTemplate() {
  PAGODA_ASSIGN_OR_RETURN(Body body, Subparse({}));
  if (Cur().kind != TokenKind::kEof) return Error("unexpected '" + Describe(Cur()) + "'");
  return body;
}

Result<Body> Parser::Subparse(std::initializer_list<std::string_view> end_tags) {
  Body body;
  while (Cur().kind != TokenKind::kEof) {
    const Token& t = Cur();
    auto stmt = std::make_unique<Stmt>();
    stmt->line = t.line;
    if (t.kind == TokenKind::kData) {
      stmt->kind = StmtKind::kText;
      stmt->text = t.text;
      Next();
    } else if (t.kind == TokenKind::kVarBegin) {
      Next();
      stmt->kind = StmtKind::kOutput;
      PAGODA_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true, false, false));
      stmt->exprs.push_back(std::move(e));
      PAGODA_RETURN_IF_ERROR(Expect(TokenKind::kVarEnd));
    } else if (t.kind == TokenKind::kBlockBegin) {
      Next();
      for (std::string_view tag : end_tags) {
        if (IsName(tag)) return body;
      }
      PAGODA_ASSIGN_OR_RETURN(stmt, ParseStatement());
      PAGODA_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd));
    } else {
      return Error("unexpected '" + Describe(t) + "'");
    }
    body.push_back(std::move(stmt));
  }
  if (end_tags.size() == 0) return body;
  std::string want;
  for (std::string_view tag : end_tags) {
    want += (want.empty() ? "'" : " or '") + std::string(tag) + "'";
  }
  return Error("Unexpected end of template. Jinja was looking for the following tags: " + want +
               ". The innermost block that needs to be closed is '" +
               (tag_stack_.empty() ? std::string("?") : tag_stack_.back()) + "'.");
}

Result<Body> Parser::ParseStatements(std::initializer_list<std::string_view> end_tags,
                                     bool drop_needle) {
  SkipOp(":");
  PAGODA_RETURN_IF_ERROR(Expect(TokenKind::kBlockEnd));
  PAGODA_ASSIGN_OR_RETURN(Body body, Subparse(end_tags));
  if (drop_needle) Next();
  return body;
}

Status Parser::UnknownTag(const std::string& tag, int line) const {
  std::string msg = "Encountered unknown tag '" + tag + "'.";
  if (!tag_stack_.empty()) {
    msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
  }
  return ErrorAt(line, msg);
}

Result<StmtPtr> Parser::ParseStatement() {
  if (Cur().kind != TokenKind::kName) return Error("tag name expected");
  PAGODA_RETURN_IF_ERROR(Enter());
  const std::string tag = Cur().text;
  const int line = Cur().line;
  tag_stack_.push_back(tag);
  auto stmt = DispatchStatement(tag, line);
  tag_stack_.pop_back();
  Leave();
  return stmt;
}

Result<StmtPtr> Parser::DispatchStatement(const std::string& tag, int line) {
  if (tag == "if") return ParseIf(line);
  if (tag == "for") return ParseFor(line);
  if (tag == "set") return ParseSet(line);
  if (tag == "macro") return ParseMacro(line);
  if (tag == "call") return ParseCallBlock(line);
  if (tag == "filter") return ParseFilterBlock(line);
  if (tag == "with") return ParseWith(line);
  if (tag == "generation") return ParseSimpleBlock(StmtKind::kBlock, line, "endgeneration");
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) return ErrorAt(line, "'" + tag + "' outside loop");
    Next();
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    stmt->line = line;
    return stmt;
  }
  if (tag == "print") {
    Next();
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = StmtKind::kOutput;
    stmt->line = line;
    PAGODA_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true, false, false));
    stmt->exprs.push_back(std::move(e));
    return stmt;
  }
  if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "block") {
    return ErrorAt(line, "'" + tag + "' is not supported: a chat template cannot load or " +
                             "extend other templates");
  }
  return UnknownTag(tag, line);
}

Result<StmtPtr> Parser::ParseIf(int line) {
  Next();  // if
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::kIf;
  stmt->line = line;
  while (true) {
    PAGODA_ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false, false, false));
    stmt->exprs.push_back(std::move(cond));
    PAGODA_ASSIGN_OR_RETURN(Body body, ParseStatements({"elif", "else", "endif"}, false));
    stmt->bodies.push_back(std::move(body));
    const std::string which = Cur().text;
    Next();
    if (which == "elif") continue;
    if (which == "else") {
      PAGODA_ASSIGN_OR_RETURN(Body else_body, ParseStatements({"endif"}, true));
      stmt->bodies.push_back(std::move(else_body));
    }
    return stmt;
  }
}

Result<StmtPtr> Parser::ParseFor(int line) {
  Next();  // for
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::kFor;
  stmt->line = line;
  PAGODA_ASSIGN_OR_RETURN(stmt->target, ParseAssignTarget(false, "in"));
  PAGODA_RETURN_IF_ERROR(ExpectName("in"));
  PAGODA_ASSIGN_OR_RETURN(ExprPtr iter, ParseTuple(false, false, false, "recursive"));
  stmt->exprs.push_back(std::move(iter));
  stmt->exprs.emplace_back();
  if (SkipName("if")) {
    PAGODA_ASSIGN_OR_RETURN(stmt->exprs[1], ParseExpression());
  }
  stmt->recursive = SkipName("recursive");
  ++loop_depth_;
  auto body = ParseStatements({"endfor", "else"}, false);
  --loop_depth_;
  if (!body.ok()) return body.status();
  stmt->bodies.push_back(std::move(body).value());
  const bool has_else = IsName("else");
  Next();
  Body else_body;
  if (has_else) {
    PAGODA_ASSIGN_OR_RETURN(else_body, ParseStatements({"endfor"}, true));
  }
  stmt->bodies.push_back(std::move(else_body));
  return stmt;
}

Result<StmtPtr> Parser::ParseSet(int line) {
  Next();  // set
  auto stmt = std::make_unique<Stmt>();
  stmt->line = line;
  PAGODA_ASSIGN_OR_RETURN(stmt->target, ParseAssignTarget(true, ""));
  if (SkipOp("=")) {
    stmt->kind = StmtKind::kSet;
    PAGODA_ASSIGN_OR_RETURN(ExprPtr value, ParseTuple(true, false, false));
    stmt->exprs.push_back(std::move(value));
    return stmt;
  }
  stmt->kind = StmtKind::kSetBlock;
  stmt->exprs.emplace_back();
  if (IsOp("|")) {
    PAGODA_ASSIGN_OR_RETURN(stmt->exprs[0], ParseFilter(nullptr, false));
  }
  PAGODA_ASSIGN_OR_RETURN(Body body, ParseStatements({"endset"}, true));
  stmt->bodies.push_back(std::move(body));
  return stmt;
}

Status Parser::ParseSignature(MacroDef* macro) {
  PAGODA_RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (!macro->params.empty()) PAGODA_RETURN_IF_ERROR(ExpectOp(","));
    PAGODA_ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
    ExprPtr dflt;
    if (SkipOp("=")) {
      PAGODA_ASSIGN_OR_RETURN(dflt, ParseExpression());
    } else if (!macro->defaults.empty() && macro->defaults.back()) {
      return Error("non-default argument follows default argument");
    }
    macro->params.push_back(std::move(name));
    macro->defaults.push_back(std::move(dflt));
  }
  return ExpectOp(")");
}

Result<StmtPtr> Parser::ParseMacro(int line) {
  Next();  // macro
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::kMacro;
  stmt->line = line;
  stmt->macro = std::make_unique<MacroDef>();
  PAGODA_ASSIGN_OR_RETURN(stmt->macro->name, ExpectAnyName());
  PAGODA_RETURN_IF_ERROR(ParseSignature(stmt->macro.get()));
  const int saved_loop_depth = std::exchange(loop_depth_, 0);
  macros_.push_back(stmt->macro.get());
  auto body = ParseStatements({"endmacro"}, true);
  macros_.pop_back();
  loop_depth_ = saved_loop_depth;
  if (!body.ok()) return body.status();
  stmt->macro->body = std::move(body).value();
  return stmt;
}

Result<StmtPtr> Parser::ParseCallBlock(int line) {
  Next();  // call
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::kCallBlock;
  stmt->line = line;
  stmt->macro = std::make_unique<MacroDef>();
  stmt->macro->name = "caller";
  if (IsOp("(")) PAGODA_RETURN_IF_ERROR(ParseSignature(stmt->macro.get()));
  PAGODA_ASSIGN_OR_RETURN(ExprPtr call, ParseExpression());
  if (call->kind != ExprKind::kCall) return ErrorAt(line, "expected call");
  stmt->exprs.push_back(std::move(call));
  const int saved_loop_depth = std::exchange(loop_depth_, 0);
  macros_.push_back(stmt->macro.get());
  auto body = ParseStatements({"endcall"}, true);
  macros_.pop_back();
  loop_depth_ = saved_loop_depth;
  if (!body.ok()) return body.status();
  stmt->macro->body = std::move(body).value();
  return stmt;
}

Result<StmtPtr> Parser::ParseFilterBlock(int line) {
  Next();  // filter
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::kFilterBlock;
  stmt->line = line;
  PAGODA_ASSIGN_OR_RETURN(ExprPtr chain, ParseFilter(nullptr, true));
  stmt->exprs.push_back(std::move(chain));
  PAGODA_ASSIGN_OR_RETURN(Body body, ParseStatements({"endfilter"}, true));
  stmt->bodies.push_back(std::move(body));
  return stmt;
}

Result<StmtPtr> Parser::ParseWith(int line) {
  Next();  // with
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::kWith;
  stmt->line = line;
  while (Cur().kind != TokenKind::kBlockEnd) {
    if (!stmt->with_names.empty()) PAGODA_RETURN_IF_ERROR(ExpectOp(","));
    PAGODA_ASSIGN_OR_RETURN(std::string name, ExpectAnyName());
    PAGODA_RETURN_IF_ERROR(ExpectOp("="));
    PAGODA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    stmt->with_names.push_back(std::move(name));
    stmt->exprs.push_back(std::move(value));
  }
  PAGODA_ASSIGN_OR_RETURN(Body body, ParseStatements({"endwith"}, true));
  stmt->bodies.push_back(std::move(body));
  return stmt;
}

Result<StmtPtr> Parser::ParseSimpleBlock(StmtKind kind, int line, std::string_view end_tag) {
  Next();
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = kind;
  stmt->line = line;
  PAGODA_ASSIGN_OR_RETURN(Body body, ParseStatements({end_tag}, true));
  stmt->bodies.push_back(std::move(body));
  return stmt;
}

Result<Target> Parser::ParseAssignTarget(bool with_namespace, std::string_view extra_end) {
  Target target;
  if (with_namespace && Cur().kind == TokenKind::kName && Look().kind == TokenKind::kOp &&
      Look().text == ".") {
    target.names.push_back(Cur().text);
    Next();
    Next();
    PAGODA_ASSIGN_OR_RETURN(target.attr, ExpectAnyName());
    return target;
  }
  PAGODA_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true, false, true, extra_end));
  auto add = [&](const Expr& x) -> Status {
    if (x.kind != ExprKind::kName || x.name == "true" || x.name == "false" || x.name == "none" ||
        x.name == "True" || x.name == "False" || x.name == "None") {
      return ErrorAt(x.line, "can't assign to this expression");
    }
    target.names.push_back(x.name);
    return Status::Ok();
  };
  if (e->kind == ExprKind::kTuple) {
    target.tuple = true;
    for (const auto& item : e->items) PAGODA_RETURN_IF_ERROR(add(*item));
  } else {
    PAGODA_RETURN_IF_ERROR(add(*e));
  }
  return target;
}

Result<Body> ParseTemplate(std::string_view source) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  return Parser(std::move(tokens)).ParseTemplate();
}

}  // namespace pagoda::jinja
