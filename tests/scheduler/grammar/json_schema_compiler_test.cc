// JsonSchemaToGbnf, JsonObjectGbnf and ChoiceGbnf, checked through the real GBNF parser and
// matcher: instances a schema allows must be accepted whole, others rejected. The shared
// schema table (schemas.json, also read by the end-to-end tests) holds 30+ schemas with valid
// and invalid instances, all checked against python3-jsonschema when it was written.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "scheduler/grammar/constraint_compilers.h"
#include "scheduler/grammar/grammar.h"

namespace pagoda::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> Compile(const std::string& schema, bool strict = false) {
  Result<std::string> gbnf = JsonSchemaToGbnf(schema, JsonSchemaOptions{.strict = strict});
  EXPECT_TRUE(gbnf.ok()) << schema << "\n" << gbnf.status().ToString();
  if (!gbnf.ok()) return nullptr;
  Result<std::shared_ptr<const Grammar>> grammar = ParseGbnf(*gbnf);
  EXPECT_TRUE(grammar.ok()) << *gbnf << "\n" << grammar.status().ToString();
  return grammar.ok() ? *grammar : nullptr;
}

bool Matches(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  GrammarMatcher m(grammar);
  return m.Accept(text) && m.IsAccepting();
}

// The error of compiling `schema`, which must fail with INVALID_ARGUMENT.
std::string ErrorOf(const std::string& schema, const CompileLimits& limits = {}) {
  Result<std::string> gbnf = JsonSchemaToGbnf(schema, {}, limits);
  EXPECT_FALSE(gbnf.ok()) << schema << " compiled to\n" << (gbnf.ok() ? *gbnf : "");
  if (gbnf.ok()) return "";
  EXPECT_EQ(gbnf.status().code(), StatusCode::kInvalidArgument) << gbnf.status().ToString();
  return gbnf.status().message();
}

Json LoadSchemas() {
  const auto path = std::filesystem::path(__FILE__).parent_path() / "schemas.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return Json::parse(in);
}

TEST(JsonSchemaCompiler, SharedSchemaTableAcceptsValidAndRejectsInvalid) {
  const Json table = LoadSchemas();
  ASSERT_GE(table.size(), 30u);
  for (const Json& entry : table) {
    SCOPED_TRACE(entry["name"].get<std::string>());
    ASSERT_FALSE(entry["valid"].empty());
    ASSERT_FALSE(entry["invalid"].empty());
    const auto grammar = Compile(entry["schema"].dump());
    ASSERT_NE(grammar, nullptr);
    for (const Json& v : entry["valid"]) {
      EXPECT_TRUE(Matches(grammar, v.dump())) << v.dump();
      EXPECT_TRUE(Matches(grammar, v.dump(2))) << v.dump(2);
    }
    for (const Json& v : entry["invalid"]) EXPECT_FALSE(Matches(grammar, v.dump())) << v.dump();
  }
}

TEST(JsonSchemaCompiler, EveryPrefixOfAValidInstanceIsViable) {
  const Json table = LoadSchemas();
  for (const Json& entry : table) {
    const auto grammar = Compile(entry["schema"].dump());
    ASSERT_NE(grammar, nullptr);
    const std::string text = entry["valid"].back().dump();
    GrammarMatcher m(grammar);
    for (size_t i = 0; i < text.size(); ++i) {
      ASSERT_TRUE(m.Accept(text.substr(i, 1))) << entry["name"] << " at byte " << i << ": " << text;
    }
    EXPECT_TRUE(m.IsAccepting()) << entry["name"];
  }
}

TEST(JsonSchemaCompiler, WhitespaceIsBoundedPerGap) {
  const auto grammar = Compile(R"({"type":"object","properties":{"a":{"type":"integer"}},
                                  "required":["a"],"additionalProperties":false})");
  EXPECT_TRUE(Matches(grammar, R"({ "a" : 1 })"));
  EXPECT_TRUE(Matches(grammar, "{\n" + std::string(20, ' ') + "\"a\": 1\n}"));
  EXPECT_FALSE(Matches(grammar, "{\n" + std::string(21, ' ') + "\"a\": 1}"));
  EXPECT_FALSE(Matches(grammar, R"({  "a": 1})"));
  EXPECT_FALSE(Matches(grammar, "{\n\n\"a\": 1}"));
}

