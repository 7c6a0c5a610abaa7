// Differential testing against Python jinja2: renders a batch of (template, variables) cases
// with jinja_reference.py (transformers' settings) through the Python interpreter found at
// configure time (PAGODA_JINJA_PYTHON), and compares our rendering case by case.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/chat/jinja.h"
#include "tests/run_pagoda.h"
#include "tests/test_data.h"

namespace pagoda::jinja::testing {

struct PyCase {
  std::string template_text;
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
};

// Python's result per case: {"text": ...} or {"error": "Type: message"}.
inline nlohmann::ordered_json RenderWithPython(const std::vector<PyCase>& cases) {
  pagoda::testing::TempDir dir;
  nlohmann::ordered_json in = nlohmann::ordered_json::array();
  for (const PyCase& c : cases)
    in.push_back({{"template", c.template_text}, {"variables", c.variables}});
  {
    std::ofstream f(dir.File("in.json"), std::ios::binary);
    f << in.dump();
  }
  const std::string cmd = std::string(PAGODA_JINJA_PYTHON) + " " +
                          pagoda::testing::Quote(PAGODA_JINJA_REFERENCE_SCRIPT) + " < " +
                          pagoda::testing::Quote(dir.File("in.json")) + " > " +
                          pagoda::testing::Quote(dir.File("out.json"));
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  std::ifstream f(dir.File("out.json"), std::ios::binary);
  const std::string text(std::istreambuf_iterator<char>(f), {});
  auto out = nlohmann::ordered_json::parse(text, nullptr, false);
  EXPECT_FALSE(out.is_discarded()) << "bad output from " << cmd;
  return out;
}

// `s` with control characters escaped, for messages.
inline std::string Visible(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

// Where two renderings first differ, with some context.
inline std::string FirstDifference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 30 ? i - 30 : 0;
  return "differ at byte " + std::to_string(i) + " of " + std::to_string(want.size()) + "/" +
         std::to_string(got.size()) + "\n  python: [" + Visible(want.substr(from, 70)) +
         "]\n  ours:   [" + Visible(got.substr(from, 70)) + "]";
}

inline RenderOptions FixedClock() {
  RenderOptions o;
  o.now = CivilTime{2026, 7, 26, 12, 0, 0};
  return o;
}

// Renders `c` ourselves and compares with Python's `expected`; returns a description of the
// difference, or "" when they agree (both fail counts as agreement; raise_exception must then
// give the same message).
inline std::string CompareWithPython(const PyCase& c, const nlohmann::ordered_json& expected) {
  auto t = Template::Parse(c.template_text);
  Result<Rendered> r = t.ok() ? t->Render(c.variables, FixedClock()) : Result<Rendered>(t.status());
  if (expected.contains("text")) {
    const std::string want = expected["text"];
    if (!r.ok()) return "python rendered " + want + "\n  we failed: " + r.status().ToString();
    if (r->text != want) return FirstDifference(want, r->text);
    return "";
  }
  const std::string err = expected["error"];
  if (r.ok()) return "python failed (" + err + ")\n  we rendered: [" + r->text + "]";
  if (err.rfind("TemplateError: ", 0) == 0 && r.status().code() == StatusCode::kAborted &&
      r.status().message() != err.substr(15)) {
    return "raise_exception message differs: python " + err + ", ours " + r.status().message();
  }
  return "";
}

}  // namespace pagoda::jinja::testing
