// Byte-level BPE vocabulary from GGUF metadata (`tokenizer.ggml.model == "gpt2"`).
//
// Offers BpeVocabFromGguf, to be followed by MakeBpeTokenizer (model/tokenizer/bpe_tokenizer.h).
// Mapping: tokens <- tokenizer.ggml.tokens; merges <- tokenizer.ggml.merges ("a b" strings, in
// rank order); kinds <- tokenizer.ggml.token_type (optional, TokenKind numbering; default
// normal); pre_tokenizer <- tokenizer.ggml.pre (optional, default "default" = GPT-2); ids <-
// tokenizer.ggml.{bos,eos,unknown}_token_id (optional; negative or > INT32_MAX = none);
// add_bos <- tokenizer.ggml.add_bos_token (default: true for the Llama 3 pre-tokenizers, as in
// llama.cpp, else false). ignore_merges is set for the Llama 3 pre-tokenizers, as llama.cpp
// does. Errors name the metadata key (and the array index).
#pragma once

#include "common/status.h"
#include "model/gguf.h"
#include "model/tokenizer/bpe_tokenizer.h"

namespace pagoda {

Result<BpeVocab> BpeVocabFromGguf(const GgufFile& file);

}  // namespace pagoda
