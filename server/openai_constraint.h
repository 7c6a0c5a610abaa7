// The OpenAI API's structured-output fields mapped onto one grammar::ConstraintSpec:
//   response_format     {"type": "text"} (none), {"type": "json_object"}, {"type": "json_schema",
//                       "json_schema": {"name", "schema", "strict", "description"}} (OpenAI);
//   guided_json (schema object or JSON text), guided_regex, guided_choice (array of strings),
//   guided_grammar (GBNF)                                     (vLLM's older extra fields);
//   structured_outputs  {"json" | "regex" | "choice" | "grammar" | "json_object": true}
//                                                             (vLLM's newer object).
// guided_decoding_backend is accepted and ignored (there is one backend). At most one
// constraint per request; more is INVALID_ARGUMENT naming both fields. Errors name the field
// ("response_format.json_schema.schema: expected an object").
#pragma once

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "scheduler/grammar/constraint.h"

namespace pagoda {

Status ParseOpenAiConstraint(const nlohmann::json& body, grammar::ConstraintSpec* out);

}  // namespace pagoda
