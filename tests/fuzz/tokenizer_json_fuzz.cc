// Fuzz target: Hugging Face tokenizer.json (BPE) loading, then encoding with what loaded.
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/tokenizer_json.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda;
  auto vocab = BpeVocabFromTokenizerJson(fuzz::AsText(data, size));
  if (!vocab.ok()) return 0;
  if (auto tok = MakeBpeTokenizer(std::move(*vocab)); tok.ok()) fuzz::ExerciseTokenizer(**tok);
  return 0;
}