TEST(JsonSchemaCompiler, StrictModeForbidsUnlistedProperties) {
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"boolean"}}})";
  const auto loose = Compile(schema);
  const auto strict = Compile(schema, /*strict=*/true);
  EXPECT_TRUE(Matches(loose, R"({"a":true,"b":[1,{"c":null}]})"));
  EXPECT_TRUE(Matches(loose, R"({"zz":1})"));
  EXPECT_FALSE(Matches(strict, R"({"a":true,"b":1})"));
  EXPECT_TRUE(Matches(strict, R"({"a":true})"));
  EXPECT_TRUE(Matches(strict, R"({})"));
  // An explicit `true` still allows them in strict mode.
  const auto open = Compile(R"({"properties":{"a":{}},"additionalProperties":true})", true);
  EXPECT_TRUE(Matches(open, R"({"b":1})"));
}

TEST(JsonSchemaCompiler, AdditionalKeysNeverRepeatAListedKey) {
  const auto grammar = Compile(R"({"type":"object","properties":{"id":{"type":"integer"},
                                  "idx":{"type":"integer"}},"required":["id"]})");
  EXPECT_TRUE(Matches(grammar, R"({"id":1,"i":2,"idxx":3,"xid":4})"));
  EXPECT_FALSE(Matches(grammar, R"({"id":1,"id":2})"));
  EXPECT_FALSE(Matches(grammar, R"({"id":1,"idx":2,"idx":3})"));
  EXPECT_FALSE(Matches(grammar, R"({"id":1,"\u0069d":2})"));  // no escapes in extra keys
}

TEST(JsonSchemaCompiler, PropertiesKeepSchemaOrderAndOptionalsMayGo) {
  const auto grammar = Compile(R"({"type":"object","additionalProperties":false,
      "properties":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"},
                    "d":{"type":"null"},"e":{"type":"null"}},"required":["b","d"]})");
  EXPECT_TRUE(Matches(grammar, R"({"b":null,"d":null})"));
  EXPECT_TRUE(Matches(grammar, R"({"a":null,"b":null,"c":null,"d":null,"e":null})"));
  EXPECT_TRUE(Matches(grammar, R"({"b":null,"c":null,"d":null,"e":null})"));
  EXPECT_FALSE(Matches(grammar, R"({"d":null,"b":null})"));
  EXPECT_FALSE(Matches(grammar, R"({"b":null,"d":null,})"));
  EXPECT_FALSE(Matches(grammar, R"({,"b":null,"d":null})"));
}

