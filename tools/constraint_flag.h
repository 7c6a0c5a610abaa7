// The structured-output flags of generate and bench model (scheduler/grammar/constraint.h):
//   --json-schema FILE   the output is JSON matching this schema (--json-schema-strict: no
//                        properties beyond `properties` unless additionalProperties says so)
//   --json-object        any JSON object
//   --regex R            the output full-matches R
//   --grammar FILE       a llama.cpp GBNF grammar (start rule `root`)
//   --choice S           exactly one of the strings (repeatable)
// At most one of them; FlagsConstraint answers INVALID_ARGUMENT naming the flag otherwise, or
// when a file cannot be read.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "pagoda/v1/generation.pb.h"
#include "scheduler/grammar/constraint.h"

namespace pagoda::cli {

struct ConstraintFlags {  // empty / false: not given
  std::string json_schema_file, regex, grammar_file;
  bool json_schema_strict = false, json_object = false;
  std::vector<std::string> choices;
};

void AddConstraintFlags(CLI::App* cmd, ConstraintFlags* flags);
// The constraint the flags ask for (kind kNone when none), files read.
Result<grammar::ConstraintSpec> FlagsConstraint(const ConstraintFlags& flags);
// The same constraint on a gRPC request (for generate --server).
void SetRequestConstraint(const grammar::ConstraintSpec& spec, v1::GenerateRequest* req);

}  // namespace pagoda::cli
