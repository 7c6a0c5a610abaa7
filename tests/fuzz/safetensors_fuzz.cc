// Fuzz target: the safetensors header (first byte 0: the rest is a file image) and the shard
// index model.safetensors.index.json (first byte 1: the rest is its text).
#include "model/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda;
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    auto file = SafetensorsFile::Parse(std::span<const uint8_t>(data + 1, size - 1));
    if (file.ok()) {
      for (const auto& t : (*file)->tensors()) (void)t.CheckSupported();
    }
  } else {
    (void)ParseSafetensorsIndex(fuzz::AsText(data + 1, size - 1));
  }
  return 0;
}