TEST(JsonSchemaCompiler, ManyOptionalPropertiesStayLinearInSize) {
  Json schema = {{"type", "object"}, {"additionalProperties", false}};
  for (int i = 0; i < 300; ++i) schema["properties"]["p" + std::to_string(i)] = {{"type", "null"}};
  Result<std::string> gbnf = JsonSchemaToGbnf(schema.dump(), {});
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  EXPECT_LT(gbnf->size(), 80'000u);
  const auto grammar = Compile(schema.dump());
  EXPECT_TRUE(Matches(grammar, R"({"p3":null,"p150":null,"p299":null})"));
  EXPECT_FALSE(Matches(grammar, R"({"p150":null,"p3":null})"));
}

TEST(JsonSchemaCompiler, IntegerRangesMatchExactly) {
  std::mt19937 rng(7);
  const std::vector<std::pair<int64_t, int64_t>> fixed = {
      {0, 0},     {-1, 1},   {7, 7},        {0, 9},     {10, 99},
      {-99, -10}, {13, 205}, {-1000, 1000}, {99, 1001}, {1, 100000}};
  std::vector<std::pair<int64_t, int64_t>> ranges = fixed;
  std::uniform_int_distribution<int64_t> pick(-3000, 3000);
  for (int i = 0; i < 12; ++i) {
    int64_t a = pick(rng), b = pick(rng);
    ranges.emplace_back(std::min(a, b), std::max(a, b));
  }
  for (const auto& [lo, hi] : ranges) {
    const auto grammar = Compile(R"({"type":"integer","minimum":)" + std::to_string(lo) +
                                 R"(,"maximum":)" + std::to_string(hi) + "}");
    ASSERT_NE(grammar, nullptr);
    for (int64_t v = lo - 120; v <= hi + 120; v += (hi - lo > 5000 ? 37 : 1)) {
      EXPECT_EQ(Matches(grammar, std::to_string(v)), v >= lo && v <= hi)
          << lo << ".." << hi << ": " << v;
    }
    EXPECT_FALSE(Matches(grammar, "0" + std::to_string(std::max<int64_t>(lo, 1))));
    EXPECT_FALSE(Matches(grammar, "-0"));
  }
}

TEST(JsonSchemaCompiler, OneSidedAndExclusiveIntegerBounds) {
  const auto positive = Compile(R"({"type":"integer","exclusiveMinimum":0})");
  EXPECT_TRUE(Matches(positive, "1"));
  EXPECT_TRUE(Matches(positive, "123456789012345"));
  EXPECT_FALSE(Matches(positive, "0"));
  EXPECT_FALSE(Matches(positive, "-5"));
  const auto draft4 = Compile(R"({"type":"integer","maximum":10,"exclusiveMaximum":true})");
  EXPECT_TRUE(Matches(draft4, "9"));
  EXPECT_TRUE(Matches(draft4, "-123"));
  EXPECT_FALSE(Matches(draft4, "10"));
  const auto fractional = Compile(R"({"type":"integer","minimum":1.5,"maximum":3.5})");
  EXPECT_TRUE(Matches(fractional, "2"));
  EXPECT_TRUE(Matches(fractional, "3"));
  EXPECT_FALSE(Matches(fractional, "1"));
  EXPECT_FALSE(Matches(fractional, "4"));
}

TEST(JsonSchemaCompiler, NumberRangesCompareAsNumbers) {
  std::mt19937 rng(11);
  const std::vector<std::string> bounds_list = {
      R"("minimum":-3,"maximum":7)", R"("exclusiveMinimum":-3,"exclusiveMaximum":7)",
      R"("minimum":0)", R"("exclusiveMaximum":0)", R"("minimum":-20,"exclusiveMaximum":-10)"};
  const std::vector<std::tuple<double, bool, double, bool>> bounds = {{-3, false, 7, false},
                                                                      {-3, true, 7, true},
                                                                      {0, false, 1e12, false},
                                                                      {-1e12, false, 0, true},
                                                                      {-20, false, -10, true}};
  std::uniform_int_distribution<int> whole(-25, 25), frac(0, 999), kind(0, 2);
  for (size_t b = 0; b < bounds.size(); ++b) {
    const auto grammar = Compile(R"({"type":"number",)" + bounds_list[b] + "}");
    const auto [lo, lo_ex, hi, hi_ex] = bounds[b];
    for (int i = 0; i < 400; ++i) {
      const int w = whole(rng);
      std::string text = std::to_string(w);
      if (kind(rng) > 0) text += "." + std::to_string(frac(rng));
      if (w == 0 && kind(rng) == 0) text = "-" + text;
      const double v = std::stod(text);
      const bool in = (lo_ex ? v > lo : v >= lo) && (hi_ex ? v < hi : v <= hi);
      const bool canonical = text.rfind("-0", 0) != 0 || v != 0;  // "-0" forms are not produced
      if (!canonical) continue;
      EXPECT_EQ(Matches(grammar, text), in) << bounds_list[b] << ": " << text;
    }
  }
}

TEST(JsonSchemaCompiler, StringEscapesAndSurrogates) {
  const auto grammar = Compile(R"({"type":"string","maxLength":3})");
  EXPECT_TRUE(Matches(grammar, R"("a\"\\")"));
  EXPECT_TRUE(Matches(grammar, R"("\u00e9\n\t")"));
  EXPECT_TRUE(Matches(grammar, "\"\xc3\xa9\xe4\xb8\xad\""));  // two code points
  EXPECT_FALSE(Matches(grammar, R"("abcd")"));
  EXPECT_FALSE(Matches(grammar, R"("\ud800")"));  // a lone surrogate escape
  EXPECT_FALSE(Matches(grammar, "\"a\nb\""));     // raw control character
  EXPECT_FALSE(Matches(grammar, R"("\x41")"));
}

TEST(JsonSchemaCompiler, RefsRecurseAndResolvePointers) {
  const auto list = Compile(R"({"$defs":{"list":{"anyOf":[{"type":"null"},
      {"type":"object","properties":{"head":{"type":"integer"},"tail":{"$ref":"#/$defs/list"}},
       "required":["head","tail"],"additionalProperties":false}]}},"$ref":"#/$defs/list"})");
  EXPECT_TRUE(Matches(list, "null"));
  EXPECT_TRUE(Matches(list, R"({"head":1,"tail":{"head":2,"tail":null}})"));
  EXPECT_FALSE(Matches(list, R"({"head":1,"tail":{"head":2}})"));
  const auto to_root = Compile(R"({"type":"array","maxItems":2,"items":{"$ref":"#"}})");
  EXPECT_TRUE(Matches(to_root, "[[],[[],[]]]"));
  EXPECT_FALSE(Matches(to_root, "[[],[],[]]"));
  const auto escaped = Compile(R"({"$defs":{"a/b":{"type":"boolean"},"c~d":{"type":"null"}},
      "type":"array","prefixItems":[{"$ref":"#/$defs/a~1b"},{"$ref":"#/$defs/c~0d"}],
      "items":false})");
  EXPECT_TRUE(Matches(escaped, "[true,null]"));
  EXPECT_FALSE(Matches(escaped, "[null,true]"));
}

