#include "tools/constraint_flag.h"

#include <fstream>
#include <sstream>

namespace pagoda::cli {
namespace {

Result<std::string> ReadFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(flag + " " + path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void AddConstraintFlags(CLI::App* cmd, ConstraintFlags* flags) {
  cmd->add_option("--json-schema", flags->json_schema_file,
                  "Structured output: JSON matching the schema in this file");
  cmd->add_flag("--json-schema-strict", flags->json_schema_strict,
                "With --json-schema: objects take no properties beyond `properties` unless "
                "additionalProperties says so (OpenAI's strict mode)");
  cmd->add_flag("--json-object", flags->json_object, "Structured output: any JSON object");
  cmd->add_option("--regex", flags->regex, "Structured output: text that full-matches the regex");
  cmd->add_option("--grammar", flags->grammar_file,
                  "Structured output: a llama.cpp GBNF grammar file (start rule `root`)");
  cmd->add_option("--choice", flags->choices,
                  "Structured output: exactly one of these strings (repeatable)");
}

Result<grammar::ConstraintSpec> FlagsConstraint(const ConstraintFlags& flags) {
  using grammar::ConstraintKind;
  const int given = !flags.json_schema_file.empty() + flags.json_object + !flags.regex.empty() +
                    !flags.grammar_file.empty() + !flags.choices.empty();
  if (given > 1) {
    return InvalidArgument(
        "--json-schema, --json-object, --regex, --grammar, --choice: give at most one");
  }
  grammar::ConstraintSpec c;
  if (!flags.json_schema_file.empty()) {
    PAGODA_ASSIGN_OR_RETURN(c.text, ReadFile(flags.json_schema_file, "--json-schema"));
    c.kind = ConstraintKind::kJsonSchema;
    c.strict = flags.json_schema_strict;
    c.field = "--json-schema " + flags.json_schema_file;
  } else if (flags.json_object) {
    c = {ConstraintKind::kJsonObject, "", {}, false, "--json-object"};
  } else if (!flags.regex.empty()) {
    c = {ConstraintKind::kRegex, flags.regex, {}, false, "--regex"};
  } else if (!flags.grammar_file.empty()) {
    PAGODA_ASSIGN_OR_RETURN(c.text, ReadFile(flags.grammar_file, "--grammar"));
    c.kind = ConstraintKind::kGrammar;
    c.field = "--grammar " + flags.grammar_file;
  } else if (!flags.choices.empty()) {
    c = {ConstraintKind::kChoice, "", flags.choices, false, "--choice"};
  }
  return c;
}

void SetRequestConstraint(const grammar::ConstraintSpec& spec, v1::GenerateRequest* req) {
  using grammar::ConstraintKind;
  switch (spec.kind) {
    case ConstraintKind::kJsonSchema:
      req->set_json_schema(spec.text);
      req->set_json_schema_strict(spec.strict);
      break;
    case ConstraintKind::kJsonObject:
      req->set_json_object(true);
      break;
    case ConstraintKind::kRegex:
      req->set_regex(spec.text);
      break;
    case ConstraintKind::kGrammar:
      req->set_grammar(spec.text);
      break;
    case ConstraintKind::kChoice:
      for (const std::string& s : spec.choices) req->mutable_choice()->add_choices(s);
      break;
    case ConstraintKind::kNone:
      break;
  }
}

}  // namespace pagoda::cli
