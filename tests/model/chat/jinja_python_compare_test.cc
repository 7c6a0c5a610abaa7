// Differential tests against Python jinja2 with transformers' settings: a corpus of snippets
// covering every construct (jinja_snippets.txt), and randomly generated templates, each
// rendered by both.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/model/chat/jinja_python_test.h"
#include "tests/model/chat/jinja_random_template.h"

namespace pagoda::jinja {
namespace {

using testing::PyCase;

nlohmann::ordered_json SnippetVariables() {
  return nlohmann::ordered_json::parse(R"({
    "s": "Hello World", "n": 3, "f": 2.5, "b": true, "z": null, "t": "", "e": [],
    "l": [1, 2, 3], "d": {"a": 1, "b": [1, 2], "items": "x"},
    "u": "héllo wörld ß", "emoji": "a👍🏽🇫🇷𝐀",
    "msgs": [{"role": "system", "content": "  Be brief.\n"},
             {"role": "user", "content": "Hi {{ x }} there", "name": "bob"},
             {"role": "assistant", "content": "Hello!"},
             {"role": "user", "content": "Bye now"}]
  })");
}

std::vector<PyCase> LoadSnippets() {
  std::ifstream in(std::string(PAGODA_JINJA_SNIPPETS), std::ios::binary);
  EXPECT_TRUE(in.good()) << PAGODA_JINJA_SNIPPETS;
  const std::string text(std::istreambuf_iterator<char>(in), {});
  std::vector<PyCase> cases;
  const std::string sep = "\n----\n";
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find(sep, start);
    if (end == std::string::npos) end = text.size();
    cases.push_back({text.substr(start, end - start), SnippetVariables()});
    start = end + sep.size();
  }
  return cases;
}

TEST(JinjaPython, SnippetsMatchJinja2) {
  const std::vector<PyCase> cases = LoadSnippets();
  ASSERT_GT(cases.size(), 100u);
  const auto expected = testing::RenderWithPython(cases);
  ASSERT_EQ(expected.size(), cases.size());
  int differences = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string diff = testing::CompareWithPython(cases[i], expected[i]);
    if (!diff.empty()) {
      ++differences;
      ADD_FAILURE() << "snippet " << i << ":\n" << cases[i].template_text << "\n  " << diff;
    }
  }
  EXPECT_EQ(differences, 0);
}

// Random templates (seeded; PAGODA_JINJA_SEED picks another seed) agree with jinja2: the same
// text, or both fail.
TEST(JinjaPython, RandomTemplatesMatchJinja2) {
  const char* env = std::getenv("PAGODA_JINJA_SEED");
  const uint32_t seed = env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : 20260726;
  testing::RandomTemplate gen(seed);
  std::vector<PyCase> cases;
  for (int i = 0; i < 1500; ++i) cases.push_back({gen.Template(), SnippetVariables()});
  const auto expected = testing::RenderWithPython(cases);
  ASSERT_EQ(expected.size(), cases.size());
  int differences = 0, rendered = 0;
  for (size_t i = 0; i < cases.size() && differences < 20; ++i) {
    const std::string diff = testing::CompareWithPython(cases[i], expected[i]);
    rendered += expected[i].contains("text");
    if (!diff.empty()) {
      ++differences;
      ADD_FAILURE() << "seed " << seed << " template " << i << ":\n"
                    << cases[i].template_text << "\n  " << diff;
      if (const char* dump = std::getenv("PAGODA_JINJA_DUMP")) {
        std::ofstream(std::string(dump) + "/t" + std::to_string(i) + ".jinja")
            << cases[i].template_text;
      }
    }
  }
  EXPECT_EQ(differences, 0);
  EXPECT_GT(rendered, 300) << "too few random templates render at all";
}

}  // namespace
}  // namespace pagoda::jinja