TEST(JsonSchemaCompiler, AllOfConjoinsAndAnyOfDropsImpossibleBranches) {
  const auto both = Compile(R"({"allOf":[{"type":"string","minLength":2},{"maxLength":3}]})");
  EXPECT_TRUE(Matches(both, R"("abc")"));
  EXPECT_FALSE(Matches(both, R"("a")"));
  EXPECT_FALSE(Matches(both, R"("abcd")"));
  const auto numbers = Compile(R"({"allOf":[{"type":["integer","string"]},{"type":"number"}]})");
  EXPECT_TRUE(Matches(numbers, "12"));
  EXPECT_FALSE(Matches(numbers, "1.5"));
  EXPECT_FALSE(Matches(numbers, R"("x")"));
  // additionalProperties false in one branch forbids an optional key of the other.
  const auto closed = Compile(R"({"allOf":[{"properties":{"a":{"type":"null"}},
      "additionalProperties":false},{"properties":{"b":{"type":"null"}}}]})");
  EXPECT_TRUE(Matches(closed, R"({"a":null})"));
  EXPECT_FALSE(Matches(closed, R"({"a":null,"b":null})"));
  const auto some = Compile(R"({"type":"integer","anyOf":[{"type":"string"},{"minimum":5}]})");
  EXPECT_TRUE(Matches(some, "7"));
  EXPECT_FALSE(Matches(some, "4"));
  EXPECT_FALSE(Matches(some, R"("x")"));
}

TEST(JsonSchemaCompiler, EmptySchemaAndTrueAllowAnyValue) {
  for (const std::string schema : {"{}", "true", R"({"description":"anything","title":"t"})"}) {
    const auto grammar = Compile(schema);
    for (const std::string v : {"1", "-2.5e3", "\"s\"", "null", "true", "[1,[2]]", "{\"a\":{}}"}) {
      EXPECT_TRUE(Matches(grammar, v)) << schema << " " << v;
    }
    EXPECT_FALSE(Matches(grammar, "[1,]")) << schema;
  }
}

TEST(JsonSchemaCompiler, ArrayBoundsAndTuples) {
  const auto grammar = Compile(R"({"type":"array","items":{"type":"integer"},"minItems":2,
                                  "maxItems":3})");
  EXPECT_FALSE(Matches(grammar, "[1]"));
  EXPECT_TRUE(Matches(grammar, "[1, 2]"));
  EXPECT_TRUE(Matches(grammar, "[1,2,3]"));
  EXPECT_FALSE(Matches(grammar, "[1,2,3,4]"));
  const auto draft4 = Compile(R"({"type":"array","items":[{"type":"string"},{"type":"null"}],
                                 "additionalItems":{"type":"boolean"}})");
  EXPECT_TRUE(Matches(draft4, R"(["a",null,true,false])"));
  EXPECT_TRUE(Matches(draft4, R"(["a"])"));
  EXPECT_FALSE(Matches(draft4, R"(["a",null,1])"));
  const auto exact = Compile(R"({"type":"array","prefixItems":[{"type":"null"}],"minItems":3,
                                "maxItems":3,"items":{"type":"boolean"}})");
  EXPECT_TRUE(Matches(exact, "[null,true,false]"));
  EXPECT_FALSE(Matches(exact, "[null,true]"));
}

