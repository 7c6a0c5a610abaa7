// Fuzz target: a Hugging Face config.json turned into a ModelConfig.
#include "model/hf_model.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)pagoda::HfConfigFromJson(pagoda::fuzz::AsText(data, size));
  return 0;
}
