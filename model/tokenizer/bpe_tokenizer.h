// Byte-level BPE tokenizer (GPT-2 family: GPT-2, Llama 3, Qwen2, StarCoder, SmolLM, ...).
//
// Offers:
//   * BpeVocab — plain-data vocabulary: token strings, kinds, ranked merges, pre-tokenizer.
//     Filled from a Hugging Face tokenizer.json or GPT-2's encoder.json + vocab.bpe (see
//     tokenizer_json.h) or from GGUF metadata (model/gguf_bpe.h).
//   * ValidateBpeVocab / MakeBpeTokenizer — checks a vocabulary (naming the offending field)
//     and builds a thread-safe Tokenizer.
//   * ByteLevelEncode / ByteLevelDecode — GPT-2's byte <-> printable-character alphabet.
//
// Encoding: (1) added tokens (kinds control and user-defined, stored as raw text) are found in
// the text first, leftmost-longest, and emitted as their ids (control tokens only where
// allowed: everywhere for Encode unless match_control_tokens is off, inside the special spans
// for EncodeWithSpecials); (2) each remaining segment is
// split by the pre-tokenizer (pretokenizer.h); (3) each chunk's bytes become GPT-2 alphabet
// symbols, merged by rank (lowest first, ties leftmost) in O(n log n); (4) the final symbols
// are emitted as ids. A merge whose parts or result are not vocabulary tokens is ignored. A
// byte whose alphabet symbol is not a token becomes unk_id, or is dropped if there is none.
//
// Decoding: control tokens are skipped (TokenBytes of a control token is ""), like Hugging
// Face's decode(skip_special_tokens=True). User-defined tokens give their raw text; other
// tokens are mapped back through the byte alphabet (a token containing characters outside the
// alphabet gives its own UTF-8 text, as Hugging Face does). Decode replaces invalid UTF-8 with
// U+FFFD; TokenBytes gives raw bytes so StreamingDecoder works unchanged. No leading space is
// stripped. For any byte string s, the TokenBytes of Encode(s) concatenate back to s.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/tokenizer.h"

namespace pagoda {

struct BpeVocab {
  // id -> token. Normal tokens are spelled in the GPT-2 byte alphabet ("Ġworld"); control and
  // user-defined (added) tokens are raw text ("<|endoftext|>").
  std::vector<std::string> tokens;
  std::vector<TokenKind> kinds;  // id -> kind; same length as tokens
  // Merges in rank order (index = rank), each a pair of byte-alphabet token strings.
  std::vector<std::pair<std::string, std::string>> merges;
  // A name known to PreTokenizerPatterns ("gpt2", "llama-bpe", "qwen2", "smollm", ...).
  std::string pre_tokenizer = "gpt2";
  // If non-empty, these PCRE2 regexes are used instead of the named pre-tokenizer.
  std::vector<std::string> pre_tokenizer_regexes;
  int32_t bos_id = -1;   // -1 if none
  int32_t eos_id = -1;   // -1 if none
  int32_t unk_id = -1;   // -1 if none
  bool add_bos = false;  // whether prompts get BOS by default
  // A chunk that is itself a token is emitted whole, without merging (Llama 3's
  // tokenizer.json "ignore_merges").
  bool ignore_merges = false;
  // Prepend a space to each text segment not starting with one (ByteLevel add_prefix_space).
  bool add_prefix_space = false;
  // Whether control tokens are recognised in text (Hugging Face does; set false to make text
  // like "<|endoftext|>" encode as plain text). User-defined tokens are always recognised.
  bool match_control_tokens = true;
};

// OK, or InvalidArgument naming the first wrong field (e.g. "BpeVocab.kinds has 3 entries
// but tokens has 4").
Status ValidateBpeVocab(const BpeVocab& vocab);

// Validates `vocab`, compiles its pre-tokenizer and builds the tokenizer. Duplicate tokens
// resolve to the lowest id; for duplicate merges the lowest rank wins.
Result<std::unique_ptr<Tokenizer>> MakeBpeTokenizer(BpeVocab vocab);

// Bytes -> GPT-2 alphabet (each byte becomes one character; e.g. ' ' -> "Ġ", '\n' -> "Ċ").
std::string ByteLevelEncode(std::string_view bytes);
// GPT-2 alphabet -> bytes; InvalidArgument if `text` is not valid UTF-8 or has a character
// outside the alphabet.
Result<std::string> ByteLevelDecode(std::string_view text);

}  // namespace pagoda
