// SentencePiece-style tokenizer (Llama 2 family, BPE model type).
//
// Offers:
//   * SpmVocab — plain-data vocabulary plus the normalizer switches, filled either from a
//     SentencePiece `tokenizer.model` (see sentencepiece_model.h) or from GGUF metadata.
//   * ValidateSpmVocab — checks an SpmVocab, naming the offending field.
//   * MakeSpmTokenizer — builds a thread-safe Tokenizer that reproduces the SentencePiece
//     library's BPE encoding and decoding exactly.
//
// Encoding: the text is normalized (invalid UTF-8 bytes -> U+FFFD, optional dummy-prefix
// "▁", spaces -> "▁", optional removal of extra whitespace), split into characters
// (user-defined pieces are matched greedily first and never merged further), merged by
// highest-scoring adjacent pair (ties: leftmost) in O(n log n), and pieces not in the
// vocabulary fall back to <0xXX> byte tokens (or unk). Control tokens are never produced from
// text, except inside the special spans of EncodeWithSpecials. Precompiled normalization charsmaps
// (NFKC etc.) are not supported.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/tokenizer.h"

namespace pagoda {

// GGUF mapping: pieces <- tokenizer.ggml.tokens, scores <- tokenizer.ggml.scores,
// kinds <- tokenizer.ggml.token_type (same numbering as TokenKind), ids <- the
// tokenizer.ggml.{bos,eos,unknown}_token_id keys, add_bos <- tokenizer.ggml.add_bos_token,
// add_dummy_prefix <- tokenizer.ggml.add_space_prefix, remove_extra_whitespaces <-
// tokenizer.ggml.remove_extra_whitespaces (all three optional; defaults below).
struct SpmVocab {
  std::vector<std::string> pieces;  // id -> piece ("▁Hello", "<0x0A>", "<s>")
  std::vector<float> scores;        // id -> merge score (higher merges first); not NaN
  std::vector<TokenKind> kinds;     // id -> kind; byte pieces must be spelled <0xHH>
  int32_t unk_id = 0;               // -1 if none (unknown text without byte pieces is dropped)
  int32_t bos_id = 1;               // -1 if none
  int32_t eos_id = 2;               // -1 if none
  bool add_bos = true;              // whether prompts get BOS by default
  bool add_dummy_prefix = true;     // prepend "▁" to non-empty text
  bool remove_extra_whitespaces = false;
  bool escape_whitespaces = true;              // spaces -> "▁" (U+2581)
  bool byte_fallback = true;                   // unknown characters -> <0xXX> byte tokens, else unk
  std::string unk_surface = " \xE2\x81\x87 ";  // what Decode shows for unk: " ⁇ "
};

// OK, or InvalidArgument naming the first wrong field (e.g. "SpmVocab.scores has 3 entries
// but pieces has 4").
Status ValidateSpmVocab(const SpmVocab& vocab);

// Validates `vocab` and builds the tokenizer. Duplicate pieces resolve to the lowest id.
Result<std::unique_ptr<Tokenizer>> MakeSpmTokenizer(SpmVocab vocab);

}  // namespace pagoda
