// ParseGbnf: every syntax feature (checked by what the parsed grammar matches), the error
// messages of malformed grammars, left recursion and the limits.
#include <gtest/gtest.h>

#include <string>

#include "scheduler/grammar/grammar.h"

namespace pagoda::grammar {
namespace {

// Does `grammar` (which must parse) match exactly `input`?
bool Matches(const std::string& grammar, std::string_view input) {
  auto g = ParseGbnf(grammar);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << grammar;
  if (!g.ok()) return false;
  GrammarMatcher m(*g);
  return m.Accept(input) && m.IsAccepting();
}

std::string ErrorOf(const std::string& grammar, const GrammarLimits& limits = {}) {
  auto g = ParseGbnf(grammar, limits);
  if (g.ok()) return "(parsed)";
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  return g.status().message();
}

TEST(GbnfParser, LiteralsAndEscapes) {
  const std::string g = R"(root ::= "a\n\t\r\\\"\x41\u00e9\U0001F600\[\]\-" "é")";
  EXPECT_TRUE(Matches(g, "a\n\t\r\\\"A\xC3\xA9\xF0\x9F\x98\x80[]-\xC3\xA9"));
  EXPECT_FALSE(Matches(g, "a\n\t\r\\\"A"));
  EXPECT_TRUE(Matches(R"(root ::= "")", ""));
  EXPECT_FALSE(Matches(R"(root ::= "")", "x"));
}

TEST(GbnfParser, CharacterClasses) {
  const std::string g = "root ::= [a-c0-9_] [^a-z] [\\]\\[\\-] [a-] [\\x41-\\x43]";
  EXPECT_TRUE(Matches(g, "b7]-B"));
  EXPECT_TRUE(Matches(g, "_Z[aA"));
  EXPECT_TRUE(Matches(g, "0\xC3\xA9-aC"));  // é is not in a-z
  EXPECT_FALSE(Matches(g, "d7]-B"));
  EXPECT_FALSE(Matches(g, "bq]-B"));
  EXPECT_FALSE(Matches(g, "b7]bB"));
  EXPECT_FALSE(Matches(g, "b7]-D"));
  EXPECT_TRUE(Matches("root ::= [α-ω]+", "\xCE\xB1\xCF\x89"));  // αω
  EXPECT_FALSE(Matches("root ::= [α-ω]+", "a"));
  EXPECT_FALSE(Matches("root ::= []", ""));
  EXPECT_TRUE(Matches("root ::= [^]", "\xE4\xB8\xAD"));
}

TEST(GbnfParser, AnyCharacter) {
  const std::string g = "root ::= . . . .";
  EXPECT_TRUE(Matches(g, "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"));
  EXPECT_FALSE(Matches(g, "abc"));
  EXPECT_FALSE(Matches("root ::= .", "\xFF"));
  EXPECT_FALSE(Matches("root ::= .", "\xC0\x80"));          // overlong
  EXPECT_FALSE(Matches("root ::= .", "\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(Matches("root ::= .", "\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(Matches("root ::= .", "\xF4\x8F\xBF\xBF"));
}

TEST(GbnfParser, RulesGroupsAlternativesComments) {
  const std::string g = R"(
# a comment line
root ::= greeting " " name-list   # trailing comment
greeting ::= "hi" | "hello" |
             "hey"
name-list ::= (
    name_x        # names may use - and _
    ("," name_x)*
  )
name_x ::= [A-Z] [a-z]*
)";
  EXPECT_TRUE(Matches(g, "hey Bob,Al"));
  EXPECT_TRUE(Matches(g, "hello X"));
  EXPECT_FALSE(Matches(g, "hello "));
  EXPECT_FALSE(Matches(g, "yo Bob"));
  EXPECT_TRUE(Matches("root ::= a\r\na ::= \"x\"\r\n", "x"));
  EXPECT_TRUE(Matches("root ::=\n  \"x\"", "x"));
}

TEST(GbnfParser, Repetitions) {
  const std::string g = R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,} "f"{1,3} ("g" "h"){0,2} "i"{0})";
  EXPECT_TRUE(Matches(g, "bddef"));
  EXPECT_TRUE(Matches(g, "aaabbbcddeeefffghgh"));
  EXPECT_FALSE(Matches(g, "ddef"));         // b+ needs one
  EXPECT_FALSE(Matches(g, "bdef"));         // d{2}
  EXPECT_FALSE(Matches(g, "bddeffff"));     // f{1,3}
  EXPECT_FALSE(Matches(g, "bddefghghgh"));  // (gh){0,2}
  EXPECT_FALSE(Matches(g, "bddefgi"));      // i{0}
  EXPECT_TRUE(Matches(R"(root ::= "ab"{ 2 , 3 })", "ababab"));
  EXPECT_FALSE(Matches(R"(root ::= "ab"{2,3})", "aba"));
}

TEST(GbnfParser, RecursionThatConsumesIsFine) {
  const std::string g = R"g(root ::= "(" root ")" | "")g";
  EXPECT_TRUE(Matches(g, "((()))"));
  EXPECT_FALSE(Matches(g, "(()"));
}

