// JSON in and out of the renderer: render variables from nlohmann::ordered_json (key order
// kept, as Python dicts keep it), and the `tojson` filter as Hugging Face defines it: Python's
// json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"
#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;          // the indent unit when has_indent (" " * N, or a given string)
  std::string item_separator;  // "" = Python's default (", ", or "," with an indent)
  std::string key_separator;   // "" = ": "
  bool sort_keys = false;
};

// json.dumps. Errors: a value JSON cannot hold (undefined, a namespace, a macro), non-string
// tuple keys, nesting beyond kMaxNesting.
Result<std::string> DumpJson(const Value& v, const JsonDumpOptions& options);

// A JSON document as a value; its strings (dict keys included) are marked content when
// `content`, except what lies under a dict key listed in `template_keys`. Errors: nesting
// beyond kMaxNesting.
Result<Value> ValueFromJson(const nlohmann::ordered_json& j, bool content,
                            const std::vector<std::string>& template_keys = {});

}  // namespace pagoda::jinja
