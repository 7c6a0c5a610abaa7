// The recursive-descent Parser shared by jinja_parser.cc (statements) and
// jinja_parser_expr.cc (expressions). Internal to the parser.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/chat/jinja_ast.h"
#include "model/chat/jinja_lexer.h"

namespace pagoda::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}
  Result<Body> ParseTemplate();

 private:
  // Token stream.
  const Token& Cur() const { return toks_[pos_]; }
  const Token& Look() const { return toks_[pos_ + 1 < toks_.size() ? pos_ + 1 : pos_]; }
  void Next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool IsOp(std::string_view op) const;
  bool IsName(std::string_view name) const;
  bool SkipOp(std::string_view op);
  bool SkipName(std::string_view name);
  Status ExpectOp(std::string_view op);
  Status ExpectName(std::string_view name);
  Result<std::string> ExpectAnyName();
  Status Expect(TokenKind kind);
  Status Error(const std::string& msg) const;
  Status ErrorAt(int line, const std::string& msg) const;
  std::string Describe(const Token& t) const;

  // Nesting guard for recursive productions.
  Status Enter();
  void Leave() { --depth_; }
  Result<ExprPtr> Seal(ExprPtr e);  // computes e->depth, bounded by kMaxParseDepth

  // Statements (jinja_parser.cc).
  Result<Body> Subparse(std::initializer_list<std::string_view> end_tags);
  Result<Body> ParseStatements(std::initializer_list<std::string_view> end_tags, bool drop_needle);
  Result<StmtPtr> ParseStatement();
  Result<StmtPtr> DispatchStatement(const std::string& tag, int line);
  Result<StmtPtr> ParseIf(int line);
  Result<StmtPtr> ParseFor(int line);
  Result<StmtPtr> ParseSet(int line);
  Result<StmtPtr> ParseMacro(int line);
  Result<StmtPtr> ParseCallBlock(int line);
  Result<StmtPtr> ParseFilterBlock(int line);
  Result<StmtPtr> ParseWith(int line);
  Result<StmtPtr> ParseSimpleBlock(StmtKind kind, int line, std::string_view end_tag);
  Status ParseSignature(MacroDef* macro);
  Result<Target> ParseAssignTarget(bool with_namespace, std::string_view extra_end);
  Status UnknownTag(const std::string& tag, int line) const;

  // Expressions (jinja_parser_expr.cc).
  Result<ExprPtr> ParseTuple(bool with_condexpr, bool explicit_parens, bool simplified,
                             std::string_view extra_end = {});
  Result<ExprPtr> ParseExpression(bool with_condexpr = true);
  Result<ExprPtr> ParseCondExpr();
  Result<ExprPtr> ParseOr();
  Result<ExprPtr> ParseAnd();
  Result<ExprPtr> ParseNot();
  Result<ExprPtr> ParseCompare();
  Result<ExprPtr> ParseMath1();
  Result<ExprPtr> ParseConcat();
  Result<ExprPtr> ParseMath2();
  Result<ExprPtr> ParsePow();
  Result<ExprPtr> ParseUnary(bool with_filter);
  Result<ExprPtr> ParsePrimary();
  Result<ExprPtr> ParseAtom();
  Result<ExprPtr> ParseList();
  Result<ExprPtr> ParseDict();
  Result<ExprPtr> ParsePostfix(ExprPtr node);
  Result<ExprPtr> ParseFilterExpr(ExprPtr node);
  Result<ExprPtr> ParseSubscript(ExprPtr node);
  Result<ExprPtr> ParseSubscribed();
  Result<ExprPtr> ParseCall(ExprPtr node);
  Status ParseCallArgs(CallArgs* args);
  Result<ExprPtr> ParseFilter(ExprPtr node, bool start_inline);
  Result<ExprPtr> ParseTest(ExprPtr node);
  Result<ExprPtr> Binary(ExprKind kind, std::string op, ExprPtr left, ExprPtr right, int line);
  void NoteName(const std::string& name);

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;                  // for `break` / `continue`
  std::vector<MacroDef*> macros_;       // macros being parsed (innermost last)
  std::vector<std::string> tag_stack_;  // open block tags, for error messages
};

}  // namespace pagoda::jinja
