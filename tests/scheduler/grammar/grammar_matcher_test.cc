// GrammarMatcher: accepting and rejecting bytes (literals, classes, UTF-8 split anywhere,
// repetition bounds, nesting, ambiguity), accepting / terminated states, value semantics, the
// exact state identity used as the mask-cache key, a JSON grammar, and the stack limit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scheduler/grammar/grammar.h"

namespace pagoda::grammar {
namespace testing {
// Shared with token_mask_test.cc: JSON (RFC 8259) in GBNF.
extern const char kJsonGbnf[];
const char kJsonGbnf[] = R"gbnf(
root    ::= ws value ws
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member  ::= string ws ":" ws value
array   ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1F\x7F] | "\\" ( ["\\/bfnrt] | "u" hex{4} )
hex     ::= [0-9a-fA-F]
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n]*
)gbnf";
}  // namespace testing

namespace {

std::shared_ptr<const Grammar> Parse(const std::string& text, const GrammarLimits& limits = {}) {
  auto g = ParseGbnf(text, limits);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

bool FullMatch(const std::shared_ptr<const Grammar>& g, std::string_view input) {
  GrammarMatcher m(g);
  return m.Accept(input) && m.IsAccepting();
}

TEST(GrammarMatcher, LiteralAcceptRejectAndUnchangedOnFailure) {
  GrammarMatcher m(Parse(R"(root ::= "hello" " world"?)"));
  EXPECT_FALSE(m.IsAccepting());
  EXPECT_TRUE(m.CanAccept("hel"));
  EXPECT_FALSE(m.CanAccept("help"));
  EXPECT_TRUE(m.Accept("hel"));
  EXPECT_FALSE(m.Accept("p"));
  EXPECT_FALSE(m.Accept("lo!"));  // "lo" fits, "!" does not: nothing is consumed
  EXPECT_TRUE(m.Accept("lo"));
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.Accept(""));
  EXPECT_TRUE(m.Accept(" world"));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.CanAccept("x"));
}

TEST(GrammarMatcher, MultiByteCharactersSplitAtEveryByte) {
  auto g = Parse(R"(root ::= [a-zé中😀]+ [^é]?)");
  const std::string text =
      "h\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"
      "a\xC3\xA8";  // hé中😀aè
  for (size_t cut1 = 0; cut1 <= text.size(); ++cut1) {
    for (size_t cut2 = cut1; cut2 <= text.size(); ++cut2) {
      GrammarMatcher m(g);
      ASSERT_TRUE(m.Accept(text.substr(0, cut1))) << cut1;
      ASSERT_TRUE(m.Accept(text.substr(cut1, cut2 - cut1))) << cut1 << " " << cut2;
      ASSERT_TRUE(m.Accept(text.substr(cut2))) << cut2;
      EXPECT_TRUE(m.IsAccepting());
    }
  }
  EXPECT_FALSE(FullMatch(g, "h\xC3\xA8\xC3\xA8"));  // è only as the last character
  EXPECT_FALSE(FullMatch(g, "h\xC3"));              // half a character is not a sentence
  GrammarMatcher m(g);
  EXPECT_TRUE(m.Accept("h\xC3"));
  EXPECT_FALSE(m.CanAccept("\xC3"));  // a lead byte cannot follow a lead byte
  EXPECT_TRUE(
      m.CanAccept("\xA9"
                  "a"));             // é, then more
  EXPECT_TRUE(m.CanAccept("\xA8"));  // è as the final [^é]
  EXPECT_FALSE(
      m.CanAccept("\xA8"
                  "a"));  // ... which nothing follows
}

TEST(GrammarMatcher, NegatedClassExcludesOnlyItsCharacters) {
  auto g = Parse(R"(root ::= [^"\\]*)");
  EXPECT_TRUE(FullMatch(g, "abc \xE4\xB8\xAD \xF0\x9F\x98\x80 '"));
  EXPECT_FALSE(FullMatch(g, "ab\"c"));
  EXPECT_FALSE(FullMatch(g, "ab\\c"));
  EXPECT_FALSE(FullMatch(g, "\xFF"));
}

TEST(GrammarMatcher, RepetitionBoundaries) {
  auto g = Parse(R"(root ::= "a"{2,4} "b"{3} "c"{2,})");
  EXPECT_FALSE(FullMatch(g, "abbbcc"));
  EXPECT_TRUE(FullMatch(g, "aabbbcc"));
  EXPECT_TRUE(FullMatch(g, "aaaabbbcccccc"));
  EXPECT_FALSE(FullMatch(g, "aaaaabbbcc"));
  EXPECT_FALSE(FullMatch(g, "aabbcc"));
  EXPECT_FALSE(FullMatch(g, "aabbbbcc"));
  EXPECT_FALSE(FullMatch(g, "aabbbc"));
  GrammarMatcher m(g);
  EXPECT_TRUE(m.Accept("aaaa"));
  EXPECT_FALSE(m.CanAccept("a"));
}

TEST(GrammarMatcher, NestedRules) {
  auto g = Parse(R"g(
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= num | "(" expr ")"
num  ::= [0-9]+
)g");
  EXPECT_TRUE(FullMatch(g, "1+(2-(30+4))-5"));
  EXPECT_FALSE(FullMatch(g, "1+(2-(30+4)-5"));
  EXPECT_FALSE(FullMatch(g, "1+"));
  EXPECT_FALSE(FullMatch(g, "()"));
}

