#include "model/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <limits>
#include <queue>
#include <unordered_map>

#include "model/tokenizer/pretokenizer.h"
#include "model/tokenizer/special_tokens.h"
#include "model/tokenizer/utf8.h"

namespace pagoda {
namespace {

// GPT-2's bytes_to_unicode(): printable bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order.
constexpr std::array<uint16_t, 256> BuildByteToCp() {
  std::array<uint16_t, 256> table{};
  uint16_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    table[b] = printable ? static_cast<uint16_t>(b) : next++;
  }
  return table;
}
constexpr std::array<uint16_t, 256> kByteToCp = BuildByteToCp();
constexpr size_t kAlphabetEnd = 256 + 68;  // code points above this are not in the alphabet

constexpr std::array<int16_t, kAlphabetEnd> BuildCpToByte() {
  std::array<int16_t, kAlphabetEnd> table{};
  for (auto& v : table) v = -1;
  for (int b = 0; b < 256; ++b) table[kByteToCp[b]] = static_cast<int16_t>(b);
  return table;
}
constexpr std::array<int16_t, kAlphabetEnd> kCpToByte = BuildCpToByte();

void AppendAlphabetChar(uint8_t byte, std::string* out) {
  const uint16_t cp = kByteToCp[byte];
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// BPE runs on slices of at most this many bytes so that 32-bit indices suffice.
constexpr size_t kMaxChunkBytes = size_t{1} << 30;

// A symbol of the merge working list.
struct Symbol {
  int32_t id;  // token id; -1: byte without a token (never merged)
  int32_t prev;
  int32_t next;
};

struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t left_id;
  int32_t right_id;
};

// Lowest rank first; ties go to the leftmost pair.
struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

using Agenda = std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder>;

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

bool IsAdded(TokenKind kind) {
  return kind == TokenKind::kControl || kind == TokenKind::kUserDefined;
}

Status CheckId(int32_t id, size_t n, const char* field) {
  if (id == -1 || (id >= 0 && static_cast<size_t>(id) < n)) return Status::Ok();
  return InvalidArgument(std::string("BpeVocab.") + field + " = " + std::to_string(id) +
                         " is outside [0, " + std::to_string(n) + ") and is not -1");
}

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(BpeVocab vocab, PreTokenizer pre);

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override;
  std::vector<int32_t> EncodeWithSpecials(std::string_view text,
                                          std::span<const TextSpan> special_spans,
                                          bool add_bos) const override;
  std::string TokenBytes(int32_t id) const override;
  std::string Decode(std::span<const int32_t> ids) const override;
  std::string_view Piece(int32_t id) const override;
  TokenKind Kind(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.tokens.size()); }
  int32_t bos_id() const override { return vocab_.bos_id; }
  int32_t eos_id() const override { return vocab_.eos_id; }
  bool add_bos_by_default() const override { return vocab_.add_bos; }
  std::string_view type_name() const override { return "bpe"; }
  std::string_view pre_tokenizer_name() const override { return vocab_.pre_tokenizer; }
  int32_t unk_id() const override { return vocab_.unk_id; }

 private:
  struct MergeInfo {
    int32_t rank;
    int32_t merged;
  };
  bool InRange(int32_t id) const { return id >= 0 && id < vocab_size(); }
  void IndexTokens();
  void IndexMerges();
  void EncodeSegment(std::string_view segment, std::vector<int32_t>* ids) const;
  void EncodeChunk(std::string_view chunk, std::vector<int32_t>* ids) const;
  void MaybeAddCandidate(const std::vector<Symbol>& symbols, int32_t left, Agenda* agenda) const;

  BpeVocab vocab_;
  PreTokenizer pre_;
  std::unordered_map<std::string_view, int32_t> normal_to_id_;  // byte-alphabet tokens
  SpecialTokenMatcher added_;  // added tokens in raw text: user-defined anywhere, control in spans
  std::array<int32_t, 256> byte_to_id_{};
  std::unordered_map<uint64_t, MergeInfo> merges_;  // (left id, right id) -> merge
  std::vector<std::string> token_bytes_;            // TokenBytes(id), precomputed
};

BpeTokenizer::BpeTokenizer(BpeVocab vocab, PreTokenizer pre)
    : vocab_(std::move(vocab)), pre_(std::move(pre)) {
  IndexTokens();
  IndexMerges();
}

