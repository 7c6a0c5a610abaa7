// Tokenizer: text <-> token ids for one model vocabulary.
//
// Implementations: SentencePiece-style (model/tokenizer/spm_tokenizer.h); byte-level BPE later.
// All methods are const and thread-safe. Token ids outside [0, vocab_size()) are a caller error
// that Decode/TokenBytes answer with an empty string (never a crash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {

enum class TokenKind : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// A byte range [offset, offset + length) of a text.
struct TextSpan {
  size_t offset = 0;
  size_t length = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes text. SentencePiece never produces control tokens from text; byte-level BPE matches
  // special/added tokens in the text first, as Hugging Face tokenizers do (chat templates rely
  // on it; BpeVocab::match_control_tokens turns it off). `add_bos` prepends BOS when the
  // vocabulary has one.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_bos) const = 0;

  // Encodes text recognising control tokens (spelled exactly, leftmost-longest) only where the
  // whole token lies inside one of `special_spans` (sorted, non-overlapping); elsewhere their
  // text is plain text, so no user can type one. User-defined tokens are recognised anywhere, as
  // Encode does. Text between tokens is encoded as Encode encodes a text (SentencePiece: with
  // its dummy-prefix space after each special token, as llama.cpp and Hugging Face do).
  // Chat prompts pass the template's own bytes (jinja::Rendered segments); no spans = all
  // plain text; one span over the whole text = llama.cpp's parse_special.
  virtual std::vector<int32_t> EncodeWithSpecials(std::string_view text,
                                                  std::span<const TextSpan> special_spans,
                                                  bool add_bos) const = 0;

  // The bytes token `id` stands for in running text (a byte token gives its byte; a control
  // token gives ""). For SentencePiece the "▁" meta symbol becomes a space. Bytes may be a
  // partial UTF-8 sequence.
  virtual std::string TokenBytes(int32_t id) const = 0;

  // Decodes a whole sequence (as SentencePiece does: the dummy-prefix space of the first
  // token is removed). Invalid UTF-8 is replaced with U+FFFD.
  virtual std::string Decode(std::span<const int32_t> ids) const = 0;

  // The piece string as stored in the vocabulary (e.g. "▁Hello", "<0x0A>").
  virtual std::string_view Piece(int32_t id) const = 0;
  virtual TokenKind Kind(int32_t id) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;  // -1 if none
  // Whether the model expects BOS in front of a prompt by default.
  virtual bool add_bos_by_default() const = 0;

  // For `pagoda inspect`: "spm" (SentencePiece) or "bpe" (byte-level BPE); the BPE
  // pre-tokenizer's name ("gpt2", "llama-bpe", "qwen2", "custom", ...; "" for SentencePiece);
  // the unknown-token id (-1 if none).
  virtual std::string_view type_name() const { return "unknown"; }
  virtual std::string_view pre_tokenizer_name() const { return ""; }
  virtual int32_t unk_id() const { return -1; }
};

// Incremental detokenizer for one sequence. Feed ids one at a time; each call returns the
// newly completed text, always valid UTF-8 (bytes of a character split across tokens are held
// until complete). The concatenation of all deltas plus Flush() equals Decode(all ids).
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string Push(int32_t id);
  // Returns whatever is held back (incomplete UTF-8 becomes U+FFFD).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  // Until Decode() of the sequence so far produces text, the ids whose TokenBytes are
  // non-empty are kept here (Decode may strip a leading space at the start of a sequence).
  std::vector<int32_t> start_ids_;
  bool started_ = false;
  std::string pending_;  // bytes of an incomplete UTF-8 character held back
};

}  // namespace pagoda
