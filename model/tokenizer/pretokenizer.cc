#include "model/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <utility>

#include "model/tokenizer/utf8.h"

namespace pagoda {

const char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char kLlama3Pattern[] =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char kQwen2Pattern[] = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
                             R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

constexpr char kFalconPunct[] = R"([\p{P}\$\+<=>\^~\|`]+)";
constexpr char kFalconDigits[] = "[0-9][0-9][0-9]";
constexpr char kSingleDigit[] = R"(\p{N})";

struct NamedPatterns {
  const char* name;
  std::array<const char*, 3> patterns;  // nullptr-terminated
};

// llama.cpp's `tokenizer.ggml.pre` names (see llama-vocab.cpp) and their regex sequences.
constexpr NamedPatterns kNamed[] = {
    {"gpt2", {kGpt2Pattern}},
    {"gpt-2", {kGpt2Pattern}},
    {"default", {kGpt2Pattern}},
    {"mpt", {kGpt2Pattern}},
    {"olmo", {kGpt2Pattern}},
    {"jais", {kGpt2Pattern}},
    {"llama3", {kLlama3Pattern}},
    {"llama-bpe", {kLlama3Pattern}},
    {"llama-v3", {kLlama3Pattern}},
    {"dbrx", {kLlama3Pattern}},
    {"smaug-bpe", {kLlama3Pattern}},
    {"qwen2", {kQwen2Pattern}},
    {"starcoder", {kSingleDigit, kGpt2Pattern}},
    {"smollm", {kSingleDigit, kGpt2Pattern}},
    {"refact", {kSingleDigit, kGpt2Pattern}},
    {"command-r", {kSingleDigit, kGpt2Pattern}},
    {"codeshell", {kSingleDigit, kGpt2Pattern}},
    {"exaone", {kSingleDigit, kGpt2Pattern}},
    {"minerva-7b", {kSingleDigit, kGpt2Pattern}},
    {"falcon", {kFalconPunct, kGpt2Pattern, kFalconDigits}},
    {"none", {}},
};

// Length of the UTF-8 character at the start of `s` (1 for anything odd).
size_t CharLen(std::string_view s) {
  size_t len = 1;
  utf8::ExamineChar(s, &len);
  return len;
}

// Splits `chunk` (valid UTF-8) into matches of `regex` and the gaps between them.
void SplitStage(const pcre2_code* code, bool jit, pcre2_match_data* md, std::string_view chunk,
                std::vector<std::string_view>* out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(chunk.data());
  size_t gap_start = 0;
  size_t search = 0;
  while (search < chunk.size()) {
    int rc = pcre2_match(code, subject, chunk.size(), search, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && jit) {  // e.g. JIT stack limit
      rc = pcre2_match(code, subject, chunk.size(), search, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                       nullptr);
    }
    if (rc < 0) break;  // no further match (or a resource limit): the rest is one gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (start < search || end < start || end > chunk.size()) break;  // \K tricks
    if (end == start) {  // empty match: step over one character, keep it in the gap
      if (start >= chunk.size()) break;
      search = start + CharLen(chunk.substr(start));
      continue;
    }
    if (start > gap_start) out->push_back(chunk.substr(gap_start, start - gap_start));
    out->push_back(chunk.substr(start, end - start));
    gap_start = search = end;
  }
  if (gap_start < chunk.size()) out->push_back(chunk.substr(gap_start));
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Regex() { pcre2_code_free(code); }
};

Result<std::vector<std::string>> PreTokenizerPatterns(std::string_view name) {
  for (const NamedPatterns& named : kNamed) {
    if (name != named.name) continue;
    std::vector<std::string> out;
    for (const char* p : named.patterns) {
      if (p != nullptr) out.emplace_back(p);
    }
    return out;
  }
  return NotFound("pre-tokenizer '" + std::string(name) + "' is not known");
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

Result<PreTokenizer> PreTokenizer::Compile(const std::vector<std::string>& patterns) {
  PreTokenizer pt;
  for (size_t i = 0; i < patterns.size(); ++i) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto regex = std::make_unique<Regex>();
    regex->code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(patterns[i].data()), patterns[i].size(),
                      PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (regex->code == nullptr) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error, message.data(), message.size());
      return InvalidArgument("pre-tokenizer pattern [" + std::to_string(i) + "] at offset " +
                             std::to_string(offset) + ": " +
                             reinterpret_cast<const char*>(message.data()));
    }
    regex->jit = pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE) == 0;
    pt.regexes_.push_back(std::move(regex));
  }
  return pt;
}

Result<PreTokenizer> PreTokenizer::ForName(std::string_view name) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::string> patterns, PreTokenizerPatterns(name));
  return Compile(patterns);
}

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> chunks;
  // Valid UTF-8 runs and single invalid bytes.
  size_t run_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    if (utf8::ExamineChar(text.substr(pos), &len) == utf8::CharStatus::kValid) {
      pos += len;
      continue;
    }
    if (pos > run_start) chunks.push_back(text.substr(run_start, pos - run_start));
    chunks.push_back(text.substr(pos, 1));
    run_start = ++pos;
  }
  if (pos > run_start) chunks.push_back(text.substr(run_start, pos - run_start));

  for (const auto& regex : regexes_) {
    // Match data is per call, so Split stays thread-safe.
    const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
        pcre2_match_data_create_from_pattern(regex->code, nullptr), pcre2_match_data_free);
    if (md == nullptr) break;  // out of memory: leave the chunks as they are
    std::vector<std::string_view> next;
    next.reserve(chunks.size() * 2);
    for (std::string_view chunk : chunks) {
      if (chunk.size() == 1 && static_cast<uint8_t>(chunk[0]) >= 0x80) {
        next.push_back(chunk);  // an invalid byte: never given to PCRE2
      } else {
        SplitStage(regex->code, regex->jit, md.get(), chunk, &next);
      }
    }
    chunks = std::move(next);
  }
  return chunks;
}

Result<std::vector<std::string>> PreTokenize(std::string_view name, std::string_view text) {
  PAGODA_ASSIGN_OR_RETURN(PreTokenizer pt, PreTokenizer::ForName(name));
  std::vector<std::string> out;
  for (std::string_view chunk : pt.Split(text)) out.emplace_back(chunk);
  return out;
}

}  // namespace pagoda