TEST(JsonSchemaCompiler, PatternsAreAnchoredAndJsonEscaped) {
  const auto quote = Compile(R"({"type":"string","pattern":"^a\"b\\\\c$"})");
  EXPECT_TRUE(Matches(quote, R"("a\"b\\c")"));
  EXPECT_FALSE(Matches(quote, R"("a"b\c")"));
  const auto dot = Compile(R"({"type":"string","pattern":"^x.y$"})");
  EXPECT_TRUE(Matches(dot, R"("x\"y")"));
  EXPECT_TRUE(Matches(dot, R"("x\ty")"));
  EXPECT_TRUE(Matches(dot, R"("x\u0001y")"));
  EXPECT_FALSE(Matches(dot, R"("x\ny")"));  // `.` is not a newline
  const auto unanchored = Compile(R"({"type":"string","pattern":"ab"})");
  EXPECT_TRUE(Matches(unanchored, R"("ab")"));
  EXPECT_FALSE(Matches(unanchored, R"("xab")"));  // full match: a subset of the search
}

TEST(JsonSchemaCompiler, FormatsRejectWhatTheirCheckersReject) {
  const auto date = Compile(R"({"type":"string","format":"date"})");
  EXPECT_FALSE(Matches(date, R"("2023-02-29")"));
  EXPECT_FALSE(Matches(date, R"("2023-04-31")"));
  EXPECT_TRUE(Matches(date, R"("2023-05-31")"));
  const auto host = Compile(R"({"type":"string","format":"hostname"})");
  EXPECT_TRUE(Matches(host, R"("api.example.com")"));
  EXPECT_FALSE(Matches(host, R"("-bad.example")"));
  const auto uri = Compile(R"({"type":"string","format":"uri"})");
  EXPECT_TRUE(Matches(uri, R"("https://example.com/a?b=c#d")"));
  EXPECT_FALSE(Matches(uri, R"("no scheme")"));
  // A maxLength below a format's longest match picks a simpler form that fits.
  const auto short_email = Compile(R"({"type":"string","format":"email","maxLength":20})");
  EXPECT_TRUE(Matches(short_email, R"("ab@cd.io")"));
  EXPECT_FALSE(Matches(short_email, R"("abcdefghij@klmnopqrs.io")"));
  const auto short_uri = Compile(R"({"type":"string","format":"uri","maxLength":12})");
  EXPECT_TRUE(Matches(short_uri, R"("http://a.b/c")"));
  EXPECT_FALSE(Matches(short_uri, R"("http://a.b/cd")"));
  const auto unknown = Compile(R"({"type":"string","format":"x-custom","maxLength":2})");
  EXPECT_TRUE(Matches(unknown, R"("ab")"));  // an unknown format is an annotation
}

TEST(JsonSchemaCompiler, UnsupportedKeywordsNameKeywordAndPointer) {
  EXPECT_EQ(ErrorOf(R"({"properties":{"a":{"not":{"type":"null"}}}})"),
            "unsupported keyword 'not' at /properties/a");
  EXPECT_EQ(ErrorOf(R"({"if":{},"then":{}})"), "unsupported keyword 'if' at /");
  EXPECT_EQ(ErrorOf(R"({"type":"array","uniqueItems":true})"),
            "unsupported keyword 'uniqueItems' at /");
  EXPECT_EQ(ErrorOf(R"({"anyOf":[{"type":"integer","multipleOf":3}]})"),
            "unsupported keyword 'multipleOf' at /anyOf/0");
  EXPECT_EQ(ErrorOf(R"({"patternProperties":{"^x":{}}})"),
            "unsupported keyword 'patternProperties' at /");
  EXPECT_EQ(ErrorOf(R"({"$defs":{"d":{"minProperties":1}},"$ref":"#/$defs/d"})"),
            "unsupported keyword 'minProperties' at /$defs/d");
  for (const std::string kw : {"contains", "propertyNames", "dependentRequired"}) {
    EXPECT_NE(ErrorOf("{\"" + kw + "\":{\"x\":[\"y\"]}}").find("'" + kw + "'"), std::string::npos);
  }
  // Keywords whose value constrains nothing, and annotations, are fine.
  EXPECT_NE(Compile(R"({"uniqueItems":false,"minProperties":0,"$comment":"c","examples":[1],
                       "x-vendor":{"not":1},"$schema":"https://json-schema.org/draft/2020-12/schema"})"),
            nullptr);
}

TEST(JsonSchemaCompiler, RefErrors) {
  EXPECT_NE(ErrorOf(R"({"$ref":"other.json#/a"})").find("only local references"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"$ref":"#/$defs/missing"})").find("nothing at that pointer"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})").find("left recursion"),
      std::string::npos);
  EXPECT_NE(ErrorOf(R"({"$defs":{"a":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/b"}]},
                                  "b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})")
                .find("left recursion"),
            std::string::npos);
  // A chain of $refs longer than max_depth.
  Json chain = {{"$defs", Json::object()}, {"$ref", "#/$defs/d0"}};
  for (int i = 0; i < 80; ++i) {
    chain["$defs"]["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
  }
  chain["$defs"]["d80"] = {{"type", "null"}};
  EXPECT_NE(ErrorOf(chain.dump()).find("max_depth"), std::string::npos);
}

TEST(JsonSchemaCompiler, ImpossibleSchemasAndBadValues) {
  EXPECT_NE(ErrorOf(R"({"type":"string","minLength":5,"maxLength":2})").find("allows no value"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"object","properties":{"a":false},"required":["a"]})")
                .find("required property 'a'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"allOf":[{"type":"string"},{"type":"null"}]})").find("'type'"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"type":"number","minimum":0.5})"),
            "'minimum' at /: only integer bounds are supported for type number");
  EXPECT_NE(ErrorOf(R"({"type":"strin"})").find("unknown type \"strin\""), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"string","minLength":-1})").find("'minLength' at /"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"string","pattern":"^(?=a)b$"})")
                .find("'pattern' at /: regex: lookahead '(?=' is not supported at offset 1"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"string","pattern":"^(ab|cde)$","maxLength":2})")
                .find("cannot be combined with minLength / maxLength"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"string","format":"date","pattern":"^2"})").find("one pattern"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type": "object",)").find("not valid JSON"), std::string::npos);
  EXPECT_NE(ErrorOf("[1,2]").find("must be an object or a boolean"), std::string::npos);
  EXPECT_NE(ErrorOf("false").find("allows no value"), std::string::npos);
}

