// Jinja lexer: template source -> tokens, with Hugging Face's environment settings applied as
// jinja2's lexer applies them: newlines normalised to "\n", one trailing newline dropped
// (keep_trailing_newline=False), trim_blocks (the newline after a block or comment tag goes),
// lstrip_blocks (spaces and tabs before a block or comment tag on its own line go), "-" / "+"
// whitespace control, {# comments #} and {% raw %} blocks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda::jinja {

enum class TokenKind {
  kData,        // template text (raw blocks included)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the unescaped value
  kInt,
  kFloat,
  kOp,  // text holds the operator: "+", "//", "(", "==", ...
  kEof,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Errors: InvalidArgument "line N: ..." for an unclosed comment or raw block, a bad string
// escape, an unexpected character, unbalanced brackets.
Result<std::vector<Token>> Lex(std::string_view source);

}  // namespace pagoda::jinja
