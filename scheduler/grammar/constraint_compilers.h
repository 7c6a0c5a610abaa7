// Structured output, part 0: every constraint kind compiled to GBNF text (then ParseGbnf).
//
//   JsonSchemaToGbnf   a JSON schema (types, properties / required, additionalProperties,
//                      enum / const, arrays with items / prefixItems / minItems / maxItems,
//                      nested objects, $ref / $defs / definitions, anyOf / oneOf / allOf,
//                      string pattern / minLength / maxLength / format (date, time, date-time,
//                      uuid, email, ipv4, hostname, uri), integer and number ranges (integer
//                      bounds). A keyword it cannot honour is INVALID_ARGUMENT naming the
//                      keyword and its JSON pointer ("unsupported keyword 'not' at /properties/a").
//   JsonObjectGbnf     any JSON object (OpenAI's json_object mode).
//   RegexToGbnf        a regex (Python / JS flavour used by vLLM's guided_regex: literals,
//                      ., classes incl. \d \w \s and negation, groups (?:...) (?<n>...),
//                      alternation, * + ? {m} {m,} {m,n} (lazy ? ignored), escapes; ^ and $ only
//                      at the ends). Full match. Other constructs are errors naming the offset.
//   ChoiceGbnf         exactly one of the strings (valid UTF-8; "" allowed).
// JSON whitespace is limited as in llama.cpp's json-schema-to-grammar (one blank, or a newline
// and at most 20 indentation characters, per gap), so a model at temperature 1 cannot wander in
// whitespace forever. Every compiler is bounded by CompileLimits; beyond a limit the answer is
// INVALID_ARGUMENT naming it, so time and output stay proportional to the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pagoda::grammar {

struct CompileLimits {
  int32_t max_depth = 64;                 // schema / regex group nesting, $ref and allOf chains
  size_t max_alternatives = 4096;         // enum values, anyOf / oneOf branches, choices, `|`
  size_t max_output_bytes = 1 << 20;      // the GBNF text (and the schema / regex text)
  int32_t max_repetition = 10000;         // one count: minLength, maxItems, {m,n}, ...
  int64_t max_total_repetition = 100000;  // all counts of one grammar added up
};

struct JsonSchemaOptions {
  bool strict = false;  // additionalProperties defaults to false (OpenAI strict mode)
};

Result<std::string> JsonSchemaToGbnf(std::string_view schema_json, const JsonSchemaOptions& opts,
                                     const CompileLimits& limits = {});
std::string JsonObjectGbnf();
Result<std::string> RegexToGbnf(std::string_view regex, const CompileLimits& limits = {});
Result<std::string> ChoiceGbnf(std::span<const std::string> choices,
                               const CompileLimits& limits = {});

}  // namespace pagoda::grammar