TEST(JsonSchemaCompiler, LimitsGiveClearErrors) {
  EXPECT_NE(ErrorOf(R"({"type":"string","minLength":1000000000})").find("max_repetition"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"array","maxItems":20000})").find("max_repetition"),
            std::string::npos);
  Json big_enum = Json::array();
  for (int i = 0; i < 5000; ++i) big_enum.push_back(i);
  EXPECT_NE(ErrorOf(Json{{"enum", big_enum}}.dump()).find("max_alternatives"), std::string::npos);
  std::string deep = R"({"type":"integer"})";
  for (int i = 0; i < 70; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_NE(ErrorOf(deep).find("max_depth"), std::string::npos);
  std::string very_deep(100000, '[');
  EXPECT_NE(ErrorOf(very_deep).find("max_depth"), std::string::npos);
  CompileLimits tiny;
  tiny.max_output_bytes = 2000;
  Json wide = {{"type", "object"}};
  for (int i = 0; i < 100; ++i) wide["properties"]["key" + std::to_string(i)] = {{"type", "null"}};
  EXPECT_NE(ErrorOf(wide.dump(), tiny).find("max_output_bytes"), std::string::npos);
  CompileLimits few;
  few.max_total_repetition = 1000;
  EXPECT_NE(ErrorOf(R"({"type":"array","prefixItems":[{"maxLength":600},{"maxLength":600}],
                       "items":false})",
                    few)
                .find("max_total_repetition"),
            std::string::npos);
}

