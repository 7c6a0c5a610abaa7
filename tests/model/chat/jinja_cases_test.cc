// The Hugging Face reference corpus (shared/chat-templates): every case of cases.json renders
// byte-identical to Python jinja2 under transformers' settings, or fails through
// raise_exception with the expected message.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "model/chat/jinja.h"
#include "tests/test_data.h"

namespace pagoda::jinja {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

RenderOptions ReferenceOptions() {
  RenderOptions o;
  o.now = CivilTime{2026, 7, 26, 12, 0, 0};
  return o;
}

TEST(JinjaCases, EveryReferenceCaseMatches) {
  const std::string dir = testing::SharedPath("chat-templates");
  std::ifstream in(dir + "/cases.json");
  ASSERT_TRUE(in.good()) << "cannot open " << dir << "/cases.json";
  const auto cases = nlohmann::ordered_json::parse(in);
  ASSERT_EQ(cases.size(), 201u);
  std::map<std::string, Template> templates;
  int rendered = 0, raised = 0;
  for (const auto& c : cases) {
    const std::string id = c["id"], name = c["template"];
    if (!templates.count(name)) {
      auto t = Template::Parse(ReadFile(dir + "/" + name + ".jinja"));
      ASSERT_TRUE(t.ok()) << name << ": " << t.status().ToString();
      templates.emplace(name, std::move(t).value());
    }
    auto r = templates.at(name).Render(c["variables"], ReferenceOptions());
    if (c.contains("expected_error")) {
      const std::string want = c["expected_error"];
      ASSERT_FALSE(r.ok()) << id << " rendered instead of raising:\n" << r->text;
      EXPECT_EQ(r.status().code(), StatusCode::kAborted) << id;
      EXPECT_NE(r.status().message().find(want), std::string::npos)
          << id << ": " << r.status().message();
      ++raised;
    } else {
      ASSERT_TRUE(r.ok()) << id << ": " << r.status().ToString();
      EXPECT_EQ(r->text, c["expected"].get<std::string>()) << id;
      size_t at = 0;  // the segments tile the text
      for (const Segment& s : r->segments) {
        EXPECT_EQ(s.offset, at) << id;
        at += s.length;
      }
      EXPECT_EQ(at, r->text.size()) << id;
      ++rendered;
    }
  }
  EXPECT_EQ(rendered, 188);
  EXPECT_EQ(raised, 13);
}

}  // namespace
}  // namespace pagoda::jinja
