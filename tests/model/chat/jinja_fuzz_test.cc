// Fuzz-style robustness: mutated real chat templates, random templates and random bytes never
// crash or hang; whatever fails, fails as a Status.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "model/chat/jinja.h"
#include "tests/model/chat/jinja_random_template.h"
#include "tests/test_data.h"

namespace pagoda::jinja {
namespace {

std::vector<std::string> ReferenceTemplates() {
  std::vector<std::string> out;
  for (const auto& e :
       std::filesystem::directory_iterator(pagoda::testing::SharedPath("chat-templates"))) {
    if (e.path().extension() != ".jinja") continue;
    std::ifstream in(e.path(), std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return out;
}

// Variables of a tool conversation from the reference corpus (reaches most template code).
nlohmann::ordered_json FuzzVariables() {
  std::ifstream in(pagoda::testing::SharedPath("chat-templates/cases.json"));
  const auto cases = nlohmann::ordered_json::parse(in);
  for (const auto& c : cases) {
    if (c["id"] == "qwen2.5-instruct/tool_roundtrip_null_content_dict_args") return c["variables"];
  }
  ADD_FAILURE() << "fuzz case not found";
  return nlohmann::ordered_json::object();
}

// Fragments inserted by the mutator: delimiters, keywords, broken UTF-8, expensive statements.
constexpr const char* kTokens[] = {
    // clang-format off
    "{%", "%}", "{{", "}}", "{#", "#}", "-", "+", "(", ")", "[", "]", "{", "}", "|", ".", "'", "\"",
    "\\", " if ", " for x in ", "endfor", "endif", " else ", "endmacro", "{% endfor %}",
    "{% if x %}", "{% raw %}", "{% endraw %}", " is ", " not ", "loop.", "namespace(", "caller()",
    "\n", "\xff", "\xc3", "\xe2\x82", "**", "//", "%", "~", ",", "{% set x = x ~ x %}",
    "{% for x in range(99) %}", "{% macro m(a) %}{{ m(a) }}",
    // clang-format on
};

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  std::string Mutate(std::string s) {
    const int n = Int(1, 4);
    for (int i = 0; i < n; ++i) s = MutateOnce(std::move(s));
    return s;
  }

  std::string RandomBytes() {
    std::string s(Int(0, 200), '\0');
    for (char& c : s) c = static_cast<char>(Int(0, 255));
    return s;
  }

 private:
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::string MutateOnce(std::string s) {
    const size_t pos = s.empty() ? 0 : static_cast<size_t>(Int(0, static_cast<int>(s.size())));
    switch (Int(0, 4)) {
      case 0:  // delete a range
        if (!s.empty()) s.erase(pos, static_cast<size_t>(Int(1, 20)));
        return s;
      case 1:  // insert a token
        s.insert(pos, kTokens[Int(0, static_cast<int>(std::size(kTokens)) - 1)]);
        return s;
      case 2: {  // duplicate a range
        const std::string piece = s.substr(pos, static_cast<size_t>(Int(1, 60)));
        s.insert(static_cast<size_t>(Int(0, static_cast<int>(s.size()))), piece);
        return s;
      }
      case 3:  // flip a byte
        if (!s.empty() && pos < s.size()) s[pos] = static_cast<char>(Int(0, 255));
        return s;
      default:  // truncate
        s.resize(pos);
        return s;
    }
  }

  std::mt19937 rng_;
};

// PAGODA_JINJA_FUZZ_SCALE=N runs N times the iterations (and other seeds), for long runs.
int Scale() {
  const char* env = std::getenv("PAGODA_JINJA_FUZZ_SCALE");
  return env ? std::max(1, std::atoi(env)) : 1;
}

// Seconds one fuzz input may take (sanitizer builds run several times slower).
#ifdef __SANITIZE_ADDRESS__
constexpr double kSlowest = 12.0;
#else
constexpr double kSlowest = 3.0;
#endif

RenderOptions TightLimits() {
  RenderOptions o;
  o.now = CivilTime{2026, 7, 26, 12, 0, 0};
  o.limits.max_steps = 200'000;
  o.limits.max_loop_iterations = 20'000;
  o.limits.max_output_bytes = 1 << 20;
  o.limits.max_total_bytes = 8 << 20;
  o.limits.max_milliseconds = 2'000;
  return o;
}

// Parses and renders; every outcome is fine except a crash, an exception or slowness.
void Exercise(const std::string& source, const nlohmann::ordered_json& vars, double* slowest) {
  const auto start = std::chrono::steady_clock::now();
  auto t = Template::Parse(source);
  if (t.ok()) {
    auto r = t->Render(vars, TightLimits());
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  } else {
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().ToString();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (s > *slowest) *slowest = s;
}

TEST(JinjaFuzz, MutatedReferenceTemplatesNeverCrashOrHang) {
  const auto templates = ReferenceTemplates();
  ASSERT_EQ(templates.size(), 19u);
  const auto vars = FuzzVariables();
  Mutator m(7 * Scale());
  double slowest = 0;
  for (int i = 0; i < 4000 * Scale(); ++i) {
    Exercise(m.Mutate(templates[i % templates.size()]), vars, &slowest);
  }
  EXPECT_LT(slowest, kSlowest);
}

TEST(JinjaFuzz, MutatedRandomTemplatesNeverCrashOrHang) {
  testing::RandomTemplate gen(99 * Scale());
  Mutator m(11 * Scale());
  const auto vars = FuzzVariables();
  double slowest = 0;
  for (int i = 0; i < 3000 * Scale(); ++i) Exercise(m.Mutate(gen.Template()), vars, &slowest);
  EXPECT_LT(slowest, kSlowest);
}

TEST(JinjaFuzz, RandomBytesNeverCrash) {
  Mutator m(13 * Scale());
  double slowest = 0;
  for (int i = 0; i < 3000 * Scale(); ++i) {
    Exercise(m.RandomBytes(), nlohmann::ordered_json::object(), &slowest);
  }
  EXPECT_LT(slowest, kSlowest);
}

}  // namespace
}  // namespace pagoda::jinja