void BpeTokenizer::IndexTokens() {
  const size_t n = vocab_.tokens.size();
  token_bytes_.resize(n);
  normal_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view token = vocab_.tokens[i];
    const auto id = static_cast<int32_t>(i);
    const TokenKind kind = vocab_.kinds[i];
    if (!IsAdded(kind)) {
      normal_to_id_.emplace(token, id);
      auto bytes = ByteLevelDecode(token);
      token_bytes_[i] = bytes.ok() ? std::move(bytes).value() : std::string(token);
      continue;
    }
    if (kind == TokenKind::kUserDefined) token_bytes_[i] = std::string(token);
    added_.Add(token, id, /*anywhere=*/kind == TokenKind::kUserDefined);
  }
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    AppendAlphabetChar(static_cast<uint8_t>(b), &symbol);
    const auto it = normal_to_id_.find(symbol);
    byte_to_id_[b] = it == normal_to_id_.end() ? -1 : it->second;
  }
}

void BpeTokenizer::IndexMerges() {
  merges_.reserve(vocab_.merges.size());
  std::string merged;
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const auto& [left, right] = vocab_.merges[rank];
    const auto l = normal_to_id_.find(left);
    const auto r = normal_to_id_.find(right);
    merged = left + right;
    const auto m = normal_to_id_.find(merged);
    if (l == normal_to_id_.end() || r == normal_to_id_.end() || m == normal_to_id_.end()) {
      continue;  // cannot apply to token ids
    }
    merges_.emplace(PairKey(l->second, r->second),
                    MergeInfo{static_cast<int32_t>(rank), m->second});
  }
}

std::string_view BpeTokenizer::Piece(int32_t id) const {
  return InRange(id) ? std::string_view(vocab_.tokens[id]) : std::string_view();
}

TokenKind BpeTokenizer::Kind(int32_t id) const {
  return InRange(id) ? vocab_.kinds[id] : TokenKind::kUnused;
}

std::string BpeTokenizer::TokenBytes(int32_t id) const {
  return InRange(id) ? token_bytes_[id] : std::string();
}

std::string BpeTokenizer::Decode(std::span<const int32_t> ids) const {
  std::string raw;
  for (const int32_t id : ids) {
    if (InRange(id)) raw.append(token_bytes_[id]);
  }
  return utf8::MakeValid(raw);
}

void BpeTokenizer::MaybeAddCandidate(const std::vector<Symbol>& symbols, int32_t left,
                                     Agenda* agenda) const {
  if (left < 0) return;
  const int32_t right = symbols[left].next;
  if (right < 0 || symbols[left].id < 0 || symbols[right].id < 0) return;
  const auto it = merges_.find(PairKey(symbols[left].id, symbols[right].id));
  if (it == merges_.end()) return;
  agenda->push({it->second.rank, left, right, symbols[left].id, symbols[right].id});
}

