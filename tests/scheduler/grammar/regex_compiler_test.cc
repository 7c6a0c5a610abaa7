// RegexToGbnf through the real GBNF parser and matcher: a table of regexes with strings that
// must and must not match (whole), a cross-check against std::regex (ECMAScript, full match)
// on random strings, and the errors for what a grammar cannot express.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "scheduler/grammar/constraint_compilers.h"
#include "scheduler/grammar/grammar.h"

namespace pagoda::grammar {
namespace {

std::shared_ptr<const Grammar> Compile(const std::string& regex) {
  Result<std::string> gbnf = RegexToGbnf(regex);
  EXPECT_TRUE(gbnf.ok()) << regex << ": " << gbnf.status().ToString();
  if (!gbnf.ok()) return nullptr;
  Result<std::shared_ptr<const Grammar>> grammar = ParseGbnf(*gbnf);
  EXPECT_TRUE(grammar.ok()) << regex << "\n" << *gbnf << grammar.status().ToString();
  return grammar.ok() ? *grammar : nullptr;
}

bool Matches(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  GrammarMatcher m(grammar);
  return m.Accept(text) && m.IsAccepting();
}

std::string ErrorOf(const std::string& regex, const CompileLimits& limits = {}) {
  Result<std::string> gbnf = RegexToGbnf(regex, limits);
  EXPECT_FALSE(gbnf.ok()) << regex << " compiled to\n" << (gbnf.ok() ? *gbnf : "");
  if (gbnf.ok()) return "";
  EXPECT_EQ(gbnf.status().code(), StatusCode::kInvalidArgument);
  return gbnf.status().message();
}

struct Case {
  std::string regex;
  std::vector<std::string> matching;
  std::vector<std::string> not_matching;
};

TEST(RegexCompiler, Table) {
  const std::vector<Case> cases = {
      {"abc", {"abc"}, {"", "ab", "abcd", "xabc"}},
      {"^abc$", {"abc"}, {"abcc"}},
      {"a|bc|", {"a", "bc", ""}, {"b", "abc"}},
      {"^a|b$", {"a", "b"}, {"ab"}},
      {"colou?r", {"color", "colour"}, {"colouur"}},
      {"a*b+c?", {"b", "aab", "bbbc", "abc"}, {"", "a", "c", "abcc"}},
      {"(ab)+", {"ab", "abab"}, {"", "aba"}},
      {"(?:ab|cd){2}", {"abcd", "cdcd"}, {"ab", "abcdab"}},
      {"(?<year>\\d{4})-(?P<m>\\d\\d)", {"2024-05"}, {"24-05", "2024-5"}},
      {"x{2,}", {"xx", "xxxxx"}, {"x"}},
      {"x{,2}y", {"y", "xy", "xxy"}, {"xxxy"}},
      {"x{1,3}?y", {"xy", "xxxy"}, {"y", "xxxxy"}},
      {"a{0}b", {"b"}, {"ab"}},
      {"[a-c]+", {"abcab"}, {"abcd", ""}},
      {"[^a-c\\d]", {"d", "-"}, {"a", "5", "dd"}},
      {"[]a]", {"]", "a"}, {"b"}},
      {"[a\\-z]", {"a", "-", "z"}, {"b"}},
      {"[-a]", {"-", "a"}, {"b"}},
      {"[\\w.]+@[\\w.]+", {"a.b@c_d.e"}, {"a b@c", "@c"}},
      {"\\s\\S\\D\\W", {" xa!", "\txx-"}, {"  a!", " x1!", " xaa"}},
      {"a.c",
       {"abc", "a c",
        "a\xe4\xb8\xad"
        "c"},
       {"a\nc", "ac"}},
      {"\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\\\\\/\\^\\$", {".*+?()[]{}|\\/^$"}, {""}},
      {"\\x41\\u00e9\\n\\t", {"A\xc3\xa9\n\t"}, {"Ae\n\t"}},
      {"\\0\\a\\f\\v\\r", {std::string("\0\a\f\v\r", 5)}, {"0afvr"}},
      {"\xc3\xa9+[\xce\xb1-\xcf\x89]", {"\xc3\xa9\xc3\xa9\xce\xb2"}, {"e\xce\xb2"}},
      {"a{", {"a{"}, {"a"}},
      {"a{x}", {"a{x}"}, {"a"}},
      {"}", {"}"}, {""}},
      {"(?#a comment)x", {"x"}, {"a comment"}},
      {"", {""}, {"a"}},
      {"()", {""}, {"a"}},
      {"(a|)+b", {"b", "ab", "aab"}, {"a"}},
      {"\"quoted\"", {"\"quoted\""}, {"quoted"}},
      {"-?(0|[1-9]\\d*)(\\.\\d+)?", {"0", "-12", "3.25"}, {"01", "1.", "--1"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.regex);
    const auto grammar = Compile(c.regex);
    ASSERT_NE(grammar, nullptr);
    for (const std::string& s : c.matching) EXPECT_TRUE(Matches(grammar, s)) << s;
    for (const std::string& s : c.not_matching) EXPECT_FALSE(Matches(grammar, s)) << s;
  }
}

// Python's re (Unicode) and JavaScript read \d \w \s and `.` differently beyond ASCII; what
// the grammar produces must match under both.
TEST(RegexCompiler, ShorthandsKeepToWhatPythonAndJavaScriptShare) {
  const std::string e_acute = "\xc3\xa9", nbsp = "\xc2\xa0", arabic_three = "\xd9\xa3";
  const auto word = Compile("\\w");
  EXPECT_TRUE(Matches(word, "_"));
  EXPECT_FALSE(Matches(word, e_acute));  // JavaScript's \w is ASCII
  const auto non_word = Compile("\\W");
  EXPECT_TRUE(Matches(non_word, "!"));
  EXPECT_FALSE(Matches(non_word, e_acute));  // Python's \w holds it
  const auto non_digit = Compile("[^\\d]");
  EXPECT_TRUE(Matches(non_digit, "x"));
  EXPECT_FALSE(Matches(non_digit, arabic_three));  // a digit to Python
  const auto non_space = Compile("\\S");
  EXPECT_TRUE(Matches(non_space, e_acute));
  EXPECT_FALSE(Matches(non_space, nbsp));
  EXPECT_FALSE(Matches(non_space, "\x1c"));  // a space to Python
  const auto digits_too = Compile("[^\\D]");
  EXPECT_TRUE(Matches(digits_too, "7"));
  EXPECT_FALSE(Matches(digits_too, arabic_three));
  const auto dot = Compile(".");
  EXPECT_TRUE(Matches(dot, e_acute));
  EXPECT_FALSE(Matches(dot, "\r"));
  EXPECT_FALSE(Matches(dot, "\xe2\x80\xa8"));  // U+2028
}

// Random strings over a small alphabet, full-matched by std::regex and by the grammar.
TEST(RegexCompiler, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> regexes = {
      "a*b",          "(ab|a)*",       "a?b?c?",        "[ab]{2,3}c", "(a|b)*abb",
      "a(b|c)*d?",    "[^a]*a[^a]*",   "(aa|b)+",       "a{2}b{0,2}", "(a|bc|cab)*",
      "\\w\\d?",      "[a-c]+|b{3}",   "(a*)*b",        "((ab)?c)+",  "a.c",
      "(a|b|c){1,4}", "[abc]*c[abc]*", "(?:a|b)*(?:c)", "ba*|ab*",    "(a?){3}b"};
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> length(0, 7), letter(0, 4);
  const std::string alphabet = "abc1-";
  for (const std::string& r : regexes) {
    SCOPED_TRACE(r);
    const auto grammar = Compile(r);
    ASSERT_NE(grammar, nullptr);
    const std::regex reference(r, std::regex::ECMAScript);
    int matched = 0;
    for (int i = 0; i < 300; ++i) {
      std::string s;
      for (int n = length(rng); n > 0; --n) s += alphabet[static_cast<size_t>(letter(rng))];
      const bool expected = std::regex_match(s, reference);
      matched += expected;
      EXPECT_EQ(Matches(grammar, s), expected) << "'" << s << "'";
    }
    EXPECT_LT(matched, 300);
  }
}

TEST(RegexCompiler, EveryPrefixOfAMatchIsViable) {
  const auto grammar = Compile("(foo|bar)+[0-9]{2}");
  GrammarMatcher m(grammar);
  for (char c : std::string("barfoo42")) ASSERT_TRUE(m.Accept(std::string(1, c)));
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_FALSE(m.CanAccept("x"));
}

TEST(RegexCompiler, UnsupportedConstructsNameConstructAndOffset) {
  EXPECT_EQ(ErrorOf("a(?=b)"), "regex: lookahead '(?=' is not supported at offset 1");
  EXPECT_EQ(ErrorOf("(?!x)y"), "regex: lookahead '(?!' is not supported at offset 0");
  EXPECT_EQ(ErrorOf("x(?<=a)"), "regex: lookbehind '(?<=' is not supported at offset 1");
  EXPECT_EQ(ErrorOf("(?<!a)b"), "regex: lookbehind '(?<!' is not supported at offset 0");
  EXPECT_EQ(ErrorOf("(a)\\1"), "regex: backreference '\\1' is not supported at offset 3");
  EXPECT_EQ(ErrorOf("(?P<n>a)(?P=n)"), "regex: backreference '(?P=' is not supported at offset 8");
  EXPECT_EQ(ErrorOf("\\k<n>"), "regex: backreference '\\k' is not supported at offset 0");
  EXPECT_EQ(ErrorOf("a^b"),
            "regex: anchor '^' inside the regex (only at its ends) is not supported at offset 1");
  EXPECT_EQ(ErrorOf("a$b"),
            "regex: anchor '$' inside the regex (only at its ends) is not supported at offset 1");
  EXPECT_EQ(ErrorOf("(^a)"),
            "regex: anchor '^' inside the regex (only at its ends) is not supported at offset 1");
  EXPECT_EQ(ErrorOf("\\bword"), "regex: word boundary '\\b' is not supported at offset 0");
  EXPECT_EQ(ErrorOf("(?i)abc"),
            "regex: group '(?i' (inline flags, conditionals...) is not supported at offset 0");
  EXPECT_EQ(ErrorOf("a*+"), "regex: possessive quantifier is not supported at offset 2");
  EXPECT_EQ(ErrorOf("\\p{L}"), "regex: Unicode property '\\p' is not supported at offset 0");
  EXPECT_EQ(ErrorOf("(?>a)"), "regex: atomic group '(?>' is not supported at offset 0");
}

TEST(RegexCompiler, SyntaxErrors) {
  EXPECT_EQ(ErrorOf("(ab"), "regex: missing ')' for the group at offset 0");
  EXPECT_EQ(ErrorOf("ab)"), "regex: unbalanced ')' at offset 2");
  EXPECT_EQ(ErrorOf("*a"), "regex: nothing to repeat at offset 0");
  EXPECT_EQ(ErrorOf("a|+"), "regex: nothing to repeat at offset 2");
  EXPECT_EQ(ErrorOf("a**"), "regex: multiple repeat at offset 2");
  EXPECT_EQ(ErrorOf("[abc"), "regex: unterminated character class at offset 0");
  EXPECT_EQ(ErrorOf("[z-a]"), "regex: character range out of order at offset 1");
  EXPECT_EQ(ErrorOf("[a-\\d]"), "regex: bad character range at offset 1");
  EXPECT_EQ(ErrorOf("a{3,2}"), "regex: repetition maximum below its minimum at offset 1");
  EXPECT_EQ(ErrorOf("\\q"), "regex: unknown escape '\\q' at offset 0");
  EXPECT_EQ(ErrorOf("ab\\"), "regex: a trailing '\\' at offset 2");
  EXPECT_EQ(ErrorOf("\\x4"), "regex: expected 2 hex digits in the escape at offset 0");
  EXPECT_EQ(ErrorOf("\\uD800"), "regex: escape names no valid code point at offset 0");
  EXPECT_EQ(ErrorOf("[^\\x00-\\U0010FFFF]"),
            "regex: character class matches no character at offset 0");
  EXPECT_EQ(ErrorOf("(?<1a>x)"), "regex: bad group name at offset 3");
  EXPECT_NE(ErrorOf("a\xff").find("invalid UTF-8"), std::string::npos);
}

TEST(RegexCompiler, LimitsGiveClearErrors) {
  EXPECT_EQ(ErrorOf("a{100000}"),
            "regex: repetition count 100000 exceeds the limit of 10000 (max_repetition) at "
            "offset 1");
  EXPECT_EQ(ErrorOf("a{99999999999999999999}"),
            "regex: repetition count 1099511627776 exceeds the limit of 10000 (max_repetition) "
            "at offset 1");
  EXPECT_NE(ErrorOf(std::string(70, '(') + "a" + std::string(70, ')')).find("(max_depth)"),
            std::string::npos);
  CompileLimits few;
  few.max_alternatives = 3;
  EXPECT_NE(ErrorOf("a|b|c|d", few).find("(max_alternatives)"), std::string::npos);
  EXPECT_NE(ErrorOf("(a{10000}){10000}b{10000}c{10000}d{10000}e{10000}f{10000}g{10000}"
                    "h{10000}i{10000}j{10000}")
                .find("(max_total_repetition)"),
            std::string::npos);
  CompileLimits small;
  small.max_output_bytes = 64;
  EXPECT_NE(ErrorOf(std::string(100, 'x'), small).find("(max_output_bytes)"), std::string::npos);
  // Nested counts stay cheap: each repeated group is one symbol to the parser.
  EXPECT_NE(Compile("((a{100}){100}){9}"), nullptr);
}

}  // namespace
}  // namespace pagoda::grammar
