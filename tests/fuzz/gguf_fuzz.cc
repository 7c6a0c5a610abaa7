// Fuzz target: the GGUF reader, and what the loader does with a file that parses -- the model
// config, weight binding and the embedded tokenizer.
#include "model/gguf.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda;
  auto file = GgufFile::Parse(std::span<const uint8_t>(data, size));
  if (!file.ok()) return 0;
  if (auto config = ModelConfigFromGguf(**file); config.ok()) {
    (void)BindGgufWeights(**file, *config);
  }
  if (auto tok = LoadGgufTokenizer(**file); tok.ok()) fuzz::ExerciseTokenizer(**tok);
  return 0;
}