TEST(GrammarMatcher, AmbiguousAlternativesKeepEveryParse) {
  auto g = Parse(R"(root ::= ("a" | "ab")* "b")");
  for (const char* ok : {"b", "ab", "abb", "aab", "abab", "ababb", "aaab"}) {
    EXPECT_TRUE(FullMatch(g, ok)) << ok;
  }
  for (const char* bad : {"", "a", "ba", "abba", "bb"}) EXPECT_FALSE(FullMatch(g, bad)) << bad;
  GrammarMatcher m(g);
  ASSERT_TRUE(m.Accept("ab"));
  EXPECT_TRUE(m.IsAccepting());  // "a" then "b" ...
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.CanAccept("b"));  // ... or "ab" then "b"
  EXPECT_GE(m.num_stacks(), 2u);
}

TEST(GrammarMatcher, AcceptingAndTerminated) {
  GrammarMatcher m(Parse(R"(root ::= "x" | "x" "y" | "")"));
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_FALSE(m.IsTerminated());
  ASSERT_TRUE(m.Accept("x"));
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_FALSE(m.IsTerminated());
  ASSERT_TRUE(m.Accept("y"));
  EXPECT_TRUE(m.IsTerminated());
  GrammarMatcher never(Parse(R"(root ::= [] | "")"));  // only the empty string
  EXPECT_TRUE(never.IsTerminated());
}

TEST(GrammarMatcher, CopiesAreIndependentValues) {
  auto g = Parse(R"(root ::= [a-z]+ "!")");
  GrammarMatcher a(g);
  ASSERT_TRUE(a.Accept("abc"));
  GrammarMatcher b = a;
  ASSERT_TRUE(b.Accept("!"));
  EXPECT_TRUE(b.IsAccepting());
  EXPECT_FALSE(a.IsAccepting());
  EXPECT_TRUE(a.CanAccept("d"));
  GrammarMatcher c(g);
  c = b;
  EXPECT_TRUE(c.IsTerminated());
  c = a;
  EXPECT_FALSE(c.IsAccepting());
  GrammarMatcher moved = std::move(c);
  EXPECT_TRUE(moved.Accept("x!"));
  EXPECT_TRUE(moved.SameState(b));
  EXPECT_EQ(moved.grammar(), g);
}

TEST(GrammarMatcher, StateIdentityIsExact) {
  auto g = Parse(R"(root ::= ([ab] "-")* "c")");
  GrammarMatcher x(g), y(g), z(g);
  ASSERT_TRUE(x.Accept("a-"));
  ASSERT_TRUE(y.Accept("b-a-b-"));
  EXPECT_TRUE(x.SameState(y));
  EXPECT_EQ(x.StateHash(), y.StateHash());
  ASSERT_TRUE(z.Accept("a"));
  EXPECT_FALSE(x.SameState(z));
  EXPECT_NE(x.StateHash(), z.StateHash());
  GrammarMatcher start(g);
  EXPECT_TRUE(x.SameState(start));  // ([ab] "-")* loops back to where it began
  GrammarMatcher other_grammar(Parse(R"(root ::= ([ab] "-")* "c")"));
  EXPECT_FALSE(start.SameState(other_grammar));  // same text, another Grammar object
}

TEST(GrammarMatcher, JsonGrammar) {
  auto g = Parse(testing::kJsonGbnf);
  for (const char* ok : {R"({"a": [1, -2.5e+3, true, null, {"b": "x\"\u00e9\n"}], "c": {}})", "[]",
                         " 0 ", R"("中文 😀")", R"([[[[]]]])", "-0.0E-0", R"({"k":false})"}) {
    EXPECT_TRUE(FullMatch(g, ok)) << ok;
  }
  for (const char* bad : {R"({"a" 1})", R"([1,])", "01", R"("\x")", R"({'a': 1})", "[1 2]", "tru",
                          "\"a\nb\"", R"({"a":1,})", "1.", R"("\u12G4")"}) {
    EXPECT_FALSE(FullMatch(g, bad)) << bad;
  }
  GrammarMatcher m(g);
  ASSERT_TRUE(m.Accept(R"({"key": "val)"));
  EXPECT_FALSE(m.IsAccepting());
  EXPECT_TRUE(m.CanAccept(R"(ue"})"));
  EXPECT_FALSE(m.CanAccept(R"(ue"]})"));
}

TEST(GrammarMatcher, StackLimitRejectsInsteadOfGrowing) {
  // After n x's, n + 1 parses remain (0..n pending y's).
  const std::string text = "root ::= a*\na ::= \"x\" | \"x\" a \"y\"";
  GrammarLimits limits;
  limits.max_stacks = 16;
  GrammarMatcher m(Parse(text, limits));
  int n = 0;
  while (n < 100 && m.Accept("x")) {
    EXPECT_LE(m.num_stacks(), 16u);
    ++n;
  }
  EXPECT_GE(n, 2);
  EXPECT_LT(n, 100);           // the limit stopped it
  EXPECT_TRUE(m.Accept("y"));  // the state survived the refused advance
  GrammarMatcher unlimited(Parse(text));
  EXPECT_TRUE(unlimited.Accept(std::string(100, 'x') + std::string(99, 'y')));
  EXPECT_TRUE(unlimited.IsAccepting());
}

}  // namespace
}  // namespace pagoda::grammar
