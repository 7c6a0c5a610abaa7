// Fuzz target: the Jinja chat-template parser and renderer, rendering what parses over a fixed
// conversation with small limits (a template that hits one is a clear error, not a finding).
#include <nlohmann/json.hpp>

#include "model/chat/jinja.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

const nlohmann::ordered_json& Variables() {
  static const auto* vars = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Hi <|im_start|> {{ x }}"},
                 {"role": "assistant", "content": "Hello."},
                 {"role": "user", "content": [{"type": "text", "text": "parts"}]}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]})"));
  return *vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda;
  auto tmpl = jinja::Template::Parse(fuzz::AsText(data, size));
  if (!tmpl.ok()) return 0;
  jinja::RenderOptions options;
  options.now = jinja::CivilTime{2026, 7, 26, 12, 0, 0};
  options.limits.max_output_bytes = 1 << 16;
  options.limits.max_total_bytes = 1 << 22;
  options.limits.max_loop_iterations = 10'000;
  options.limits.max_steps = 100'000;
  options.limits.max_milliseconds = 1'000;
  (void)tmpl->Render(Variables(), options);
  return 0;
}