TEST(JsonSchemaCompiler, LargeSchemasCompileInLinearTime) {
  Json schema = {{"type", "array"}, {"prefixItems", Json::array()}, {"items", false}};
  for (int o = 0; o < 5; ++o) {
    Json object = {{"type", "object"}, {"properties", Json::object()}, {"required", Json::array()}};
    for (int i = 0; i < 4000; ++i) {
      const std::string key = "p" + std::to_string(o) + "_" + std::to_string(i);
      object["properties"].push_back({key, {{"type", "integer"}}});
      if (i % 3 == 0) object["required"].push_back(key);
    }
    schema["prefixItems"].push_back(std::move(object));
  }
  CompileLimits big;
  big.max_output_bytes = 1 << 24;
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> gbnf = JsonSchemaToGbnf(schema.dump(), {}, big);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  EXPECT_LT(seconds, 20.0);  // quadratic work would take minutes
  // Objects with more members than max_alternatives are refused before parsing them whole.
  std::string wide = R"({"properties":{)";
  for (int i = 0; i < 5000; ++i) wide += (i == 0 ? "\"" : ",\"") + std::to_string(i) + "\":{}";
  EXPECT_EQ(ErrorOf(wide + "}}"),
            "an object of the schema has more than 4096 members "
            "(max_alternatives)");
}

TEST(JsonSchemaCompiler, ExponentialSchemasAreRefusedQuickly) {
  // Each definition combines the next one twice: 2^40 paths if expanded naively.
  Json schema = {{"$defs", Json::object()}};
  for (int i = 0; i < 40; ++i) {
    const std::string next = "#/$defs/d" + std::to_string(i + 1);
    schema["$defs"]["d" + std::to_string(i)] = {
        {"anyOf", {{{"$ref", next}, {"maxLength", i + 1}}, {{"$ref", next}, {"minLength", i}}}}};
  }
  schema["$defs"]["d40"] = {{"type", "string"}};
  schema["$ref"] = "#/$defs/d0";
  Result<std::string> gbnf = JsonSchemaToGbnf(schema.dump(), {});
  if (gbnf.ok()) {
    EXPECT_LT(gbnf->size(), size_t{1} << 20);
  } else {
    EXPECT_EQ(gbnf.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(JsonSchemaCompiler, OutputIsDeterministic) {
  const std::string schema = LoadSchemas()[0]["schema"].dump();
  EXPECT_EQ(*JsonSchemaToGbnf(schema, {}), *JsonSchemaToGbnf(schema, {}));
}

TEST(JsonObjectGbnf, AcceptsObjectsOnly) {
  Result<std::shared_ptr<const Grammar>> grammar = ParseGbnf(JsonObjectGbnf());
  ASSERT_TRUE(grammar.ok()) << grammar.status().ToString();
  EXPECT_TRUE(Matches(*grammar, R"({"a": [1, 2.5, -3e2, "x", null, true, {"b": {}}]})"));
  EXPECT_TRUE(Matches(*grammar, "{}"));
  EXPECT_FALSE(Matches(*grammar, "[1]"));
  EXPECT_FALSE(Matches(*grammar, R"({"a":01})"));
  EXPECT_FALSE(Matches(*grammar, R"({"a":1,})"));
}

TEST(ChoiceGbnf, ExactlyOneOfTheChoices) {
  const std::vector<std::string> choices = {"yes", "no", "a \"quoted\" \\ one", "", "ünï\n", "yes"};
  Result<std::string> gbnf = ChoiceGbnf(choices);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  Result<std::shared_ptr<const Grammar>> grammar = ParseGbnf(*gbnf);
  ASSERT_TRUE(grammar.ok()) << *gbnf << grammar.status().ToString();
  for (const std::string& c : choices) EXPECT_TRUE(Matches(*grammar, c)) << c;
  for (const std::string c : {"ye", "yess", "No", " no", "a \"quoted\" one", "uni\n"}) {
    EXPECT_FALSE(Matches(*grammar, c)) << c;
  }
}

TEST(ChoiceGbnf, Errors) {
  EXPECT_NE(ChoiceGbnf({}).status().message().find("at least one"), std::string::npos);
  const std::vector<std::string> bad = {"ok", "\xff"};
  EXPECT_NE(ChoiceGbnf(bad).status().message().find("choice 2: invalid UTF-8"), std::string::npos);
  std::vector<std::string> many(5000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = std::to_string(i);
  EXPECT_NE(ChoiceGbnf(many).status().message().find("max_alternatives"), std::string::npos);
  CompileLimits small;
  small.max_output_bytes = 100;
  const std::vector<std::string> long_one = {std::string(200, 'x')};
  EXPECT_NE(ChoiceGbnf(long_one, small).status().message().find("max_output_bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace pagoda::grammar