// Byte-level BPE of one pre-token.
void BpeTokenizer::EncodeChunk(std::string_view chunk, std::vector<int32_t>* ids) const {
  if (vocab_.ignore_merges) {
    const auto it = normal_to_id_.find(ByteLevelEncode(chunk));
    if (it != normal_to_id_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  const auto n = static_cast<int32_t>(chunk.size());
  std::vector<Symbol> s(n);
  for (int32_t i = 0; i < n; ++i) {
    s[i] = {byte_to_id_[static_cast<uint8_t>(chunk[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  Agenda agenda;
  for (int32_t i = 0; i + 1 < n; ++i) MaybeAddCandidate(s, i, &agenda);
  while (!agenda.empty()) {
    const Candidate c = agenda.top();
    agenda.pop();
    Symbol& left = s[c.left];
    if (left.id != c.left_id || left.next != c.right || s[c.right].id != c.right_id) continue;
    left.id = merges_.at(PairKey(c.left_id, c.right_id)).merged;
    left.next = s[c.right].next;
    if (left.next >= 0) s[left.next].prev = c.left;
    s[c.right] = {-1, -1, -1};
    MaybeAddCandidate(s, left.prev, &agenda);
    MaybeAddCandidate(s, c.left, &agenda);
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = s[i].next) {
    if (s[i].id >= 0) {
      ids->push_back(s[i].id);
    } else if (vocab_.unk_id >= 0) {
      ids->push_back(vocab_.unk_id);
    }
  }
}

// Text between added tokens: optional prefix space, pre-tokenization, BPE per chunk.
void BpeTokenizer::EncodeSegment(std::string_view segment, std::vector<int32_t>* ids) const {
  if (segment.empty()) return;
  std::string prefixed;
  if (vocab_.add_prefix_space && segment[0] != ' ') {
    prefixed = " ";
    prefixed += segment;
    segment = prefixed;
  }
  for (std::string_view chunk : pre_.Split(segment)) {
    while (!chunk.empty()) {
      const size_t len = std::min(chunk.size(), kMaxChunkBytes);
      EncodeChunk(chunk.substr(0, len), ids);
      chunk.remove_prefix(len);
    }
  }
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text, bool add_bos) const {
  const TextSpan all{0, text.size()};
  return EncodeWithSpecials(
      text, vocab_.match_control_tokens ? std::span(&all, 1) : std::span<const TextSpan>(),
      add_bos);
}

std::vector<int32_t> BpeTokenizer::EncodeWithSpecials(std::string_view text,
                                                      std::span<const TextSpan> special_spans,
                                                      bool add_bos) const {
  std::vector<int32_t> ids;
  if (add_bos && vocab_.bos_id >= 0) ids.push_back(vocab_.bos_id);
  SplitOnSpecials(
      text, special_spans, added_,
      [&](std::string_view fragment) { EncodeSegment(fragment, &ids); },
      [&](int32_t id) { ids.push_back(id); });
  return ids;
}

}  // namespace

std::string ByteLevelEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) AppendAlphabetChar(static_cast<uint8_t>(c), &out);
  return out;
}

Result<std::string> ByteLevelDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    const bool valid = utf8::ExamineChar(text.substr(pos), &len) == utf8::CharStatus::kValid;
    uint32_t cp = kAlphabetEnd;
    if (valid && len == 1) cp = static_cast<uint8_t>(text[pos]);
    if (valid && len == 2) {
      cp = ((static_cast<uint8_t>(text[pos]) & 0x1Fu) << 6) |
           (static_cast<uint8_t>(text[pos + 1]) & 0x3Fu);
    }
    if (cp >= kAlphabetEnd || kCpToByte[cp] < 0) {
      return InvalidArgument(
          "byte-level text has a character outside the GPT-2 alphabet at "
          "byte " +
          std::to_string(pos));
    }
    out.push_back(static_cast<char>(kCpToByte[cp]));
    pos += len;
  }
  return out;
}

Status ValidateBpeVocab(const BpeVocab& vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) return InvalidArgument("BpeVocab.tokens is empty");
  constexpr auto kMax = static_cast<size_t>(std::numeric_limits<int32_t>::max());
  if (n > kMax) {
    return InvalidArgument("BpeVocab.tokens has " + std::to_string(n) + " entries, over int32");
  }
  if (vocab.merges.size() > kMax) {
    return InvalidArgument("BpeVocab.merges has " + std::to_string(vocab.merges.size()) +
                           " entries, over int32");
  }
  if (vocab.kinds.size() != n) {
    return InvalidArgument("BpeVocab.kinds has " + std::to_string(vocab.kinds.size()) +
                           " entries but tokens has " + std::to_string(n));
  }
  for (size_t i = 0; i < n; ++i) {
    const int kind = static_cast<int>(vocab.kinds[i]);
    if (kind < static_cast<int>(TokenKind::kNormal) || kind > static_cast<int>(TokenKind::kByte)) {
      return InvalidArgument("BpeVocab.kinds[" + std::to_string(i) + "] = " + std::to_string(kind) +
                             " is not a valid TokenKind (1..6)");
    }
  }
  PAGODA_RETURN_IF_ERROR(CheckId(vocab.bos_id, n, "bos_id"));
  PAGODA_RETURN_IF_ERROR(CheckId(vocab.eos_id, n, "eos_id"));
  PAGODA_RETURN_IF_ERROR(CheckId(vocab.unk_id, n, "unk_id"));
  return Status::Ok();
}

Result<std::unique_ptr<Tokenizer>> MakeBpeTokenizer(BpeVocab vocab) {
  PAGODA_RETURN_IF_ERROR(ValidateBpeVocab(vocab));
  auto pre = vocab.pre_tokenizer_regexes.empty()
                 ? PreTokenizer::ForName(vocab.pre_tokenizer)
                 : PreTokenizer::Compile(vocab.pre_tokenizer_regexes);
  if (!pre.ok()) {
    const std::string field = vocab.pre_tokenizer_regexes.empty()
                                  ? "BpeVocab.pre_tokenizer = '" + vocab.pre_tokenizer + "'"
                                  : std::string("BpeVocab.pre_tokenizer_regexes");
    return InvalidArgument(field + ": " + pre.status().message());
  }
  return std::unique_ptr<Tokenizer>(
      std::make_unique<BpeTokenizer>(std::move(vocab), std::move(pre).value()));
}

}  // namespace pagoda
