// Pre-tokenizers of byte-level BPE: split text into chunks that BPE merges never cross.
//
// Offers:
//   * PreTokenizerPatterns — the regex sequence of a named pre-tokenizer. Names follow
//     llama.cpp's `tokenizer.ggml.pre` values: "gpt2"/"default" (GPT-2), "llama3"/"llama-bpe"
//     (Llama 3, cl100k), "qwen2", "starcoder"/"smollm"/... (single digits, then GPT-2), "falcon".
//   * PreTokenizer — a compiled sequence of PCRE2 regexes (UTF + UCP, JIT when available).
//     Each regex splits every chunk of the previous stage into its matches and the gaps
//     between them (Hugging Face's Split with behaviour "Isolated"). Split() is const and
//     thread-safe: match data is allocated per call.
//   * PreTokenize — one-shot convenience: name + text -> chunks.
//
// Invalid UTF-8 in the text never reaches PCRE2: each invalid byte becomes a chunk of its own
// and the valid runs between them are split normally, so the chunks always concatenate to the
// input. A regex that fails at match time (resource limits) leaves the rest of its chunk
// unsplit rather than failing.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pagoda {

// GPT-2's pattern (also the Hugging Face ByteLevel pre-tokenizer with use_regex).
extern const char kGpt2Pattern[];
// Llama 3 / cl100k pattern (digits in groups of up to three).
extern const char kLlama3Pattern[];
// Qwen2 pattern: Llama 3's with single digits (case-insensitive contractions).
extern const char kQwen2Pattern[];

// The regexes of a named pre-tokenizer, applied in order; NotFound naming an unknown name.
Result<std::vector<std::string>> PreTokenizerPatterns(std::string_view name);

class PreTokenizer {
 public:
  // Compiles `patterns` (PCRE2 syntax); InvalidArgument naming the pattern index, the offset
  // and PCRE2's message when one does not compile. No patterns: the text is one chunk.
  static Result<PreTokenizer> Compile(const std::vector<std::string>& patterns);
  static Result<PreTokenizer> ForName(std::string_view name);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Non-empty chunks of `text`, as views into it, in order; they concatenate to `text`.
  std::vector<std::string_view> Split(std::string_view text) const;

 private:
  struct Regex;
  PreTokenizer() = default;

  std::vector<std::unique_ptr<Regex>> regexes_;
};

// PreTokenizer::ForName(name) and Split(text), copied into strings.
Result<std::vector<std::string>> PreTokenize(std::string_view name, std::string_view text);

}  // namespace pagoda
