// ConstraintSpec -> Grammar (CompileConstraint) and the compile cache (GrammarCache).
#include "scheduler/grammar/constraint.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace pagoda::grammar {
namespace {

bool Matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.Accept(text) && m.IsAccepting();
}

TEST(CompileConstraint, EveryKindCompilesToAMatcher) {
  auto schema = CompileConstraint({ConstraintKind::kJsonSchema,
                                   R"({"type": "object", "properties": {"a": {"type": "integer"}},
                                       "required": ["a"], "additionalProperties": false})",
                                   {},
                                   false,
                                   "json_schema"});
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  EXPECT_TRUE(Matches(*schema, R"({"a": 12})"));
  EXPECT_FALSE(Matches(*schema, R"({"a": "x"})"));
  auto object = CompileConstraint({ConstraintKind::kJsonObject, "", {}, false, "json_object"});
  ASSERT_TRUE(object.ok());
  EXPECT_TRUE(Matches(*object, R"({"k": [1, true, null]})"));
  EXPECT_FALSE(Matches(*object, "[1]"));
  auto regex = CompileConstraint({ConstraintKind::kRegex, "[0-9]{2}-x", {}, false, "regex"});
  ASSERT_TRUE(regex.ok());
  EXPECT_TRUE(Matches(*regex, "42-x"));
  EXPECT_FALSE(Matches(*regex, "4-x"));
  auto gbnf = CompileConstraint({ConstraintKind::kGrammar, R"(root ::= "a"+)", {}, false, "g"});
  ASSERT_TRUE(gbnf.ok());
  EXPECT_TRUE(Matches(*gbnf, "aaa"));
  auto choice = CompileConstraint({ConstraintKind::kChoice, "", {"yes", "no"}, false, "choice"});
  ASSERT_TRUE(choice.ok());
  EXPECT_TRUE(Matches(*choice, "no"));
  EXPECT_FALSE(Matches(*choice, "nope"));
  auto none = CompileConstraint({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

TEST(CompileConstraint, ErrorsStartWithTheRequestField) {
  auto bad = CompileConstraint(
      {ConstraintKind::kGrammar, "root ::= nowhere", {}, false, "structured_outputs.grammar"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("structured_outputs.grammar: ", 0), 0u)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("nowhere"), std::string::npos);
  auto schema = CompileConstraint({ConstraintKind::kJsonSchema,
                                   R"({"not": {}})",
                                   {},
                                   false,
                                   "response_format.json_schema.schema"});
  ASSERT_FALSE(schema.ok());
  EXPECT_EQ(schema.status().message().rfind("response_format.json_schema.schema: ", 0), 0u);
  EXPECT_NE(schema.status().message().find("not"), std::string::npos);
}

TEST(GrammarCache, SameConstraintTextGivesTheSameGrammar) {
  GrammarCache cache(2);
  const ConstraintSpec a{ConstraintKind::kRegex, "a+", {}, false, "regex"};
  const ConstraintSpec b{ConstraintKind::kRegex, "b+", {}, false, "guided_regex"};
  auto a1 = cache.Compile(a);
  auto a2 = cache.Compile(a);
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(*a1, *a2);
  EXPECT_NE(*cache.Compile(b), *a1);
  // The kind, the strict flag and the choice boundaries are part of the key.
  auto g = cache.Compile({ConstraintKind::kGrammar, R"(root ::= "a+")", {}, false, "grammar"});
  auto c1 = cache.Compile({ConstraintKind::kChoice, "", {"ab", "c"}, false, "choice"});
  auto c2 = cache.Compile({ConstraintKind::kChoice, "", {"a", "bc"}, false, "choice"});
  ASSERT_TRUE(c1.ok() && c2.ok());
  EXPECT_NE(*c1, *c2);
  EXPECT_TRUE(Matches(*c2, "bc"));
  EXPECT_FALSE(Matches(*c1, "bc"));
  EXPECT_EQ(cache.size(), 2u);  // capacity 2: the least recently used went
  // Errors are not cached, and leave the cache as it was.
  EXPECT_FALSE(cache.Compile({ConstraintKind::kRegex, "(", {}, false, "regex"}).ok());
  EXPECT_EQ(cache.size(), 2u);
}

TEST(GrammarCache, ConcurrentCompilesAgree) {
  GrammarCache cache;
  const ConstraintSpec spec{
      ConstraintKind::kJsonSchema, R"({"type": "array", "maxItems": 3})", {}, true, "json_schema"};
  std::vector<std::shared_ptr<const Grammar>> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = *cache.Compile(spec); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& g : got) {
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(Matches(g, "[1, 2]"));
  }
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace pagoda::grammar