TEST(GbnfParser, SyntaxErrors) {
  EXPECT_EQ(ErrorOf("root ::= \"a\"\nfoo ::= bar"), "line 2 col 9: undefined rule 'bar'");
  EXPECT_EQ(ErrorOf("start ::= \"a\""), "the grammar has no 'root' rule");
  EXPECT_EQ(ErrorOf("root ::= \"a\"\nroot ::= \"b\""),
            "line 2 col 1: rule 'root' is defined twice");
  EXPECT_EQ(ErrorOf("root = \"a\""), "line 1 col 6: expected '::=', found '='");
  EXPECT_EQ(ErrorOf("::= \"a\""), "line 1 col 1: expected a rule name, found ':'");
  EXPECT_EQ(ErrorOf("root ::= \"abc"), "line 1 col 10: unterminated string literal");
  EXPECT_EQ(ErrorOf("root ::= [abc"), "line 1 col 10: unterminated character class");
  EXPECT_EQ(ErrorOf("root ::= \"\\q\""), "line 1 col 11: unknown escape '\\q'");
  EXPECT_EQ(ErrorOf("root ::= \"\\x4\""), "line 1 col 11: expected 2 hex digits after '\\x'");
  EXPECT_EQ(ErrorOf("root ::= \"\\U00110000\""), "line 1 col 11: code point above U+10FFFF");
  EXPECT_EQ(ErrorOf("root ::= \"\\uD800\""), "line 1 col 11: surrogate code point in a literal");
  EXPECT_EQ(ErrorOf("root ::= [z-a]"), "line 1 col 11: character range out of order");
  EXPECT_EQ(ErrorOf("root ::= (\"a\" \"b\""),
            "line 1 col 18: expected ')' or an item, found the end of the grammar");
  EXPECT_EQ(ErrorOf("root ::= * \"a\""), "line 1 col 10: expected an item before '*'");
  EXPECT_EQ(ErrorOf("root ::= \"a\"{3,2}"), "line 1 col 13: repetition maximum below its minimum");
  EXPECT_EQ(ErrorOf("root ::= \"a\"{2"),
            "line 1 col 15: expected '}', found the end of the grammar");
  EXPECT_EQ(ErrorOf("root ::= \"a\"{,2}"), "line 1 col 14: expected a number, found ','");
  EXPECT_EQ(ErrorOf("root ::= \"a\" @"),
            "line 1 col 14: expected an item, '|' or the end of the rule, found '@'");
  EXPECT_EQ(ErrorOf("root ::= \"\xFF\""), "line 1 col 11: invalid UTF-8");
}

TEST(GbnfParser, LeftRecursionIsRejected) {
  EXPECT_EQ(ErrorOf("root ::= root \"a\" | \"b\""),
            "line 1 col 1: left recursion: rule 'root' can reach itself without matching a "
            "character (a repeated item that can be empty also does)");
  const std::string indirect = "root ::= a\na ::= b \"x\"\nb ::= \"\" | c\nc ::= \"y\"? root";
  EXPECT_NE(ErrorOf(indirect).find("left recursion: rule '"), std::string::npos);
  const std::string empty_star = "root ::= \"x\" item*\nitem ::= \"a\"?";
  const std::string err = ErrorOf(empty_star);
  EXPECT_NE(err.find("left recursion: a repetition in rule 'root'"), std::string::npos) << err;
}

TEST(GbnfParser, Limits) {
  GrammarLimits small;
  small.max_text_bytes = 10;
  EXPECT_EQ(ErrorOf("root ::= \"abcdef\"", small),
            "grammar text of 17 bytes exceeds the limit of 10");
  small = {};
  small.max_nesting = 3;
  EXPECT_EQ(ErrorOf("root ::= ((((\"a\"))))", small),
            "line 1 col 13: groups nest deeper than the limit of 3");
  EXPECT_EQ(ErrorOf("root ::= (((\"a\")))", small), "(parsed)");
  small = {};
  small.max_repetition = 100;
  EXPECT_EQ(ErrorOf("root ::= \"a\"{101}", small),
            "line 1 col 14: repetition count above the limit of 100");
  small = {};
  small.max_elements = 200;
  EXPECT_NE(ErrorOf("root ::= \"a\"{150} \"b\"{150}", small).find("more than 200 elements"),
            std::string::npos);
  // Deep nesting with default limits is an error, not a stack overflow.
  std::string deep = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
  EXPECT_NE(ErrorOf(deep).find("nest deeper than the limit of 128"), std::string::npos);
}

TEST(GbnfParser, AmbiguousStartBeyondLimitsIsAnError) {
  GrammarLimits small;
  small.max_stacks = 5;
  EXPECT_NE(ErrorOf("root ::= \"a\" | \"b\" | \"c\" | \"d\" | \"e\" | \"f\"", small)
                .find("more than max_stacks (5)"),
            std::string::npos);
  // 2^40 ways to match nothing before "x": the expansion budget stops it.
  std::string g = "root ::=";
  for (int i = 0; i < 40; ++i) g += " b";
  g += " \"x\"\nb ::= c | d\nc ::= \"\"\nd ::= \"\"";
  EXPECT_NE(ErrorOf(g).find("max_advance_steps"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::grammar
