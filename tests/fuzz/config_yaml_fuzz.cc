// Fuzz target: the YAML config loader (parse, field table, validation) and the dump of what
// loaded.
#include "server/config.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda;
  auto config = ParseConfig(fuzz::AsText(data, size), "fuzz.yaml");
  if (config.ok() && ValidateConfig(*config).ok()) (void)DumpConfig(*config);
  return 0;
}
