// Hostile templates: unclosed blocks, deep nesting, huge loops, huge output, runaway
// recursion, self-referencing values. Each fails quickly with a clear Status, never a crash
// or a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "model/chat/jinja.h"

namespace pagoda::jinja {
namespace {

// Seconds a hostile template may take (sanitizer builds run several times slower).
#ifdef __SANITIZE_ADDRESS__
constexpr double kQuickly = 20.0;
#else
constexpr double kQuickly = 5.0;
#endif

struct Outcome {
  Status status;
  double seconds = 0;
};

Outcome RunTemplate(const std::string& source, const RenderOptions& options = {}) {
  const auto start = std::chrono::steady_clock::now();
  Outcome o;
  auto t = Template::Parse(source);
  if (!t.ok()) {
    o.status = t.status();
  } else {
    auto r = t->Render(nlohmann::ordered_json::object(), options);
    o.status = r.ok() ? Status::Ok() : r.status();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// `source` fails with `code` and a message containing `what`, within a few seconds.
void ExpectFails(const std::string& source, StatusCode code, const std::string& what) {
  const Outcome o = RunTemplate(source);
  const std::string shown = source.size() > 120 ? source.substr(0, 120) + "..." : source;
  EXPECT_EQ(o.status.code(), code) << shown << "\n" << o.status.ToString();
  EXPECT_NE(o.status.message().find(what), std::string::npos) << shown << "\n"
                                                              << o.status.ToString();
  EXPECT_LT(o.seconds, kQuickly) << shown;
}

TEST(JinjaLimits, UnclosedBlocksAreSyntaxErrors) {
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  ExpectFails("{% if true %}x", kInvalid,
              "looking for the following tags: 'elif' or 'else' or "
              "'endif'. The innermost block that needs to be closed "
              "is 'if'");
  ExpectFails("{% for x in y %}\n\n", kInvalid, "'endfor'");
  ExpectFails("a\n{{ x", kInvalid, "line 2: unexpected end of template, expected '}}'");
  ExpectFails("{% set x = 1", kInvalid, "expected '%}'");
  ExpectFails("{# comment", kInvalid, "Missing end of comment tag");
  ExpectFails("{% raw %}abc", kInvalid, "Missing end of raw directive");
  ExpectFails("{% macro m() %}", kInvalid, "'endmacro'");
  ExpectFails("{% endif %}", kInvalid, "Encountered unknown tag 'endif'");
  ExpectFails("{% for x in y %}{% endif %}{% endfor %}", kInvalid, "unknown tag 'endif'");
  ExpectFails("{{ (1 }}", kInvalid, "unexpected '}'");
  ExpectFails("{{ 'abc }}", kInvalid, "unterminated string");
  ExpectFails("{% include 'x.jinja' %}", kInvalid, "'include' is not supported");
  ExpectFails("{% break %}", kInvalid, "'break' outside loop");
  ExpectFails("{{ 1 + }}", kInvalid, "unexpected 'end of print statement'");
  ExpectFails("{% frobnicate %}", kInvalid, "Encountered unknown tag 'frobnicate'");
}

TEST(JinjaLimits, DeepNestingIsRefused) {
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  ExpectFails(Repeat("{% if true %}", 100000), kInvalid, "nested more than 100 levels");
  ExpectFails("{{ " + Repeat("(", 100000) + "1" + Repeat(")", 100000) + " }}", kInvalid,
              "nested more than 100 levels");
  ExpectFails("{{ " + Repeat("[", 100000) + Repeat("]", 100000) + " }}", kInvalid,
              "nested more than 100 levels");
  ExpectFails("{{ " + Repeat("-", 100000) + "1 }}", kInvalid, "nested more than 100 levels");
  ExpectFails("{{ " + Repeat("not ", 100000) + "1 }}", kInvalid, "nested more than 100 levels");
  ExpectFails("{{ 1" + Repeat(" + 1", 100000) + " }}", kInvalid, "nested more than 100 levels");
  ExpectFails("{{ x" + Repeat(".a", 100000) + " }}", kInvalid, "nested more than 100 levels");
  ExpectFails("{{ x" + Repeat("|trim", 100000) + " }}", kInvalid, "nested more than 100 levels");
  ExpectFails("{{ " + Repeat("{'a': ", 100000) + "1" + Repeat("}", 100000) + " }}", kInvalid,
              "nested more than 100 levels");
}

TEST(JinjaLimits, HugeLoopsStop) {
  const StatusCode kLimit = StatusCode::kResourceExhausted;
  ExpectFails("{% for i in range(100000000) %}{% endfor %}", kLimit, "items in one list");
  ExpectFails(
      "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
      "{% endfor %}{% endfor %}{% endfor %}",
      kLimit, "loop iterations");
  ExpectFails(
      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}"
      "{% set ns.l = ns.l + ns.l %}{% endfor %}",
      kLimit, "items in one list");
  ExpectFails("{{ [1] * 1000000000 }}", kLimit, "items in one list");
  ExpectFails("{% for c in 'x' * 2000000 %}{% endfor %}", kLimit, "items in one list");
  ExpectFails("{{ ('a,' * 5000000).split(',')|length }}", kLimit, "items in one list");
  ExpectFails("{{ ('a\n' * 5000000).splitlines()|length }}", kLimit, "items in one list");
  // Quadratic copying is charged by the items copied.
  ExpectFails(
      "{% set ns = namespace(l=[]) %}{% for i in range(1000000) %}"
      "{% set ns.l = ns.l + [i] %}{% endfor %}",
      kLimit, "evaluation steps");
  ExpectFails(
      "{% set ns = namespace(d={}) %}{% for i in range(1000000) %}"
      "{% set ns.d = dict(ns.d, **{('k' ~ i): i}) %}{% endfor %}",
      kLimit, "evaluation steps");
  ExpectFails(
      "{% set l = range(1000000)|list %}{% for i in range(1000000) %}"
      "{% if -1 in l %}{% endif %}{% endfor %}",
      kLimit, "evaluation steps");
}

TEST(JinjaLimits, WallClockBackstop) {
  RenderOptions o;
  o.limits.max_milliseconds = 50;
  o.limits.max_steps = int64_t{1} << 50;
  o.limits.max_loop_iterations = int64_t{1} << 50;
  const auto r = RunTemplate(
      "{% for a in range(100000) %}{% for b in range(100000) %}"
      "{% endfor %}{% endfor %}",
      o);
  EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted) << r.status.ToString();
  EXPECT_NE(r.status.message().find("milliseconds"), std::string::npos);
  EXPECT_LT(r.seconds, 2.0);
}

TEST(JinjaLimits, HugeOutputStops) {
  const StatusCode kLimit = StatusCode::kResourceExhausted;
  ExpectFails("{% for i in range(1000000) %}{{ 'x' * 1000 }}{% endfor %}", kLimit, "bytes");
  ExpectFails("{{ 'x' * 10000000000 }}", kLimit, "bytes");
  ExpectFails(
      "{% set ns = namespace(s='x') %}{% for i in range(100) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      kLimit, "bytes");
  ExpectFails(
      "{% set s = 'x' * 30000000 %}{% for i in range(1000) %}{% set t = s ~ i %}"
      "{% endfor %}",
      kLimit, "bytes of strings built");
  ExpectFails("{% set s = 'ab' * 1000000 %}{{ s.replace('a', s) }}", kLimit, "bytes");
  ExpectFails("{{ '%999999999999d' % 1 }}", kLimit, "bytes");
  ExpectFails("{{ '%99999999999999999d' % 1 }}", StatusCode::kInvalidArgument, "width too large");
  ExpectFails("{{ 'x'|center(1000000000000) }}", kLimit, "bytes");
  ExpectFails("{{ 'x'|indent(1000000000000) }}", kLimit, "bytes");
}

TEST(JinjaLimits, RunawayRecursionStops) {
  const StatusCode kLimit = StatusCode::kResourceExhausted;
  ExpectFails("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", kLimit,
              "nested macro calls");
  ExpectFails("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}", kLimit,
              "nested macro calls");
  ExpectFails(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
      "{% endmacro %}{{ f(60) }}",
      kLimit, "evaluation steps");
  ExpectFails(
      "{% macro f() %}{{ caller is defined }}{% call f() %}x{% endcall %}{% endmacro %}"
      "{{ f() }}",
      kLimit, "nested macro calls");
}

TEST(JinjaLimits, SelfReferencingValuesFailCleanly) {
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  ExpectFails("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", kInvalid, "nested");
  ExpectFails("{% set ns = namespace() %}{% set ns.l = [ns] %}{{ ns.l|tojson }}", kInvalid,
              "serializable");
  ExpectFails(
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
      "{% set ns.l = [ns.l] %}{% endfor %}",
      kInvalid, "nested more than 128 levels");
  ExpectFails(
      "{% set ns = namespace(j=1) %}{% for i in range(100000) %}"
      "{% set ns.j = joiner(ns.j) %}{% endfor %}",
      kInvalid, "nested too deeply");
  // A long chain of namespaces is built and released without deep recursion.
  const Outcome chain = RunTemplate(
      "{% set st = namespace(t=namespace()) %}{% set head = st.t %}"
      "{% for i in range(300000) %}{% set t = st.t %}{% set t.next = namespace(i=i) %}"
      "{% set st.t = t.next %}{% endfor %}{{ st.t.i }}");
  EXPECT_TRUE(chain.status.ok()) << chain.status.ToString();
  EXPECT_LT(chain.seconds, kQuickly);
  ExpectFails(
      "{% set st = namespace(t=namespace()) %}{% set head = st.t %}"
      "{% for i in range(1000) %}{% set t = st.t %}{% set t.next = namespace() %}"
      "{% set st.t = t.next %}{% endfor %}{{ head }}",
      kInvalid, "nested");
}

TEST(JinjaLimits, LimitsAreConfigurable) {
  RenderOptions o;
  o.limits.max_loop_iterations = 10;
  EXPECT_EQ(RunTemplate("{% for i in range(11) %}{% endfor %}", o).status.code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(RunTemplate("{% for i in range(10) %}{% endfor %}", o).status.ok());
  o = {};
  o.limits.max_output_bytes = 5;
  EXPECT_EQ(RunTemplate("abcdef", o).status.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(RunTemplate("abcde", o).status.ok());
  o = {};
  o.limits.max_call_depth = 3;
  const std::string rec = "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{% endif %}{% endmacro %}";
  EXPECT_TRUE(RunTemplate(rec + "{{ f(2) }}", o).status.ok());
  EXPECT_EQ(RunTemplate(rec + "{{ f(3) }}", o).status.code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace pagoda::jinja
