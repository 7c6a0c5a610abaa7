// Fuzz target: the constraint compilers (constraint_compilers.h). The first byte picks the
// compiler — JSON schema (loose or strict), regex, or a choice list (the rest split at '\n') —
// and the rest is compiled with tight limits. Rejection is fine; but whatever compiles must be
// GBNF that ParseGbnf accepts (anything else is a compiler bug: abort), and a matcher over it
// must survive the input's own bytes.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "scheduler/grammar/constraint_compilers.h"
#include "scheduler/grammar/grammar.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace pagoda;

std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      out.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

Result<std::string> CompileInput(uint8_t selector, std::string_view text) {
  grammar::CompileLimits limits;
  limits.max_depth = 16;
  limits.max_alternatives = 64;
  limits.max_output_bytes = 1 << 16;
  limits.max_repetition = 200;
  limits.max_total_repetition = 2000;
  switch (selector % 4) {
    case 0:
      return grammar::JsonSchemaToGbnf(text, {.strict = false}, limits);
    case 1:
      return grammar::JsonSchemaToGbnf(text, {.strict = true}, limits);
    case 2:
      return grammar::RegexToGbnf(text, limits);
    default: {
      const std::vector<std::string> choices = SplitLines(text);
      return grammar::ChoiceGbnf(choices, limits);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text = fuzz::AsText(data + 1, size - 1);
  const Result<std::string> gbnf = CompileInput(data[0], text);
  if (!gbnf.ok()) return 0;
  const auto parsed = grammar::ParseGbnf(*gbnf);
  if (!parsed.ok()) {
    std::fprintf(stderr, "compiler %d produced GBNF the parser rejects: %s\n%s\n", data[0] % 4,
                 parsed.status().ToString().c_str(), gbnf->c_str());
    std::abort();
  }
  grammar::GrammarMatcher matcher(*parsed);
  for (size_t i = 0; i < text.size() && i < 256; ++i) {
    if (!matcher.Accept(text.substr(i, 1))) break;
  }
  (void)matcher.IsAccepting();
  return 0;
}
