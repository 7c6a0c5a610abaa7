#include "server/openai_constraint.h"

#include <string>
#include <utility>
#include <vector>

namespace pagoda {
namespace {

using grammar::ConstraintKind;
using grammar::ConstraintSpec;
using nlohmann::json;

bool Present(const json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

// A schema given as an object, or as its JSON text (vLLM accepts both for guided_json).
Result<std::string> SchemaText(const json& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) return v.get<std::string>();
  return InvalidArgument(field + ": expected a JSON schema (an object or its JSON text)");
}

Result<std::string> StringField(const json& v, const std::string& field) {
  if (!v.is_string()) return InvalidArgument(field + ": expected a string");
  return v.get<std::string>();
}

Result<std::vector<std::string>> Choices(const json& v, const std::string& field) {
  if (!v.is_array() || v.empty()) {
    return InvalidArgument(field + ": expected a non-empty array of strings");
  }
  std::vector<std::string> out;
  for (const json& c : v) {
    if (!c.is_string()) return InvalidArgument(field + ": expected a non-empty array of strings");
    out.push_back(c.get<std::string>());
  }
  return out;
}

// One constraint from `v` of kind `kind` (the value of `field`).
Result<ConstraintSpec> FromValue(ConstraintKind kind, const json& v, const std::string& field) {
  ConstraintSpec c;
  c.kind = kind;
  c.field = field;
  switch (kind) {
    case ConstraintKind::kJsonSchema: {
      PAGODA_ASSIGN_OR_RETURN(c.text, SchemaText(v, field));
      break;
    }
    case ConstraintKind::kRegex:
    case ConstraintKind::kGrammar: {
      PAGODA_ASSIGN_OR_RETURN(c.text, StringField(v, field));
      break;
    }
    case ConstraintKind::kChoice: {
      PAGODA_ASSIGN_OR_RETURN(c.choices, Choices(v, field));
      break;
    }
    case ConstraintKind::kJsonObject:
      if (!v.is_boolean()) return InvalidArgument(field + ": expected a boolean");
      if (!v.get<bool>()) c.kind = ConstraintKind::kNone;
      break;
    case ConstraintKind::kNone:
      break;
  }
  return c;
}

Result<ConstraintSpec> FromResponseFormat(const json& rf) {
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
    return InvalidArgument("response_format: expected an object with a string \"type\"");
  }
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") return ConstraintSpec{};
  if (type == "json_object") {
    return ConstraintSpec{ConstraintKind::kJsonObject, "", {}, false, "response_format"};
  }
  if (type != "json_schema") {
    return InvalidArgument("response_format.type: expected \"text\", \"json_object\" or " +
                           std::string("\"json_schema\", got \"") + type + "\"");
  }
  const auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object()) {
    return InvalidArgument("response_format.json_schema: expected an object");
  }
  const auto schema = js->find("schema");
  if (schema == js->end() || !schema->is_object()) {
    return InvalidArgument("response_format.json_schema.schema: expected an object");
  }
  ConstraintSpec c{
      ConstraintKind::kJsonSchema, schema->dump(), {}, false, "response_format.json_schema.schema"};
  if (const auto strict = js->find("strict"); strict != js->end() && !strict->is_null()) {
    if (!strict->is_boolean()) {
      return InvalidArgument("response_format.json_schema.strict: expected a boolean");
    }
    c.strict = strict->get<bool>();
  }
  return c;
}

// vLLM's constraint kinds by name: guided_<name> in the body, <name> in structured_outputs.
constexpr std::pair<const char*, ConstraintKind> kVllmKinds[] = {
    {"json", ConstraintKind::kJsonSchema},
    {"regex", ConstraintKind::kRegex},
    {"choice", ConstraintKind::kChoice},
    {"grammar", ConstraintKind::kGrammar},
    {"json_object", ConstraintKind::kJsonObject}};

// Appends the constraints `obj` states under the keys key_prefix + <name>; their field names
// are field_prefix + key.
Status CollectVllm(const json& obj, const std::string& key_prefix, const std::string& field_prefix,
                   std::vector<ConstraintSpec>* found) {
  for (const auto& [name, kind] : kVllmKinds) {
    const std::string key = key_prefix + name;
    if (!Present(obj, key.c_str())) continue;
    PAGODA_ASSIGN_OR_RETURN(ConstraintSpec c, FromValue(kind, obj[key], field_prefix + key));
    if (c.kind != ConstraintKind::kNone) found->push_back(std::move(c));
  }
  return Status::Ok();
}

// Every constraint the body states, with the field it came from.
Result<std::vector<ConstraintSpec>> Collect(const json& j) {
  std::vector<ConstraintSpec> found;
  if (Present(j, "response_format")) {
    PAGODA_ASSIGN_OR_RETURN(ConstraintSpec c, FromResponseFormat(j["response_format"]));
    if (c.kind != ConstraintKind::kNone) found.push_back(std::move(c));
  }
  PAGODA_RETURN_IF_ERROR(CollectVllm(j, "guided_", "", &found));
  if (!Present(j, "structured_outputs")) return found;
  const json& so = j["structured_outputs"];
  if (!so.is_object()) return InvalidArgument("structured_outputs: expected an object");
  PAGODA_RETURN_IF_ERROR(CollectVllm(so, "", "structured_outputs.", &found));
  if (Present(so, "structural_tag")) {
    return InvalidArgument("structured_outputs.structural_tag: not supported yet");
  }
  return found;
}

}  // namespace

Status ParseOpenAiConstraint(const json& body, ConstraintSpec* out) {
  if (Present(body, "guided_whitespace_pattern")) {
    return InvalidArgument("guided_whitespace_pattern: not supported yet");
  }
  PAGODA_ASSIGN_OR_RETURN(std::vector<ConstraintSpec> found, Collect(body));
  if (found.size() > 1) {
    return InvalidArgument(found[1].field + ": only one structured-output constraint per " +
                           "request (" + found[0].field + " is given too)");
  }
  *out = found.empty() ? ConstraintSpec{} : std::move(found[0]);
  return Status::Ok();
}

}  // namespace pagoda
