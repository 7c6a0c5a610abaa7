// Fuzz target: SentencePiece tokenizer.model (protobuf wire format) reading, then encoding.
#include "model/tokenizer/sentencepiece_model.h"
#include "model/tokenizer/spm_tokenizer.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda;
  auto vocab = ParseSentencePieceModel(std::span<const uint8_t>(data, size));
  if (!vocab.ok()) return 0;
  if (auto tok = MakeSpmTokenizer(std::move(*vocab)); tok.ok()) fuzz::ExerciseTokenizer(**tok);
  return 0;
}
