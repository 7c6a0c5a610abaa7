// Jinja chat templates: a from-scratch renderer for the subset of Jinja that Hugging Face
// chat templates use, rendering exactly as transformers' apply_chat_template does (jinja2's
// ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls, HF's
// tojson, raise_exception and strftime_now; default Undefined semantics).
//
//   auto t = jinja::Template::Parse(template_text);            // once; reusable, thread-safe
//   auto r = t->Render(variables_json, options);                // {text, segments}
//
// `variables` is a JSON object: messages, add_generation_prompt, bos_token, eos_token, tools,
// documents and any extra keyword (enable_thinking, ...); `tools` and `documents` are none when
// absent. The output comes with segments marking which bytes the template itself produced
// (kTemplate) and which came from the variables (kContent), so a tokenizer can recognise
// special tokens in template text only. Strings of RenderOptions::template_variables (by
// default bos_token and eos_token) and of template_keys (by default messages' "role", which
// templates paste into special tokens: '<|' + role + '|>') count as template text; a caller
// must then accept only known roles.
//
// Sandboxed: no I/O, and every render is bounded by RenderLimits (output size, loop iterations,
// evaluation steps, macro call depth, bytes built), each exceeded limit a clear error.
// Errors (Status codes): kInvalidArgument for syntax errors and template runtime errors
// ("line N: ..."), kAborted for raise_exception (its message verbatim), kResourceExhausted for
// a limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda::jinja {

// A naive local date and time (what Python's datetime.now() gives strftime_now).
struct CivilTime {
  int year = 1970, month = 1, day = 1, hour = 0, minute = 0, second = 0;
};
// "2026-07-26T12:00:00", "2026-07-26 12:00" or "2026-07-26". Errors: InvalidArgument.
Result<CivilTime> ParseCivilTime(std::string_view text);

struct RenderLimits {
  int64_t max_output_bytes = 32 << 20;           // the output, and any one string or macro result
  int64_t max_total_bytes = int64_t{512} << 20;  // bytes of all strings built during a render
  int64_t max_loop_iterations = 1'000'000;       // over the whole render; also the longest list
  int64_t max_steps = 10'000'000;     // evaluated expressions and statements, items copied
  int max_call_depth = 64;            // nested macro / caller calls
  int64_t max_milliseconds = 10'000;  // wall-clock backstop for a whole render
};

struct RenderOptions {
  std::optional<CivilTime> now;  // strftime_now's clock; the local time when unset
  RenderLimits limits;
  // Variables whose strings are template text, and dict keys whose string values are.
  std::vector<std::string> template_variables = {"bos_token", "eos_token"};
  std::vector<std::string> template_keys = {"role"};
};

enum class SegmentKind { kTemplate, kContent };
struct Segment {
  SegmentKind kind = SegmentKind::kTemplate;
  size_t offset = 0;
  size_t length = 0;
};

struct Rendered {
  std::string text;
  std::vector<Segment> segments;  // cover text in order; adjacent segments differ in kind
};

struct Program;

class Template {
 public:
  // Errors: InvalidArgument "syntax error, line N: ..." (unclosed blocks, unknown tags, ...).
  static Result<Template> Parse(std::string_view source);
  // Errors: see the top of this file. `variables` must be a JSON object.
  Result<Rendered> Render(const nlohmann::ordered_json& variables,
                          const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace pagoda::jinja
