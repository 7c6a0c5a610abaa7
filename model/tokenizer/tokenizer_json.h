// Loaders of byte-level BPE vocabularies from Hugging Face and OpenAI files.
//
// Offers:
//   * BpeVocabFromTokenizerJson — a Hugging Face `tokenizer.json` with a BPE model and a
//     ByteLevel pre-tokenizer or decoder (GPT-2, Llama 3, Qwen2, StarCoder, SmolLM, ...).
//   * BpeVocabFromGpt2Files — GPT-2's `encoder.json` + `vocab.bpe` pair.
//
// Both take the file contents, never throw and never crash on hostile input: errors are
// InvalidArgument naming the JSON path or line (e.g. "tokenizer.json: model.merges[12]: expected
// \"a b\" or [a, b]"), or Unimplemented for features Pagoda does not support.
//
// tokenizer.json mapping: model.vocab -> tokens (normal); model.merges ("a b" strings or
// [a, b] pairs) -> merges; added_tokens -> control (special) or user-defined tokens, stored
// as their raw content; model.unk_token -> unk_id; model.ignore_merges -> ignore_merges;
// pre_tokenizer: ByteLevel(use_regex) = the GPT-2 pattern, Split(Regex, Isolated) = that
// regex, Digits = \p{N} / \p{N}+ (Sequences of these in order); the Llama 3, Qwen2 and GPT-2
// patterns are recognised and named ("llama3", "qwen2", "gpt2"), any other regex is kept in
// pre_tokenizer_regexes. BOS comes from a TemplateProcessing post-processor whose single
// template starts with a special token (then add_bos = true). EOS is not stored in
// tokenizer.json: the first added token among "<|endoftext|>", "<|end_of_text|>", "</s>" is
// used; callers with a tokenizer_config.json may override bos_id/eos_id/add_bos. A normalizer
// other than null or NFC is Unimplemented; NFC is accepted but not applied.
#pragma once

#include <string_view>

#include "common/status.h"
#include "model/tokenizer/bpe_tokenizer.h"

namespace pagoda {

Result<BpeVocab> BpeVocabFromTokenizerJson(std::string_view json_text);

// `encoder_json`: {"token": id, ...}; `vocab_bpe`: "#version" line, then one "a b" merge per
// line in rank order. "<|endoftext|>" becomes a control token and eos_id; pre-tokenizer "gpt2".
Result<BpeVocab> BpeVocabFromGpt2Files(std::string_view encoder_json, std::string_view vocab_bpe);

}  // namespace pagoda
